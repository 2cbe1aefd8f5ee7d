"""The planner: the tiny GPT's memory as built against the live-tensor probe and real runs,
recommendations, bad input, the CLI contract and the widget (published figures reproduced:
test_paper_figures.py)."""
import dataclasses
import json
import subprocess
import sys

import pytest
import torch

from gpututor import RunSpec, build_model, launch
from gpututor.runtime.cli import main as cli_main
from gpututor.data import batches, load_corpus
from gpututor.model_sizes import MODEL_SIZES
from gpututor.measure.memory import LiveBytesProbe, optimizer_tensors
from gpututor.measure.timing import StepContext
from gpututor.parallel import STRATEGIES, get_strategy
from gpututor import catalog
from gpututor.lessons.choosing_hardware.calibrate import predict_run
from gpututor.lessons.choosing_hardware.machine import Machine, fit_alpha_beta
from gpututor.plan.as_built import as_built, tiny_gpt_memory
from gpututor.plan.memory import (PRESETS, Transformer, activation_bytes, model_state_bytes,
                                  per_device_memory, transformer_for_params)
from gpututor.plan.recommend import Config, estimate, recommend

# ---- the tiny GPT as built, against the live-tensor probe and real runs --------------------------

def _cfg(size):
    return dataclasses.replace(MODEL_SIZES["gpt"][size], vocab_size=load_corpus()[0].vocab_size)


def _probe_one_step(spec):
    """One rank, in this process: the worker's probe around the third step (as the worker does)."""
    strategy, model = get_strategy("single"), build_model(spec)
    ctx = StepContext(spec, 0, 1, torch.device("cpu"))
    optimizer = strategy.make_optimizer(model, spec)
    for step, (x, y) in enumerate(batches(spec, 0, 1)):
        ctx.reset()
        if step < 2:
            strategy.train_step(model, optimizer, [(x, y)], ctx)
            continue
        baseline = [*model.parameters(), *model.buffers(), *optimizer_tensors(optimizer)]
        with LiveBytesProbe(baseline) as probe:
            ctx.probe = probe
            strategy.train_step(model, optimizer, [(x, y)], ctx)
        return probe


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "checkpointing"])
@pytest.mark.parametrize("size,batch,seq", [("tiny", 8, 32), ("small", 4, 64)])
def test_tiny_gpt_memory_matches_the_probe(size, batch, seq, checkpointing):
    """The as-built formula predicts the probe's activations exactly and its peak within 1 %."""
    spec = RunSpec(model="gpt", model_size=size, strategy="single", world_size=1,
                   batch_size=batch, seq_len=seq, steps=3,
                   activation_checkpointing=checkpointing)
    probe = _probe_one_step(spec)
    predicted = tiny_gpt_memory(_cfg(size), batch, seq, checkpointing=checkpointing)
    assert predicted["activations"] == probe.forward_end
    assert predicted["peak"] == pytest.approx(probe.peak, rel=0.01)


CALIBRATED = list(as_built())


@pytest.mark.parametrize("strategy", list(as_built()))
def test_predicted_peak_within_10_percent_of_a_real_run(strategy):
    """Every strategy the planner has an as-built table for: a short real run's measured peak
    (rank 0) within 10 %. A strategy missing from the registry, a spec it refuses or a run that
    fails is a failure of this test, not a skip."""
    assert strategy in STRATEGIES, f"plan.as_built describes {strategy!r}, which is not registered"
    world = 1 if strategy == "single" else 2
    spec = RunSpec(model="gpt", model_size="tiny", strategy=strategy, world_size=world,
                   batch_size=8, seq_len=32, steps=3, device="cpu", timeout=20.0)
    machine = Machine(matmul_flops=1e10, comm={op: (1e-5, 1e9) for op in
                      ("all_reduce", "all_gather", "reduce_scatter", "broadcast")},
                      world_size=world, device="cpu", efficiency=0.5)
    predicted = predict_run(spec, machine)
    summary = launch(spec).wait()
    measured = summary["peak_mem_bytes"][0]
    assert predicted["peak"] == pytest.approx(measured, rel=0.10), (predicted, measured)
    assert predicted["step_time_s"] > 0


def test_fit_alpha_beta_recovers_a_ring():
    alpha, beta, n = 20e-6, 2e9, 2
    rows = [{"op": "all_reduce", "bytes": s, "time_s": 2 * (n - 1) * (alpha + s / (n * beta))}
            for s in (2 ** 10, 2 ** 16, 2 ** 20, 2 ** 22)]
    got_alpha, got_beta = fit_alpha_beta(rows, "all_reduce", n)
    assert got_alpha == pytest.approx(alpha, rel=1e-6) and got_beta == pytest.approx(beta, rel=1e-6)


