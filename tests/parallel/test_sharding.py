"""Sharding: ZeRO-1/2/3 from scratch and FSDP2 train exactly like one process, while each rank
keeps 1/N of what data parallel keeps, and ZeRO-3 moves 1.5x DDP's bytes."""
import pytest
import torch
from torch.distributed.fsdp import FSDPModule

from gpututor import RunSpec, launch
from gpututor.parallel.sharding.flat import FlatShard
from gpututor.plan.memory import model_state_bytes
from gpututor.lessons.sharding.figures import comm_rows, memory_rows, zero_stage
from conftest import SGD, assert_equals_one_process, tiny_spec

SHARDED = ("zero1", "zero2", "zero3", "fsdp")
FSDP_METERED = hasattr(FSDPModule, "set_custom_all_gather")  # torch >= 2.9


@pytest.fixture(scope="module")
def runs():
    """ddp and every sharded strategy on 2 ranks, same spec (AdamW): their summaries."""
    return {name: launch(tiny_spec(strategy=name, world_size=2, steps=4)).wait()
            for name in ("ddp",) + SHARDED}


@pytest.mark.parametrize("name", SHARDED)
def test_sharded_strategy_equals_one_process(tmp_path, name):
    """3 ranks: the tiny GPT's flat parameters do not split evenly (the shards are padded) and
    the average is /3."""
    spec = tiny_spec(strategy=name, world_size=3, batch_size=12, steps=3,
                     save_state=str(tmp_path / "w.pt"), **SGD)
    assert_equals_one_process(spec, launch(spec).wait())   # losses and weights, to ~1e-6


@pytest.mark.parametrize("name", ("ddp",) + SHARDED)
def test_each_rank_holds_what_the_formula_says(runs, name):
    """Parameters, gradients, optimizer state per rank: the formula within 1 % (padding of
    the shards and AdamW's 4-byte step counters are the difference)."""
    summary = runs[name]
    formula = model_state_bytes(summary["params"], zero_stage=zero_stage(name), dp=2,
                                convention="fp32-adamw")
    for category in ("params", "grads", "optimizer"):
        for measured in summary["mem_by_category"][category]:
            assert measured == pytest.approx(formula[category], rel=0.01), category


def test_memory_shrinks_stage_by_stage_and_zero3_keeps_no_gathered_weights(runs):
    peak = {name: runs[name]["peak_mem_bytes"][0] for name in runs}
    assert peak["ddp"] > peak["zero1"] > peak["zero2"]
    assert peak["zero3"] < peak["ddp"] and peak["fsdp"] < peak["ddp"]
    activations = {name: runs[name]["mem_by_category"]["activations"][0] for name in runs}
    # forward frees every block's gathered parameters: what it leaves for backward is exactly
    # what data parallel's forward leaves (autograd keeps where a weight was, not the weight)
    assert activations["zero3"] == activations["ddp"]
    rows = memory_rows(runs)
    assert all(abs(r["state_gap"]) < 0.01 * r["formula_total"] for r in rows)


def test_zero3_moves_one_and_a_half_times_ddps_bytes(runs):
    rows = {r["label"]: r for r in comm_rows(runs)}
    assert rows["zero1"]["vs_baseline"] == pytest.approx(1.0, rel=0.01)  # RS + AG = all-reduce
    assert rows["zero2"]["vs_baseline"] == pytest.approx(1.0, rel=0.01)
    assert rows["zero3"]["vs_baseline"] == pytest.approx(1.5, rel=0.01)  # + AG again in backward
    if FSDP_METERED:
        assert rows["fsdp"]["vs_baseline"] == pytest.approx(1.5, rel=0.02)
    assert all(runs[name]["comm_s"] > 0 for name in ("zero1", "zero2", "zero3"))


