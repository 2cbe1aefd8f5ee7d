"""Sweeps and the anatomy of a step: real runs, and the facts lesson 01 states about them."""
import pytest
import torch

from conftest import reference_run, tiny_spec
from gpututor import RunSpec, build_model
from gpututor.ui import plots
from gpututor.measure.flops import model_flops_per_token
from gpututor.lessons.common.sweep import step_anatomy, sweep
from gpututor.measure.matmul import measure_matmul_flops


def single_spec(**changes) -> RunSpec:
    base = dict(model="gpt", model_size="tiny", strategy="single", world_size=1,
                batch_size=8, seq_len=32, steps=4, timeout=20.0)
    base.update(changes)
    return RunSpec(**base)


@pytest.fixture(scope="module")
def checkpointing_sweep():
    seen = []
    summaries = sweep(single_spec(), "activation_checkpointing", [False, True],
                      on_result=seen.append)
    return summaries, seen


# Plain SGD at a large learning rate for the accumulation sweep: a step moves the weights by
# lr x the gradient, so a gradient off by a factor (a missing /grad_accum: 2x) changes the next
# losses by far more than the comparison allows. AdamW would hide it: it divides by sqrt(v), so
# twice the gradient takes the same steps (losses within 6e-7 relative on the tiny GPT).
ACCUM_SPEC = dict(steps=6, optimizer="sgd", lr=0.1)


@pytest.fixture(scope="module")
def grad_accum_sweep():
    return sweep(single_spec(**ACCUM_SPEC), "grad_accum", [1, 2], on_result=lambda s: None)


def test_sweep_returns_one_measured_summary_per_value(checkpointing_sweep):
    summaries, seen = checkpointing_sweep
    assert seen == summaries and len(summaries) == 2
    for value, s in zip([False, True], summaries):
        assert s["status"] == "finished" and s["steps"] == 4
        assert s["sweep_field"] == "activation_checkpointing" and s["sweep_value"] is value
        assert s["spec"]["activation_checkpointing"] is value
        assert s["tokens_per_s"] > 0 and s["step_time_s"] > 0 and s["flops_per_step"] > 0
        assert s["peak_mem_bytes"][0] > 0
        assert all(s["mem_by_category"][c][0] > 0 for c in s["mem_by_category"])


def test_sweep_prints_a_line_per_run(capsys):
    # One step is all warm-up: nothing steady to time, so the line says "not measured", not 0.
    sweep(single_spec(steps=1), "batch_size", [4])
    out = capsys.readouterr().out
    assert "batch_size=4:" in out and "tokens/s not measured" in out and "tokens/s 0" not in out


def test_sweep_rejects_a_bad_value_before_launching():
    with pytest.raises(ValueError, match="batch_size"):
        sweep(single_spec(), "batch_size", [0])


def test_checkpointing_keeps_the_losses_and_cuts_activation_memory(checkpointing_sweep):
    plain, checkpointed = checkpointing_sweep[0]
    # Same ops recomputed on the same inputs: the losses agree to float rounding.
    torch.testing.assert_close(checkpointed["losses"], plain["losses"], rtol=1e-6, atol=1e-6)
    act = lambda s: s["mem_by_category"]["activations"][0]
    assert act(checkpointed) < 0.5 * act(plain)
    # The recomputed forward is counted too: more FLOPs per step for the same model.
    assert checkpointed["flops_per_step"] > plain["flops_per_step"]


def test_grad_accum_gives_the_same_losses_as_the_big_batch(grad_accum_sweep):
    one, two = grad_accum_sweep
    # Two half-batches with loss/2 each add up to the full batch's gradient; only the order of
    # float32 additions differs (~1e-7 relative per step; measured over these 6 steps: 2.4e-7),
    # so 1e-5 on losses of ~3.5-4.6 is tight but safe.
    same_as = lambda losses: torch.testing.assert_close(two["losses"], losses, rtol=1e-5,
                                                        atol=1e-5)
    same_as(one["losses"])
    # The comparison can fail: without the /grad_accum the gradient is 2x, which with SGD is
    # exactly 2x the learning rate (the plain loop at lr x 2: losses off by up to 1.1, where at
    # lr x 1 it agrees to 2.4e-7 on CPU); dividing twice (0.5x: off by up to 0.22) fails too.
    spec = single_spec(**ACCUM_SPEC)
    for scale in (2, 0.5):
        with pytest.raises(AssertionError):
            same_as(reference_run(spec.replace(lr=spec.lr * scale))[0])


