"""Mixed precision: number formats, the from-scratch loss scaler against GradScaler, master
weights against the plain fp32 loop, and bf16/fp16 runs tracking fp32 within a stated tolerance."""
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import reference_run, tiny_spec
from gpututor import batches, build_model, launch
from gpututor.config import torch_dtype
from gpututor.measure.timing import StepContext
from gpututor.parallel import STRATEGIES, small_model
from gpututor.parallel.single import Single
from gpututor.precision import (DynamicLossScaler, MasterWeightsTrainer, cast_table,
                                flush_to_zero_fraction, format_table, overflow_fraction,
                                replay_scalers, train_master_weights)

# bf16 keeps 8 significant bits. Over 4-6 steps of the tiny GPT, measured here: autocast runs
# of every strategy within 1e-3 of the fp32 loss. We allow 1e-2. (Master weights are checked
# on their weights, where plain bf16 cannot keep up: see the master-weights test.)
BF16_LOSS_TOLERANCE = 1e-2


def test_format_table_matches_ieee_and_bfloat16_layouts():
    table = {row["format"]: row for row in format_table()}
    assert [(table[f]["exponent_bits"], table[f]["mantissa_bits"]) for f in ("fp32", "bf16", "fp16")] \
        == [(8, 23), (8, 7), (5, 10)]
    assert table["fp16"]["max"] == 65504.0
    assert table["fp16"]["smallest_normal"] == 2.0**-14
    assert table["fp16"]["smallest_subnormal"] == 2.0**-24
    assert table["bf16"]["smallest_subnormal"] == 2.0**-133
    assert table["fp32"]["smallest_subnormal"] == 2.0**-149
    assert table["bf16"]["smallest_normal"] == table["fp32"]["smallest_normal"]  # same range


def test_cast_table_shows_overflow_underflow_and_rounding():
    rows = {row["value"]: row for row in cast_table()}
    assert math.isinf(rows[70000.0]["fp16"]) and math.isfinite(rows[70000.0]["bf16"])
    assert rows[1e-8]["fp16"] == 0 and rows[1e-8]["bf16"] != 0
    assert rows[1 + 2**-9]["bf16"] == 1.0 and rows[1 + 2**-9]["fp16"] == 1 + 2**-9


def test_flush_to_zero_and_overflow_fractions():
    t = torch.tensor([1e-9, 1e-3, 1.0, 0.0, 1e5])
    assert flush_to_zero_fraction([t], "fp16") == pytest.approx(1 / 4)      # 1e-9 of 4 nonzero
    assert flush_to_zero_fraction([t], "fp16", scale=1024) == 0.0
    assert overflow_fraction([t], "fp16") == pytest.approx(1 / 5)          # 1e5 > 65504
    assert overflow_fraction([t], "bf16") == 0.0
    with pytest.raises(ValueError, match="dtype='fp8' is invalid"):
        flush_to_zero_fraction([t], "fp8")


def gradient_stream():
    """Per step: a gradient value (inf/nan make an overflow step)."""
    values = [1.0] * 40
    for step in (5, 6, 13, 27):
        values[step] = float("inf")
    values[20] = float("nan")
    return values


def test_scratch_loss_scaler_makes_the_same_decisions_as_grad_scaler():
    rows = replay_scalers(gradient_stream(), init_scale=2.0**10, growth_factor=2.0,
                          backoff_factor=0.5, growth_interval=3)
    for row in rows:
        assert row["scale"] == row["grad_scaler_scale"], row
        assert row["skipped"] == row["grad_scaler_skipped"], row
    assert [r["skipped"] for r in rows] == [not math.isfinite(g) for g in gradient_stream()]
    scales = {r["scale"] for r in rows}
    assert max(scales) > 2.0**10 and min(scales) < 2.0**10  # it grew and backed off


@pytest.mark.parametrize("name, value, allowed", [
    ("init_scale", 0.0, "> 0"), ("growth_factor", 1.0, "> 1"),
    ("backoff_factor", 1.5, "(0, 1)"), ("growth_interval", 0, "integer >= 1")])
def test_bad_loss_scaler_arguments_are_clear_errors(name, value, allowed):
    with pytest.raises(ValueError, match=rf"{name}={value!r} is invalid: allowed is .*{allowed}"):
        DynamicLossScaler(**{name: value})


def test_master_weights_in_fp32_is_exactly_the_plain_loop():
    spec = tiny_spec(strategy="single", world_size=1, steps=4)
    ref_losses, _ = reference_run(spec)
    ours = train_master_weights(spec, "fp32").losses
    torch.testing.assert_close(torch.tensor(ours), torch.tensor(ref_losses))