# ---- recommendations -----------------------------------------------------------------------------

def test_small_model_one_gpu_is_enough():
    model = transformer_for_params(125e6, seq_len=1024)
    rec = recommend(model, 2.5e9, gpus=("H100-80GB",), max_gpus=8, budget=100,
                    deadline_days=1, price_per_hour=3.0)
    assert rec.one_gpu_enough and any("one GPU is enough" in n for n in rec.notes)


def test_tensor_parallel_over_pcie_is_link_bound():
    model = PRESETS["70b"]
    slow = estimate(model, 1.4e12, Config("H100-80GB", 64, "pcie4", zero_stage=1, tp=8))
    fast = estimate(model, 1.4e12, Config("H100-80GB", 64, "nvlink4", zero_stage=1, tp=8))
    assert slow.link_bound and not fast.link_bound
    # the wait is tensor parallel's, inside the node: the reason names PCIe, not InfiniBand
    reason = next(r for r in slow.reasons if "link-bound" in r)
    assert slow.step["tp_comm_s"] > max(slow.step["dp_exposed_s"], slow.step["pp_comm_s"])
    assert "tensor-parallel traffic over pcie4" in reason, reason
    assert slow.total_s > 2 * fast.total_s


def test_70b_does_not_fit_one_gpu_and_says_why():
    est = estimate(PRESETS["70b"], 1.4e12, Config("H100-80GB", 1))
    assert not est.fits
    assert any("model states alone" in r for r in est.reasons)
    rec = recommend(PRESETS["70b"], 1.4e12, counts=[1, 2, 4])
    assert rec.ranked == [] and "nothing tried fits" in rec.notes[0]


def test_user_gpu_link_and_price():
    gpu = catalog.add_gpu("MyCard-48GB", 48, {"bf16": 200, "fp32": 50}, 1000, ("pcie4",),
                          price_per_hour=1.0)
    try:
        est = estimate(transformer_for_params(1e9), 20e9, Config("MyCard-48GB", 2, "pcie4"))
        assert est.cost == pytest.approx(est.total_s / 3600 * 2 * 1.0)
        assert est.price_source == "given"
    finally:
        catalog.GPUS.pop(gpu.name)


# ---- bad input: a clear ValueError naming the field, the value and what is allowed ---------------

@pytest.mark.parametrize("call,message", [
    (lambda: model_state_bytes(-1), "n_params=-1 is invalid"),
    (lambda: model_state_bytes(1e9, zero_stage=4),
     "zero_stage=4 is invalid: allowed values are 0, 1, 2, 3"),
    (lambda: model_state_bytes(1e9, precision="fp8"), "precision='fp8' is invalid"),
    (lambda: model_state_bytes(1e9, optimizer="lion"), "optimizer='lion' is invalid"),
    (lambda: Config("H100-80GB", 6, tp=4), "count=6 is invalid with tp=4"),
    (lambda: Config("H100-80GB", 16, tp=16), "tp=16 is invalid"),
    (lambda: Config("B999"), "gpu='B999' is invalid: allowed values are 'V100-32GB'"),
    (lambda: Config(link="ethernet"), "link='ethernet' is invalid"),
    (lambda: Config(count=0), "count=0 is invalid"),
    (lambda: estimate(PRESETS["7b"], 1e9, Config("H100-80GB", 3, pp=3)), "pp=3 is invalid"),
    (lambda: estimate(PRESETS["7b"], -5, Config()), "tokens=-5 is invalid"),
    (lambda: catalog.get_gpu("T4-16GB").peak("bf16"),   # (a plan for it uses fp16: below)
     "precision='bf16' is invalid on gpu='T4-16GB'"),
    (lambda: activation_bytes(PRESETS["7b"], pp=5), "pp=5 is invalid for 32 layers"),
    (lambda: Transformer(4, 100, 3), "n_head=3 is invalid with d_model=100"),
    (lambda: per_device_memory(PRESETS["7b"], tp=3), "tp=3 is invalid"),
    (lambda: catalog.add_gpu("x", -1, {"bf16": 1}, 1), "memory_gb=-1 is invalid"),
])
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match="allowed") as info:
        call()
    assert message in str(info.value)


# ---- the command line ----------------------------------------------------------------------------

PLAN_ARGS = ["plan", "--params", "7e9", "--gpus", "8", "--zero-stage", "3", "--tp", "1",
             "--pp", "1", "--precision", "bf16", "--optimizer", "adam"]