def test_grad_accum_activation_memory_scales_with_the_micro_batch(grad_accum_sweep):
    """Lesson 01's exercise answer: activations are proportional to the micro-batch size."""
    one, two = grad_accum_sweep
    act = lambda s: s["mem_by_category"]["activations"][0]
    # Not exactly 1/2: a few activation tensors do not scale with the batch (the causal mask's
    # T x T copy, the position embeddings).
    assert act(two) / act(one) == pytest.approx(0.5, rel=0.05)


def test_step_anatomy_measures_phases_flops_and_memory():
    spec = single_spec(steps=5)
    anatomy = step_anatomy(spec)
    assert set(anatomy.phase_s) == {"forward", "backward", "optimizer"}
    assert all(t > 0 for t in anatomy.phase_s.values())
    assert sum(anatomy.phase_s.values()) <= anatomy.step_time_s * 1.05
    model = build_model(spec)
    tokens = spec.batch_size * spec.seq_len
    assert anatomy.tokens_per_step == tokens
    assert anatomy.flops_per_step == model_flops_per_token(model, spec.seq_len) * tokens
    assert anatomy.achieved_flops == pytest.approx(anatomy.flops_per_step / anatomy.step_time_s)
    assert anatomy.mfu is None  # CPU: no datasheet peak, so no MFU
    # Lesson 01's exercise answers: fp32 parameters and gradients take 4 bytes each; AdamW keeps
    # two fp32 states per parameter (exp_avg, exp_avg_sq) plus a 4-byte step counter per tensor.
    n, tensors = anatomy.params, len(list(model.parameters()))
    assert anatomy.memory["params"] == 4 * n
    assert anatomy.memory["grads"] == 4 * n
    assert anatomy.memory["optimizer"] == 2 * 4 * n + 4 * tensors
    assert anatomy.memory["activations"] > 0
    states = anatomy.memory["params"] + anatomy.memory["optimizer"]
    assert anatomy.peak_mem_bytes >= states + anatomy.memory["activations"]


def test_measure_matmul_flops_is_positive_and_restores_threads():
    threads = torch.get_num_threads()
    rate = measure_matmul_flops(single_spec(), min_time_s=0.05)
    assert rate > 1e8 and torch.get_num_threads() == threads


def test_plots_show_the_values_passed_in(checkpointing_sweep, grad_accum_sweep):
    plain, checkpointed = checkpointing_sweep[0]
    fig = plots.memory_by_category({"plain": plain, "checkpointed": checkpointed})
    activations = [t for t in fig.data if t.name == "activations"][0]
    assert list(activations.y) == [plain["mem_by_category"]["activations"][0] / 1e6,
                                   checkpointed["mem_by_category"]["activations"][0] / 1e6]
    fig = plots.throughput_and_memory(grad_accum_sweep)
    assert list(fig.data[0].x) == [1, 2]
    assert list(fig.data[0].y) == [s["tokens_per_s"] for s in grad_accum_sweep]
    fig = plots.loss_curves({"a": plain["losses"]})
    assert list(fig.data[0].y) == plain["losses"]
    fig = plots.checkpointing_tradeoff({"plain": plain, "checkpointed": checkpointed})
    assert list(fig.data[1].y) == [plain["step_time_s"] * 1e3, checkpointed["step_time_s"] * 1e3]
    fig = plots.phase_times({"forward": 0.01, "backward": 0.02})
    assert list(fig.data[0].y) == [10.0, 20.0]


def test_the_contention_ceiling_runs_two_independent_halves_at_once():
    from gpututor.lessons.start_here.contention import efficiency_against_pair, independent_pair
    spec = tiny_spec(steps=60, batch_size=8)   # steady steps left while both ran (pair.py)
    pair = independent_pair(spec)
    assert [s["world_size"] for s in pair["summaries"]] == [1, 1]
    assert [s["batch_size"] for s in pair["summaries"]] == [4, 4]
    speeds = [s["tokens_per_s"] for s in pair["summaries"]]
    if None in speeds:   # on a loaded machine one half can have no steady step while both ran:
        assert pair["tokens_per_s"] is None   # then the ceiling is "not measured", never a sum
    else:
        assert pair["tokens_per_s"] == sum(speeds)
    assert efficiency_against_pair({"tokens_per_s": pair["tokens_per_s"] / 2}, pair) == 0.5
    assert efficiency_against_pair({"tokens_per_s": None}, pair) is None