def layer_norm_gains(state: dict) -> torch.Tensor:
    """Every LayerNorm weight of the GPT (all start at exactly 1.0), as one fp32 vector."""
    return torch.cat([v.float().flatten() for k, v in state.items() if k.endswith(
        ("ln1.weight", "ln2.weight", "ln_f.weight"))])


@pytest.mark.parametrize("dtype, lr, scaler", [
    # bf16 keeps 8 significant bits: just below 1.0 its spacing is 2^-8, so a weight at 1.0
    # moved by less than 2^-9 = 0.00195 rounds back to 1.0. The gains' gradients are at most
    # ~0.01: at lr 0.01 a step moves them by <= 1e-4 (x 3.4 by momentum at step 4).
    ("bf16", 0.01, None),
    # fp16 keeps 11: below 1.0 its spacing is 2^-11, half of it 2.4e-4; at lr 1e-3 a step moves
    # the gains by <= 1e-5 (x 3.4). With loss scaling, as fp16 needs.
    ("fp16", 1e-3, DynamicLossScaler),
])
def test_master_weights_keep_updates_too_small_for_low_precision(dtype, lr, scaler):
    """Every step's update of the LayerNorm gains (at 1.0) is below bf16/fp16's resolution:
    without a master copy they never move; with fp32 master weights they move as in fp32."""
    spec = tiny_spec(strategy="single", world_size=1, steps=4, batch_size=4, seq_len=16,
                     optimizer="sgd", lr=lr)   # SGD: the update is lr x grad, no normalising
    initial = layer_norm_gains(build_model(spec).state_dict())
    assert torch.equal(initial, torch.ones_like(initial))
    _, fp32 = reference_run(spec)
    moved = (layer_norm_gains(fp32) - initial).abs().max()

    def same_as_fp32(state: dict) -> None:
        # bf16 compute changes each gradient by a few of its 2^-8 relative steps, so each update
        # by ~1 % at most: allowed 2^-6 of the largest change (measured: bf16 0.3 %, fp16 0.2 %)
        torch.testing.assert_close(layer_norm_gains(state), layer_norm_gains(fp32), rtol=0,
                                   atol=2.0**-6 * moved.item())

    # the naive way: the model itself in low precision, its optimizer updating it in place
    naive = build_model(spec).to(torch_dtype(dtype))
    optimizer = torch.optim.SGD(naive.parameters(), lr=spec.lr, momentum=0.9)
    for inputs, targets in batches(spec):
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(naive(inputs).flatten(0, 1).float(), targets.flatten()).backward()
        optimizer.step()
    assert torch.equal(layer_norm_gains(naive.state_dict()), initial)   # not one has moved
    with pytest.raises(AssertionError):
        same_as_fp32(naive.state_dict())   # ... while in fp32 they moved by up to `moved`

    trainer = MasterWeightsTrainer(build_model(spec), dtype, spec.lr,
                                   scaler() if scaler else None, optimizer="sgd")
    results = [trainer.step(inputs, targets) for inputs, targets in batches(spec)]
    assert not any(r.skipped for r in results)
    same_as_fp32(trainer.master.state_dict())


def test_fp16_without_room_skips_steps_and_backs_off():
    spec = tiny_spec(strategy="single", world_size=1, steps=3, batch_size=4, seq_len=16)
    # A scale so large that the scaled loss itself overflows fp16's 65504: every step skips.
    results = train_master_weights(spec, "fp16", DynamicLossScaler(init_scale=2.0**40)).results
    assert [r.skipped for r in results] == [True, True, True]
    assert [r.scale for r in results] == [2.0**40, 2.0**39, 2.0**38]


def _strategies():
    return sorted(STRATEGIES)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", _strategies())
def test_bf16_autocast_run_tracks_fp32_for_every_strategy(strategy):
    dims = STRATEGIES[strategy].dims()
    model = small_model(strategy)
    if len(dims) > 1:   # a composed layout: 2 ranks on each model-parallel dim, dp of 1
        mesh = {d: 1 if d == "dp" else 2 for d in dims}
        spec = tiny_spec(strategy=strategy, model=model, precision="bf16", steps=4, mesh=mesh,
                         world_size=math.prod(mesh.values()))
    else:
        spec = tiny_spec(strategy=strategy, model=model, precision="bf16", steps=4,
                         world_size=1 if strategy == "single" else 2)
    summary = launch(spec).wait()
    if STRATEGIES[strategy].trains_as_one_process:
        ref_losses, _ = reference_run(spec)
    else:   # another algorithm than one process (local SGD, DiLoCo): its own fp32 run
        ref_losses = launch(spec.replace(precision="fp32")).wait()["losses"]
    torch.testing.assert_close(torch.tensor(summary["losses"]), torch.tensor(ref_losses),
                               rtol=0, atol=BF16_LOSS_TOLERANCE)


