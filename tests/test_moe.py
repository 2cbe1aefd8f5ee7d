"""Mixture of experts and expert parallel: the router, capacity and balancing loss on hand-made
inputs; the MoE trains on one rank; expert parallel (``ep``, ``ddp+ep``) equals one process on
the global batch, with and without dropped tokens; bad specs are refused before launch."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from gpututor import RunSpec, batches, build_model, launch
from gpututor.model_sizes import MoEConfig
from gpututor.measure.timing import StepContext
from gpututor.models import MLP
from gpututor.moe import (MoELayer, auxiliary_loss, expert_capacity, expert_load,
                          load_balancing_loss, route, slot_positions)
from gpututor.parallel import check_spec, get_strategy

close = torch.testing.assert_close


def moe_spec(**changes) -> RunSpec:
    base = dict(model="moe", model_size="tiny", strategy="ep", world_size=2, batch_size=8,
                seq_len=32, steps=4, timeout=20.0)
    return check_spec(RunSpec(**{**base, **changes}))


def moe_reference(spec):
    """One process, the plain loop: build_model + batches + AdamW, the training loss being the
    cross-entropy plus the MoE layers' balancing losses. Returns losses, weights, loads."""
    model = build_model(spec)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    losses, loads = [], []
    for inputs, targets in batches(spec):
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        loss = loss + auxiliary_loss(model)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        loads.append(expert_load(model))
    return losses, model.state_dict(), loads


def layer(n_expert=2, top_k=1, capacity_factor=1.0, d=4) -> MoELayer:
    cfg = MoEConfig(d_model=d, n_expert=n_expert, top_k=top_k, capacity_factor=capacity_factor)
    torch.manual_seed(0)
    return MoELayer(cfg, make_expert=lambda: MLP(d, 2 * d))


def dense_mixture(moe: MoELayer, x: torch.Tensor) -> torch.Tensor:
    """Σ gate · expert(x) over each token's chosen experts, token by token (no capacity)."""
    h = x.reshape(-1, x.shape[-1])
    _, gates, experts = route(moe.router(h), moe.top_k)
    rows = [sum(g * moe.experts[str(int(e))](h[t]) for g, e in zip(gates[t], experts[t]))
            for t in range(len(h))]
    return torch.stack(rows).view(x.shape)


# ---- the router's pieces on hand-made inputs ----------------------------------------------------

def test_gates_are_the_top_k_probabilities_renormalised():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.0, 0.0, 3.0, 1.0]])
    probs, gates, experts = route(logits, top_k=2)
    close(probs, F.softmax(logits, dim=-1))
    assert experts.tolist() == [[0, 1], [2, 3]]
    p = probs[0, :2]
    close(gates[0], p / p.sum())
    close(gates.sum(dim=-1), torch.ones(2))


def test_capacity_is_ceil_of_factor_tokens_k_over_experts():
    assert expert_capacity(tokens=10, top_k=2, n_expert=4, capacity_factor=1.0) == 5
    assert expert_capacity(tokens=10, top_k=2, n_expert=4, capacity_factor=1.25) == 7  # 6.25
    assert expert_capacity(tokens=3, top_k=1, n_expert=2, capacity_factor=1.0) == 2     # 1.5


def test_slots_queue_in_token_order_after_earlier_ranks():
    experts = torch.tensor([[0, 1], [1, 2], [0, 2], [1, 0]])
    assert slot_positions(experts, 3).tolist() == [[0, 0], [1, 0], [1, 1], [2, 2]]
    earlier = torch.tensor([5, 0, 2])   # slots taken by ranks before this one
    assert slot_positions(experts, 3, earlier).tolist() == [[5, 0], [1, 2], [6, 3], [2, 7]]


def test_a_token_over_capacity_is_dropped_and_the_residual_carries_it():
    moe = layer(n_expert=2, top_k=1, capacity_factor=1.0)   # capacity ceil(4·1/2) = 2
    with torch.no_grad():
        moe.router.weight.copy_(torch.tensor([[1.0, 0, 0, 0], [-1.0, 0, 0, 0]]))
    x = torch.randn(1, 4, 4).abs() + 0.1   # feature 0 > 0: every token picks expert 0
    out = moe(x)
    dense = dense_mixture(moe, x)
    close(out[0, :2], dense[0, :2], msg="the first two tokens fit")
    assert torch.equal(out[0, 2:], torch.zeros(2, 4)), "tokens 3 and 4 found expert 0 full"
    load = expert_load(moe)
    assert load == {"expert_tokens": [[2, 0]], "expert_dropped": [[2, 0]]}
    assert expert_load(moe) == {"expert_tokens": [[0, 0]], "expert_dropped": [[0, 0]]}