@pytest.mark.skipif(not FSDP_METERED, reason="FSDP2's collectives are metered from torch 2.9")
@pytest.mark.parametrize("options", [(), (("reshard_after_forward", False),)])
def test_fsdp_describes_the_collectives_its_ranks_meter(options):
    """fsdp's step_collectives equals what its ranks count: with reshard_after_forward=True
    (passed explicitly, so FSDP2 reshards the root too) every unit is gathered twice; with
    False, once."""
    from gpututor import build_model
    from gpututor.parallel import get_strategy
    spec = tiny_spec(strategy="fsdp", world_size=2, steps=4, options=options)   # step 3 steady
    described = sum(n for _, n in get_strategy("fsdp").step_collectives(spec, build_model(spec)))
    assert launch(spec).wait()["comm_bytes_per_step"] == pytest.approx(described, rel=1e-6)


@pytest.mark.parametrize("name", SHARDED)
def test_accumulation_equals_big_batch(tmp_path, name):
    spec = tiny_spec(strategy=name, world_size=2, steps=3, grad_accum=2,
                     save_state=str(tmp_path / "w.pt"), **SGD)
    # reference_run trains on the whole global batch at once: no micro-batches
    assert_equals_one_process(spec, launch(spec).wait())


@pytest.mark.parametrize("name", ("zero3", "fsdp"))
def test_four_ranks_equal_one_process_with_a_quarter_each(tmp_path, name):
    spec = tiny_spec(strategy=name, world_size=4, steps=2,
                     save_state=str(tmp_path / "w.pt"), **SGD)
    summary = launch(spec).wait()
    assert_equals_one_process(spec, summary)
    quarter = model_state_bytes(summary["params"], zero_stage=3, dp=4,
                                convention="fp32-sgd")["params"]
    assert all(m == pytest.approx(quarter, rel=0.02) for m in summary["mem_by_category"]["params"])


def test_fsdp_options_trade_memory_and_bytes():
    base = tiny_spec(strategy="fsdp", world_size=2, steps=4)
    plain = launch(base).wait()
    kept = launch(base.replace(options=(("reshard_after_forward", False),))).wait()
    bf16 = launch(base.replace(options=(("mixed_precision", "bf16"),))).wait()
    torch.testing.assert_close(torch.tensor(kept["losses"]), torch.tensor(plain["losses"]),
                               rtol=1e-5, atol=1e-6)
    # bf16 compute and all-gathers (8 bits of mantissa), fp32 master weights and reduction
    torch.testing.assert_close(torch.tensor(bf16["losses"]), torch.tensor(plain["losses"]),
                               rtol=2e-2, atol=2e-2)
    # keeping the gathered weights from forward to backward: more activation memory
    assert kept["mem_by_category"]["activations"][0] > plain["mem_by_category"]["activations"][0]
    if FSDP_METERED:
        ratio = lambda s: s["comm_wire_bytes_per_step"] / plain["comm_wire_bytes_per_step"]
        assert ratio(kept) == pytest.approx(2 / 3, rel=0.02)   # AG + RS instead of AG+AG+RS
        assert ratio(bf16) == pytest.approx(2 / 3, rel=0.02)   # 2+2 bytes of AG, 4 of RS vs 12


def test_invalid_choices_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="reshard_after_forward='yes' is invalid: allowed is "
                                         "True or False"):
        tiny_spec(strategy="fsdp", options=(("reshard_after_forward", "yes"),))
    with pytest.raises(ValueError, match="mixed_precision='fp16' is invalid on CPU"):
        tiny_spec(strategy="fsdp", device="cpu", options=(("mixed_precision", "fp16"),))
    with pytest.raises(ValueError, match="option='bucket_cap_mb' is invalid for "
                                         "strategy='zero2'"):
        tiny_spec(strategy="zero2", options=(("bucket_cap_mb", 1),))
    with pytest.raises(ValueError, match="activation_checkpointing=True is invalid with "
                                         "strategy='zero3'"):
        tiny_spec(strategy="zero3", activation_checkpointing=True)


# ---- pure functions: no ranks ------------------------------------------------------------

