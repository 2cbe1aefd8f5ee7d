"""Context parallel: ring attention equals full causal attention (forward and the gradients of
q, k, v), the zig-zag split balances causal work, training with cp equals one process, bad specs
are refused before launch, and what torch's own context_parallel does on CPU."""
import json
import subprocess
import sys
from pathlib import Path

import cloudpickle
import pytest
import torch

from gpututor import RunSpec, launch
from gpututor.parallel import check_spec
from gpututor.parallel.context_parallel import causal_work, ring_step_work, split_positions
from conftest import assert_equals_one_process, tiny_spec

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the ranks run this file's tasks

close = torch.testing.assert_close


def _ring_attention_task(spec, rank, world, device, emit):
    """In every rank: ring attention on this rank's positions against full causal attention on
    the whole sequence (the same inputs and upstream gradient on every rank), both splits."""
    from gpututor.attention import naive_attention
    from gpututor.measure.timing import CommMeter
    from gpututor.parallel.context_parallel import Ring, ring_attention

    B, H, T, D = 2, 3, 8 * world, 4
    diffs = {}
    for split in ("zigzag", "contiguous"):
        for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
            torch.manual_seed(0)
            q, k, v = (torch.randn(B, H, T, D, dtype=dtype, requires_grad=True) for _ in range(3))
            upstream = torch.randn(B, H, T, D, dtype=dtype)
            full = naive_attention(q, k, v)
            full.backward(upstream)
            positions = split_positions(T, world, split)
            mine = positions[rank]
            local = [t.detach()[..., mine, :].clone().requires_grad_() for t in (q, k, v)]
            meter = CommMeter(world_size=world)
            out = ring_attention(*local, positions, Ring(rank, world, meter=meter))
            out.backward(upstream[..., mine, :])
            pairs = [("out", out, full)] + [(f"d{n}", a.grad, b.grad) for n, a, b in
                                            zip("qkv", local, (q, k, v))]
            for name, got, want in pairs:
                close(got, want[..., mine, :], rtol=tol, atol=tol, msg=f"{split} {dtype} {name}")
                diffs[f"{split}_{str(dtype)[6:]}_{name}"] = (got - want[..., mine, :]).abs().max().item()
            # forward: n-1 shifts of the k/v block; backward: n-1 again, and n of their gradients
            block = 2 * B * H * (T // world) * D * local[0].element_size()
            assert meter.calls == 3 * world - 2 and meter.bytes == (3 * world - 2) * block
            # the planner prices the same count: one formula for both
            from gpututor.formulas import ring_attention_shifts
            assert ring_attention_shifts(world) == meter.calls
    emit({"step": 0, **diffs})


@pytest.mark.parametrize("world", [2, 4])
def test_ring_attention_equals_full_causal_attention(world):
    records = launch(tiny_spec(strategy="cp", world_size=world), task=_ring_attention_task).wait()
    assert len(records) == world
    assert max(v for r in records for k, v in r.items() if k.endswith("float64_dk")) < 1e-12


def test_zigzag_split_balances_causal_work():
    assert split_positions(16, 2).tolist() == [[0, 1, 2, 3, 12, 13, 14, 15],
                                               [4, 5, 6, 7, 8, 9, 10, 11]]
    assert split_positions(16, 2, "contiguous").tolist() == [list(range(8)), list(range(8, 16))]
    for n in (2, 4):
        T = 64
        zigzag, contiguous = causal_work(T, n, "zigzag"), causal_work(T, n, "contiguous")
        assert sum(zigzag) == sum(contiguous) == T * (T + 1) // 2   # the same attention in all
        assert len(set(zigzag)) == 1                                # ... equally shared
        assert contiguous == sorted(contiguous) and contiguous[-1] > 2 * contiguous[0]
        # in the ring every step waits for its busiest rank: zig-zag wastes no step
        steps = ring_step_work(T, n, "zigzag")
        assert (steps == steps[:, :1]).all() and steps.sum() == T * (T + 1) // 2
        assert ring_step_work(T, n, "contiguous").amax(dim=1).sum() > steps.amax(dim=1).sum()


@pytest.mark.parametrize("strategy,world,mesh,split", [
    ("cp", 2, None, "zigzag"), ("cp", 2, None, "contiguous"), ("cp", 4, None, "zigzag"),
    ("ddp+cp", 4, {"dp": 2, "cp": 2}, "zigzag")])
def test_context_parallel_training_equals_one_process(tmp_path, strategy, world, mesh, split):
    spec = tiny_spec(strategy=strategy, world_size=world, mesh=mesh, steps=4, optimizer="sgd",
                     options=(("cp_split", split),), save_state=str(tmp_path / "cp.pt"))
    summary = launch(spec).wait()
    assert_equals_one_process(spec, summary, weights_atol=1e-5)
    if strategy == "cp":   # metered: per attention and step 3n-2 shifts of a k/v block (forward
        # n-1; backward n-1 and n of their gradients), then one all-reduce of every gradient
        block = 2 * spec.batch_size * (spec.seq_len // world) * 96 * 4   # tiny GPT: d_model 96
        shifts = 2 * (3 * world - 2)                                    # ... and 2 blocks
        assert summary["comm_bytes_per_step"] == shifts * block + summary["params"] * 4
        assert summary["comm_s"] is not None and summary["comm_s"] > 0   # it did send them


def test_bad_specs_are_refused_before_launch():
    with pytest.raises(ValueError, match=r"model='mlp' is invalid for strategy='cp'.*allowed is 'gpt'"):
        tiny_spec(strategy="cp", model="mlp", model_size="small")
    with pytest.raises(ValueError, match=r"seq_len=30 is invalid for strategy='cp' with "
                       r"world_size=2 and cp_split='zigzag': allowed is a multiple of 4"):
        tiny_spec(strategy="cp", seq_len=30)
    tiny_spec(strategy="cp", seq_len=30, options=(("cp_split", "contiguous"),))   # 30 = 2 x 15
    with pytest.raises(ValueError, match=r"seq_len=30 is invalid .*mesh cp=4 .*multiple of 4"):
        tiny_spec(strategy="cp", world_size=4, mesh={"cp": 4}, seq_len=30,
                  options=(("cp_split", "contiguous"),))
    with pytest.raises(ValueError, match=r"attention='sdpa' is invalid for strategy='cp'"):
        tiny_spec(strategy="cp", attention="sdpa")
    with pytest.raises(ValueError, match=r"option cp_split='ring' is invalid: allowed is "
                       r"'zigzag' or 'contiguous'"):
        tiny_spec(strategy="cp", options=(("cp_split", "ring"),))
    with pytest.raises(ValueError, match=r"mesh=\{'dp': 2, 'cp': 2\} is invalid for strategy='cp'"):
        check_spec(RunSpec(strategy="cp", world_size=4, mesh={"dp": 2, "cp": 2}, batch_size=8))
    with pytest.raises(ValueError, match=r"seq_len=34 is invalid for strategy='cp' with mesh cp=2"):
        check_spec(RunSpec(strategy="ddp+cp", world_size=4, mesh={"dp": 2, "cp": 2}, seq_len=34))


def test_torch_context_parallel_on_cpu():
    """torch 2.13 on CPU: "Operator aten._scaled_dot_product_flash_attention_for_cpu.default does
    not have a sharding strategy registered" (its ring covers SDPA's CUDA kernels only). Where
    it runs (a GPU, a later torch), it must equal full attention."""
    from gpututor.lessons.long_context.runs import TorchContextParallelCheck

    spec = tiny_spec(strategy="cp", world_size=2)
    for record in launch(spec, task=TorchContextParallelCheck()).wait():
        if spec.resolved_device() == "cpu" and not record["ran"]:
            assert "_scaled_dot_product_flash_attention_for_cpu" in record["error"]
            assert "does not have a sharding strategy" in record["error"]
            # what the lesson prints as the reason: the operator SDPA ran, not in the ring's table
            assert record["sdpa_ops"] == ["aten._scaled_dot_product_flash_attention_for_cpu.default"]
            assert "aten._scaled_dot_product_flash_attention.default" in record["ring_ops"]
            assert not set(record["sdpa_ops"]) & set(record["ring_ops"])
            assert record["rotate_method"] == "ALL_GATHER"   # torch 2.13's default (Llama 3's way)
        else:
            assert record["ran"], record["error"]
            assert record["max_difference"] < 1e-5


def test_cli_cp_equals_single():
    # SGD at lr 0.1: a gradient off by 2x changes the second loss by 0.12, 2.5 % (AdamW: by
    # ~1e-6 relative, under the 1e-4 below; see test_data_parallel)
    def run(*args):
        out = subprocess.run([sys.executable, "-m", "gpututor", "run", "--model-size", "tiny",
                              "--batch-size", "8", "--seq-len", "32", "--steps", "3",
                              "--optimizer", "sgd", "--lr", "0.1", "--quiet",
                              "--json", "-", *args], cwd=Path(__file__).resolve().parents[2],
                             capture_output=True, text=True, timeout=120, check=True).stdout
        return json.loads(out)

    cp, single = run("--strategy", "cp", "--world-size", "2"), run("--strategy", "single",
                                                                    "--world-size", "1")
    assert cp["strategy"] == "cp" and cp["world_size"] == 2
    close(torch.tensor(cp["losses"]), torch.tensor(single["losses"]), rtol=1e-4, atol=0)