def test_with_a_large_capacity_factor_nothing_drops():
    moe = layer(n_expert=4, top_k=2, capacity_factor=4.0)   # capacity = every slot
    x = torch.randn(2, 5, 4)
    close(moe(x), dense_mixture(moe, x))
    load = expert_load(moe)
    assert sum(load["expert_tokens"][0]) == 2 * 5 * 2 and sum(load["expert_dropped"][0]) == 0


def test_aux_loss_is_the_switch_formula():
    moe = layer(n_expert=4, top_k=2, capacity_factor=1.0)
    x = torch.randn(3, 5, 4)
    moe(x)
    probs, _, experts = route(moe.router(x.reshape(-1, 4)), 2)
    f = torch.bincount(experts.flatten(), minlength=4) / (15 * 2)   # routed, before dropping
    expected = 4 * sum(f[e] * probs[:, e].mean() for e in range(4))
    close(moe.aux_loss, moe.aux_loss_coef * expected)
    close(load_balancing_loss(torch.full((6, 4), 0.25), torch.full((4,), 0.25)),
          torch.tensor(1.0), msg="uniform routing gives 1")
    close(auxiliary_loss(moe), moe.aux_loss)
    assert auxiliary_loss(nn.Linear(2, 2)) == 0.0


def test_non_moe_steps_record_no_expert_load():
    spec = RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1,
                   batch_size=2, seq_len=8, steps=1)
    strategy, model = get_strategy("single"), build_model(spec)
    ctx = StepContext(spec, 0, 1, torch.device("cpu"))
    strategy.train_step(model, strategy.make_optimizer(model, spec), [next(batches(spec))], ctx)
    assert ctx.extra["expert_tokens"] is None and ctx.extra["expert_dropped"] is None


# ---- training runs ----------------------------------------------------------------------------

def test_moe_trains_on_one_rank_and_records_the_load_per_expert():
    spec = moe_spec(strategy="single", world_size=1, steps=12, lr=1e-2)
    run = launch(spec)
    summary = run.wait()
    records = sorted(run.records, key=lambda r: r["step"])
    losses = [r["loss"] for r in records]
    assert losses == summary["losses"]
    assert losses[-1] < losses[0] - 0.3, losses
    ref_losses, _, ref_loads = moe_reference(spec)
    close(torch.tensor(losses), torch.tensor(ref_losses), rtol=1e-5, atol=1e-6)
    slots = spec.batch_size * spec.seq_len * spec.model_config.top_k
    for record, ref in zip(records, ref_loads):
        assert record["expert_tokens"] == ref["expert_tokens"]
        for kept, dropped in zip(record["expert_tokens"], record["expert_dropped"]):
            assert len(kept) == spec.model_config.n_expert and sum(kept) + sum(dropped) == slots


def run_records(spec) -> list[dict]:
    run = launch(spec)
    run.wait()
    return run.records


def check_equals_one_process(spec, records, expect_drops: bool) -> None:
    ref_losses, ref_state, ref_loads = moe_reference(spec)
    world = spec.world_size
    losses = [sum(r["loss"] for r in records if r["step"] == s) / world for s in range(spec.steps)]
    diff = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
    assert diff <= 1e-4, (losses, ref_losses)
    for record in records:   # every rank counts the global batch's slots, as one process does
        assert record["expert_tokens"] == ref_loads[record["step"]]["expert_tokens"]
        assert record["expert_dropped"] == ref_loads[record["step"]]["expert_dropped"]
        assert record["comm_bytes"] > 0
    dropped = sum(sum(map(sum, load["expert_dropped"])) for load in ref_loads)
    assert (dropped > 0) == expect_drops
    state = torch.load(spec.save_state)
    assert set(state) == set(ref_state)
    for name, ref in ref_state.items():
        close(state[name], ref, rtol=1e-4, atol=5e-5, msg=name)