def test_cli_plan_json_has_bytes_by_category_and_time_and_cost(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert cli_main([*PLAN_ARGS, "--json", str(out)]) == 0
    plan = json.loads(out.read_text())
    per_device = plan["per_device_bytes"]
    assert set(per_device) == {"params", "grads", "optimizer", "activations", "total"}
    parts = sum(v for k, v in per_device.items() if k != "total")
    assert per_device["total"] == pytest.approx(parts)
    # ZeRO-3 over 8: 16 bytes per parameter / 8, plus two gathered layers of parameters
    assert per_device["optimizer"] == pytest.approx(7e9 * 12 / 8)
    assert plan["fits"] is True and plan["time"]["total_s"] > 0 and plan["cost"]["amount"] > 0 and plan["cost"]["currency"] == "USD"
    assert "fits in memory" in capsys.readouterr().out


def test_cli_plan_does_not_fit_is_an_answer(capsys):
    assert cli_main(["plan", "--model", "70b", "--gpus", "1", "--json", "-"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["fits"] is False and any("does not fit" in r for r in plan["explanation"])


def test_cli_plan_recommend(capsys):
    assert cli_main(["plan", "--params", "1.3e9", "--gpus", "8", "--recommend", "--json", "-",
                     "--deadline-days", "30", "--price", "2.5"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["ranked"] and plan["ranked"][0]["fits"] and plan["notes"]


@pytest.mark.parametrize("args,message", [
    (["--params", "7e9", "--gpus", "6", "--tp", "4"], "count=6 is invalid"),
    (["--params", "7e9", "--gpu", "nope"], "gpu='nope' is invalid"),
    (["--params", "-3"], "n_params=-3.0 is invalid"),
    (["--params", "7e9", "--zero-stage", "5"], "zero_stage=5 is invalid"),
    (["--gpus", "2"], "allowed is exactly one of"),
])
def test_cli_plan_bad_input(args, message, capsys):
    assert cli_main(["plan", *args]) == 2
    assert message in capsys.readouterr().err


def test_cli_plan_subprocess_entry_point():
    result = subprocess.run([sys.executable, "-m", "gpututor", *PLAN_ARGS, "--json", "-"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["per_device_bytes"]["total"] > 0


# ---- the widget ----------------------------------------------------------------------------------

def test_widget_ranks_and_explains():
    from gpututor.lessons.choosing_hardware.figures import PlannerWidget
    w = PlannerWidget(params=125e6, tokens=2.5e9, count=8, budget=100, deadline_days=1,
                      price_per_hour=3.0)
    assert w.recommendation.one_gpu_enough and "One GPU is enough" in w.output.value   # headline
    w.params.value = 7e10           # 70B on at most 8 H100s: nothing fits, and it says so
    assert not w.recommendation.ranked and "Nothing tried fits" in w.output.value
    w.gpu.value = "T4-16GB"         # no bf16 units: the widget plans fp16 instead
    assert "fp16" in w.status.value


def test_calibrate_predicts_then_measures():
    """The calibration loop: two fitted references, predictions for the rest, unknowns skipped."""
    from gpututor.lessons.choosing_hardware.calibrate import calibrate, calibration_table
    base = RunSpec(model="gpt", model_size="tiny", batch_size=8, seq_len=32, steps=4,
                   device="cpu", timeout=20.0)
    cal = calibrate(base, strategies=["ddp", "no-such-strategy"], report=None)
    labels = [r["run"] for r in cal.rows]
    assert labels == ["single (reference)", "single, half batch (ref.)",
                      "single + checkpointing", "ddp"]
    assert [r["fitted"] for r in cal.rows] == [True, True, False, False]
    assert all(abs(r["peak_error"]) < 0.10 for r in cal.rows)
    assert ("no-such-strategy", "not registered") in cal.skipped
    assert "skipped no-such-strategy" in calibration_table(cal)


def test_a_gpu_without_bf16_is_planned_in_fp16_and_says_so():
    """V100 and T4 have no bf16: asked for the default bf16, the planner plans fp16 with loss
    scaling (at their fp16 tensor peak) instead of raising, and the first reason says so."""
    model = transformer_for_params(1.3e9, seq_len=2048)
    v100 = estimate(model, 26e9, Config("V100-32GB", 8, "nvlink2", zero_stage=1))
    assert v100.reasons[0].startswith("precision: V100-32GB has no bf16, so this plans fp16")
    assert v100.step["flops_per_gpu"] / v100.step["compute_s"] == pytest.approx(
        catalog.get_gpu("V100-32GB").peak("fp16") * 0.4)    # fp16's peak at the default MFU
    a100 = estimate(model, 26e9, Config("A100-80GB", 8, "nvlink3", zero_stage=1))
    assert not a100.reasons[0].startswith("precision:")
    rec = recommend(model, 26e9, gpus=("V100-32GB", "A100-80GB"), counts=(8,))
    assert {e.config.gpu for e in rec.ranked} == {"V100-32GB", "A100-80GB"}