def _unvalidated(spec, **changes):
    """A frozen RunSpec with fields changed *without* validation (fp16 is refused on CPU)."""
    for name, value in changes.items():
        object.__setattr__(spec, name, value)
    return spec


def test_fp16_train_step_uses_grad_scaler_like_the_manual_loop():
    """The wiring of Strategy.train_step for fp16, checked on CPU in this process (runs refuse
    fp16 on CPU; on a GPU the same code runs under CUDA autocast)."""
    from gpututor import batches, build_model

    spec = tiny_spec(strategy="single", world_size=1, steps=3, batch_size=4, seq_len=16)
    data = list(batches(spec))
    model, ref = build_model(spec), build_model(spec)
    ctx = StepContext(_unvalidated(spec.replace(), precision="fp16"), 0, 1, torch.device("cpu"))
    strategy = Single()
    opt = strategy.make_optimizer(model, spec)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=spec.lr, weight_decay=0.0)
    scaler = torch.amp.GradScaler("cpu")
    for inputs, targets in data:
        loss = strategy.train_step(model, opt, [(inputs, targets)], ctx)
        ref_opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.float16):
            ref_loss = torch.nn.functional.cross_entropy(
                ref(inputs).flatten(0, 1).float(), targets.flatten())
        scaler.scale(ref_loss).backward()
        scaler.step(ref_opt)
        scaler.update()
        assert loss == ref_loss.item()
    assert ctx.grad_scaler.get_scale() == scaler.get_scale()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q)


def test_fp16_is_refused_on_cpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    with pytest.raises(ValueError, match="precision='fp16' is invalid on CPU"):
        tiny_spec(precision="fp16")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_fp16_run_with_grad_scaler_tracks_fp32_on_gpu():
    spec = tiny_spec(strategy="single", world_size=1, precision="fp16", steps=6, device="cuda")
    summary = launch(spec).wait()
    ref_losses, _ = reference_run(spec)   # one process in fp32 on CPU
    torch.testing.assert_close(torch.tensor(summary["losses"]), torch.tensor(ref_losses),
                               rtol=0, atol=BF16_LOSS_TOLERANCE)


def test_master_weights_memory_is_fp32_master_plus_low_precision_copy():
    from gpututor import build_model
    from gpututor.models import count_parameters

    spec = tiny_spec(strategy="single", world_size=1, steps=1, batch_size=4, seq_len=16)
    n = count_parameters(build_model(spec))
    memory = train_master_weights(spec, "bf16").memory
    assert memory["master_weights"] == 4 * n and memory["compute_copy"] == 2 * n
    assert 8 * n <= memory["optimizer"] <= 8 * n + 4 * 64   # AdamW's two averages + step counters


def test_the_loss_scale_replay_plot_draws_both_scalers_and_their_skipped_steps():
    from gpututor.ui.plots import loss_scale_replay
    rows = replay_scalers(gradient_stream()[:12], init_scale=2.0**10, growth_interval=3)
    ours, theirs, ours_skipped, theirs_skipped = loss_scale_replay(rows).data
    assert list(ours.y) == [r["scale"] for r in rows]
    assert list(theirs.y) == [r["grad_scaler_scale"] for r in rows]
    assert list(ours_skipped.x) == list(theirs_skipped.x) == [5, 6]   # the two inf steps


def test_cpu_matrix_features_reads_x86_flags_and_arm_features_and_only_low_precision_ones(tmp_path):
    from gpututor.precision import cpu_matrix_features
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile amx_bf16\n")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd fphp asimdhp bf16 i8mm\n")
    old_arm = tmp_path / "old_arm"
    old_arm.write_text("processor\t: 0\nFeatures\t: fp asimd evtstrm crc32\n")
    assert cpu_matrix_features(str(x86)) == ["avx512_bf16", "amx_bf16"]   # no avx2/avx512f/amx_tile
    assert cpu_matrix_features(str(arm)) == ["bf16", "fphp", "asimdhp"]
    assert cpu_matrix_features(str(old_arm)) == []