@pytest.mark.parametrize("capacity_factor, drops", [(2.0, False), (None, True), (0.5, True)],
                         ids=["none-dropped", "default-1.25", "many-dropped"])
def test_expert_parallel_equals_one_process(tmp_path, capacity_factor, drops):
    # capacity_factor = n_expert / top_k: an expert can take every token, nothing drops
    spec = moe_spec(capacity_factor=capacity_factor, save_state=str(tmp_path / "w.pt"))
    check_equals_one_process(spec, run_records(spec), expect_drops=drops)


@pytest.mark.parametrize("strategy, mesh", [("ep", None), ("ddp+ep", {"dp": 2, "ep": 2})])
def test_four_ranks_equal_one_process(tmp_path, strategy, mesh):
    # ep: one expert per rank; ddp+ep: two expert-parallel pairs, DDP between them
    spec = moe_spec(strategy=strategy, world_size=4, mesh=mesh, steps=3, capacity_factor=0.5,
                    save_state=str(tmp_path / "w.pt"))
    check_equals_one_process(spec, run_records(spec), expect_drops=True)


# ---- refused before launch --------------------------------------------------------------------

@pytest.mark.parametrize("changes, field", [
    (dict(model="gpt"), "model='gpt'"),
    (dict(world_size=3, batch_size=6), "world_size=3"),
    (dict(batch_size=7), "batch_size=7"),
    (dict(grad_accum=2), "grad_accum=2"),
    (dict(options=(("bucket_cap_mb", 1),)), "option='bucket_cap_mb'"),
    (dict(strategy="tp"), "model='moe'"),
    (dict(strategy="ddp+ep", world_size=4, mesh={"dp": 2, "ep": 2}, model_size="small",
          batch_size=6), "batch_size=6"),
    (dict(strategy="ddp+ep", world_size=2), "mesh=None"),
])
def test_bad_expert_parallel_specs_are_refused(changes, field):
    with pytest.raises(ValueError, match=field.replace("(", r"\(").replace("+", r"\+")):
        moe_spec(**changes)


@pytest.mark.parametrize("changes, field", [
    (dict(model="gpt", capacity_factor=1.0), "capacity_factor=1.0"),
    (dict(capacity_factor=0.0), "capacity_factor=0.0"),
    (dict(activation_checkpointing=True), "activation_checkpointing=True"),
])
def test_bad_moe_fields_are_refused(changes, field):
    with pytest.raises(ValueError, match=field):
        RunSpec(**{**dict(model="moe", strategy="single", world_size=1), **changes})


def test_cli_moe_ep_equals_single():
    import json
    import subprocess
    import sys
    from pathlib import Path

    def run(*args):
        out = subprocess.run([sys.executable, "-m", "gpututor", "run", "--model", "moe",
                              "--model-size", "tiny", "--batch-size", "8", "--seq-len", "32",
                              "--steps", "3", "--quiet", "--json", "-", *args],
                             cwd=Path(__file__).resolve().parents[1], capture_output=True,
                             text=True, timeout=120, check=True).stdout
        return json.loads(out)

    ep, single = run("--strategy", "ep", "--world-size", "2"), run("--strategy", "single",
                                                                    "--world-size", "1")
    assert ep["strategy"] == "ep" and ep["world_size"] == 2 and ep["model"] == "moe"
    torch.testing.assert_close(torch.tensor(ep["losses"]), torch.tensor(single["losses"]),
                               rtol=1e-4, atol=0)


def test_the_capacity_factor_figure_draws_each_measured_trade_and_no_bar_for_the_unmeasured():
    from gpututor.lessons.mixture_of_experts.figures import capacity_factor_figure
    fig = capacity_factor_figure([
        {"capacity_factor": 0.5, "dropped": 0.25, "final_loss": 3.1, "tokens_per_s": 900.0},
        {"capacity_factor": 2.0, "dropped": 0.0, "final_loss": 3.0, "tokens_per_s": None}])
    dropped, loss, speed = fig.data
    assert list(dropped.y) == [25.0, 0.0] and list(loss.y) == [3.1, 3.0]
    assert list(speed.y) == [900.0, None] and list(speed.text) == ["900", "not measured"]