def test_flat_shard_layout_pads_and_round_trips():
    params = [torch.randn(3, 2), torch.randn(5)]           # 11 numbers on 4 ranks: 3 each
    layouts = [FlatShard(params, rank, 4) for rank in range(4)]
    flat = layouts[0].flatten(params)
    assert flat.numel() == 12 and flat[11] == 0 and layouts[3].start == 9
    assert torch.equal(torch.cat([lay.my_slice(flat) for lay in layouts]), flat)
    for original, view in zip(params, layouts[2].unflatten(flat)):
        assert torch.equal(original, view)


def test_hsdp_shards_within_groups_and_equals_one_process(tmp_path):
    """HSDP on 4 ranks, 2 replicas of 2 shards: each rank keeps half of what data parallel
    keeps (FSDP over all 4 keeps a quarter), and trains like one process."""
    base = tiny_spec(strategy="fsdp", world_size=4, steps=3, optimizer="sgd")
    spec = base.replace(options=(("hsdp_replicas", 2),), save_state=str(tmp_path / "h.pt"))
    hsdp = launch(spec).wait()
    fsdp = launch(base).wait()
    assert_equals_one_process(spec, hsdp)
    params = lambda s: s["mem_by_category"]["params"][0]
    assert params(hsdp) == pytest.approx(2 * params(fsdp), rel=0.05)
    with pytest.raises(ValueError, match="hsdp_replicas=3 is invalid"):
        tiny_spec(strategy="fsdp", world_size=4, options=(("hsdp_replicas", 3),))


def test_zeros_collective_timer_starts_after_the_queued_compute(monkeypatch):
    """On a GPU the compute queued before a collective must finish before its timer starts,
    or ZeRO's communication time includes it: the order is synchronize, start the clock, the
    collective, synchronize, stop (a fake clock and device stand for CUDA's)."""
    import torch.distributed as dist
    from gpututor.measure.timing import CommMeter
    from gpututor.parallel.sharding import flat

    events = []
    clock = iter(range(100))
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(flat.time, "perf_counter", lambda: events.append("clock") or next(clock))
    monkeypatch.setattr(flat, "synchronize", lambda device: events.append("synchronize"))
    monkeypatch.setattr(flat, "all_gather_into_tensor", lambda out, inp: events.append("gather"))
    monkeypatch.setattr(flat, "reduce_scatter_tensor", lambda out, inp: events.append("scatter"))
    meter = CommMeter()
    flat.all_gather(torch.zeros(4), meter)
    flat.reduce_scatter_mean(torch.zeros(8), meter)
    assert events == ["synchronize", "clock", "gather", "synchronize", "clock",
                      "synchronize", "clock", "scatter", "synchronize", "clock"]
    assert meter.busy_s == 2   # each timed from after the first synchronize: 1 tick each


def test_hsdp_meters_its_all_reduce_across_replicas():
    """Issue 44: FSDP2 all-reduces each shard's gradient across the HSDP replicas with
    dist.all_reduce itself (no custom hook); it is metered from the reduce-scatter's end to the
    all-reduce hook, and the step's collectives, kinds and bytes, are what step_collectives says
    (one all-reduce of each unit's shard), where before the all-reduces were missing."""
    from gpututor.models import build_model
    from gpututor.parallel import STRATEGIES
    spec = RunSpec(strategy="fsdp", world_size=4, steps=3, batch_size=8, seq_len=16,
                   device="cpu", timeline=True, options=(("hsdp_replicas", 2),))
    run = launch(spec)
    run.wait()
    predicted = sorted(STRATEGIES["fsdp"].step_collectives(spec, build_model(spec)))
    for record in (r for r in run.records if r.get("timeline")):
        measured = sorted((s["name"], s["bytes"]) for s in record["timeline"]
                          if s["kind"] == "collective")
        assert measured == predicted, record["rank"]
        assert record["comm_bytes"] == sum(b for _, b in predicted)
        assert any(name == "all_reduce" for name, _ in measured)
