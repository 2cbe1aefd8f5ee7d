"""Compression: int8 error bounds and agreement with PyTorch's quantizers, pruning reaching the
asked sparsity (and agreeing with torch.nn.utils.prune), the distillation loss against its formula,
a distilled student run, and clear errors for bad arguments."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import prune

from conftest import tiny_spec
from gpututor import batches, build_model, launch
from gpututor.compression import measure, quantize
from gpututor.compression import prune as pruning
from gpututor.compression.distill import distillation_loss
from gpututor.lessons.compression.runs import launch_distillation
from gpututor.lessons.compression.figures import sparse_timing_figure, tradeoff_figure


def small_model():
    return build_model(tiny_spec(strategy="single", world_size=1)).eval()


def one_batch():
    return next(iter(batches(tiny_spec(strategy="single", world_size=1))))


# ---- quantization -----------------------------------------------------------------------------

def test_int8_rounding_error_is_at_most_half_a_scale_step():
    torch.manual_seed(0)
    w = torch.randn(64, 48) * torch.logspace(-3, 0, 64)[:, None]   # rows of very different size
    q, scale = quantize.quantize_per_channel(w)
    assert q.dtype == torch.int8 and int(q.abs().max()) == 127
    assert torch.equal(q.abs().amax(dim=1), torch.full((64,), 127, dtype=torch.int8))
    error = (quantize.dequantize_per_channel(q, scale) - w).abs()
    assert bool((error <= scale[:, None] / 2 * (1 + 1e-6)).all())
    stats = quantize.quantization_error(w)
    assert stats["max_error_in_scales"] <= 0.5 + 1e-6 and stats["relative_error"] < 0.01


@pytest.mark.skipif(not hasattr(torch, "quantize_per_channel"), reason="removed from torch")
@pytest.mark.filterwarnings("ignore:.*deprecated:UserWarning")
def test_the_int8_size_bound_counts_linear_weights_once_and_leaves_the_tied_head_out():
    model = small_model()
    bound = measure.int8_size_bound(model)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear) and m is not model.head]
    weights = sum(m.weight.numel() for m in linears)
    total = sum(p.numel() for p in model.parameters())   # the tied head once
    assert bound["linear_share"] == pytest.approx(weights / total)
    assert bound["bound"] == pytest.approx(1 - 0.75 * weights / total)
    # the files measured: within the bound's reach (plus scales and, for scratch, the head's copy)
    fp32 = measure.serialized_bytes(model)
    for q in (quantize.quantize_dynamic_int8(model), quantize.quantize_linears(model)):
        assert measure.serialized_bytes(q) / fp32 >= bound["bound"]


def test_sparse_timing_figure_draws_both_kernels():
    rows = [{"sparsity": s, "dense": 1e-4, "sparse_csr": 2e-4 * (1 - s)} for s in (0.0, 0.5, 0.9)]
    fig = sparse_timing_figure(rows)
    assert [list(t.x) for t in fig.data] == [[0.0, 50.0, 90.0]] * 2
    assert list(fig.data[1].y) == pytest.approx([200.0, 100.0, 20.0])


def test_scratch_int8_equals_torch_quantize_per_channel_with_the_same_scales():
    torch.manual_seed(1)
    w = torch.randn(32, 16)
    q, scale = quantize.quantize_per_channel(w)
    theirs = torch.quantize_per_channel(w, scale.double(), torch.zeros(32, dtype=torch.long),
                                        axis=0, dtype=torch.qint8)
    assert torch.equal(theirs.int_repr(), q)
    torch.testing.assert_close(theirs.dequantize(), quantize.dequantize_per_channel(q, scale))


def test_int8_linear_computes_the_dequantized_layer():
    torch.manual_seed(2)
    linear = nn.Linear(16, 8)
    int8 = quantize.Int8Linear.from_linear(linear)
    x = torch.randn(5, 16)
    weight = quantize.dequantize_per_channel(int8.q, int8.scale)
    torch.testing.assert_close(int8(x), F.linear(x, weight, linear.bias))


def test_quantized_models_are_smaller_and_close_to_fp32():
    model = small_model()
    inputs, targets = one_batch()
    fp32_bytes = measure.serialized_bytes(model)
    loss = lambda m: F.cross_entropy(m(inputs).flatten(0, 1), targets.flatten()).item()
    variants = {"scratch": quantize.quantize_linears(model),
                "dynamic": quantize.quantize_dynamic_int8(model)}
    variants["torchao"] = quantize.quantize_torchao_int8(model)   # torchao: in the test extra
    with torch.inference_mode():
        for name, q in variants.items():
            # the tiny GPT's embeddings stay fp32: the file shrinks less than 4x
            assert measure.serialized_bytes(q) < 0.6 * fp32_bytes, name
            assert abs(loss(q) - loss(model)) < 1e-2, name


def test_scratch_int8_agrees_with_torchao_weight_only():
    """torchao's scale is max|w|/127.5 (range -128..127), ours max|w|/127: the int8 values
    differ by at most one step, and the layers' outputs by a fraction of a scale step."""
    torch.manual_seed(3)
    linear = nn.Sequential(nn.Linear(64, 32))
    ours = quantize.quantize_linears(linear)
    theirs = quantize.quantize_torchao_int8(linear)
    their_q = theirs[0].weight.qdata
    assert int((their_q.int() - ours[0].q.int()).abs().max()) <= 1
    x = torch.randn(8, 64)
    with torch.inference_mode():
        torch.testing.assert_close(ours(x), theirs(x), rtol=0, atol=0.02)


# ---- pruning ----------------------------------------------------------------------------------

@pytest.mark.parametrize("sparsity", [0.0, 0.5, 0.9])
def test_magnitude_pruning_reaches_the_asked_sparsity_and_matches_torch_prune(sparsity):
    model = small_model()
    scratch = pruning.prune_magnitude_scratch(model, sparsity)
    production = pruning.make_permanent(pruning.prune_magnitude(model, sparsity))
    for (name, ours), (_, theirs) in zip(pruning.prunable_linears(scratch),
                                         pruning.prunable_linears(production)):
        torch.testing.assert_close(ours.weight, theirs.weight, rtol=0, atol=0, msg=name)
        assert (ours.weight == 0).float().mean().item() == pytest.approx(sparsity,
                                                                         abs=1 / ours.weight.numel())
    assert pruning.weight_sparsity(production) == pytest.approx(sparsity, abs=1e-4)
    # the tied LM head (= the token embedding) is left alone
    assert torch.equal(production.tok_emb.weight, model.tok_emb.weight)


def test_fine_tuning_keeps_pruned_weights_at_zero():
    spec = tiny_spec(strategy="single", world_size=1)
    model = pruning.prune_magnitude(small_model(), 0.9)
    # the reference: the same pruned weights as plain tensors, AdamW on fresh batches, the
    # pruned entries' gradients zeroed by hand (torch's prune keeps weight = weight_orig * mask)
    reference = small_model()
    reference.load_state_dict({k: v.clone() for k, v in model.state_dict().items()
                               if not k.endswith("_orig") and not k.endswith("_mask")}
                              | {k[:-5]: v * model.state_dict()[k[:-5] + "_mask"]
                                 for k, v in model.state_dict().items() if k.endswith("_orig")})
    masks = {name[:-5]: mask for name, mask in model.named_buffers() if name.endswith("_mask")}
    params = dict(reference.named_parameters())
    optimizer = torch.optim.AdamW(params.values(), lr=spec.lr, weight_decay=0.0)
    reference.train()
    expected = []
    for inputs, targets in batches(spec.replace(seed=spec.seed + 1, steps=3)):
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(reference(inputs).flatten(0, 1), targets.flatten())
        loss.backward()
        for name, mask in masks.items():
            params[name].grad *= mask
        optimizer.step()
        expected.append(loss.item())
    result = pruning.fine_tune(model, spec, steps=3)
    assert expected[-1] < expected[0]        # it trains
    torch.testing.assert_close(torch.tensor(result.losses), torch.tensor(expected),
                               rtol=1e-5, atol=1e-6)
    pruning.make_permanent(model)
    assert not any(prune.is_pruned(m) for m in model.modules())
    assert pruning.weight_sparsity(model) == pytest.approx(0.9, abs=1e-4)


def test_shrinking_neurons_computes_what_ln_structured_masking_computes():
    model = small_model()
    inputs, _ = one_batch()
    masked = pruning.make_permanent(pruning.mask_neurons(model, 0.5))
    shrunk = pruning.shrink_mlps(model, 0.5)
    hidden = model.blocks[0].mlp.fc.out_features
    assert shrunk.blocks[0].mlp.fc.out_features == hidden // 2
    assert shrunk.blocks[0].mlp.proj.in_features == hidden // 2
    with torch.inference_mode():
        torch.testing.assert_close(shrunk(inputs), masked(inputs))
    assert measure.serialized_bytes(shrunk) < measure.serialized_bytes(masked)


@pytest.mark.parametrize("call", [
    lambda m: pruning.prune_magnitude(m, 1.0), lambda m: pruning.magnitude_mask(m.head.weight, -0.1),
    lambda m: pruning.shrink_mlps(m, "half"), lambda m: pruning.mask_neurons(m, float("nan"))])
def test_bad_sparsity_is_a_clear_error(call):
    with pytest.raises(ValueError, match=r"sparsity=.* is invalid: allowed is a fraction in \[0, 1\)"):
        call(small_model())


def test_measure_variants_reports_bytes_latency_and_loss():
    spec = tiny_spec(strategy="single", world_size=1)
    model = small_model()
    rows = measure.measure_variants({"fp32": model, "int8": quantize.quantize_linears(model)},
                                    spec, rounds=2, repeats_per_round=1, n_eval_batches=1)
    assert [r["variant"] for r in rows] == ["fp32", "int8"]
    assert all(r["bytes"] > 0 and r["latency_s"] > 0 and math.isfinite(r["loss"]) for r in rows)
    assert rows[1]["bytes"] < rows[0]["bytes"]
    fig = tradeoff_figure(rows)
    assert len(fig.data) == 3
    # each bar's label adds the variant against the first row: ratios, and a loss difference
    int8_size = fig.data[0].text[list(fig.data[0].y).index("int8")]
    assert int8_size.endswith(f"({rows[1]['bytes'] / rows[0]['bytes']:.2f}x)"), int8_size
    fp32_loss = fig.data[2].text[list(fig.data[2].y).index("fp32")]
    assert fp32_loss.endswith("(+0.000)"), fp32_loss


# ---- distillation -----------------------------------------------------------------------------

def test_distillation_loss_equals_its_formula_on_known_logits():
    student = torch.tensor([[1.0, 0.0, -1.0], [0.5, 0.5, 2.0]])
    teacher = torch.tensor([[2.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    targets = torch.tensor([0, 2])
    T, alpha = 2.0, 0.7

    def softmax(row, t):
        e = [math.exp(v / t) for v in row]
        return [v / sum(e) for v in e]

    kl = ce = 0.0
    for s, t, y in zip(student.tolist(), teacher.tolist(), targets.tolist()):
        p, q = softmax(t, T), softmax(s, T)
        kl += sum(pi * math.log(pi / qi) for pi, qi in zip(p, q))
        ce += -math.log(softmax(s, 1.0)[y])
    expected = alpha * T**2 * kl / 2 + (1 - alpha) * ce / 2
    got = distillation_loss(student, teacher, targets, temperature=T, alpha=alpha)
    assert got.item() == pytest.approx(expected, rel=1e-6)
    # alpha = 0 is plain cross-entropy; a student equal to its teacher has no soft loss
    torch.testing.assert_close(distillation_loss(student, teacher, targets, 3.0, 0.0),
                               F.cross_entropy(student, targets))
    assert distillation_loss(teacher, teacher, targets, 3.0, 1.0).item() == pytest.approx(0, abs=1e-6)


@pytest.mark.parametrize("kwargs, message", [
    (dict(temperature=0.0), r"temperature=0.0 is invalid: allowed is a number in \(0, 100\]"),
    (dict(temperature=float("inf")), r"temperature=inf is invalid"),
    (dict(alpha=1.5), r"alpha=1.5 is invalid: allowed is a number in \[0, 1\]"),
    (dict(alpha=True), r"alpha=True is invalid")])
def test_bad_distillation_options_are_clear_errors(kwargs, message):
    logits = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=message):
        distillation_loss(logits, logits, torch.tensor([0, 1]), **kwargs)
    with pytest.raises(ValueError, match=message):
        launch_distillation(tiny_spec(strategy="single", world_size=1), tiny_spec(),
                            "teacher.pt", **kwargs)


def test_distillation_needs_one_rank_and_the_same_data():
    student = tiny_spec(strategy="single", world_size=1)
    with pytest.raises(ValueError, match="world_size=2 is invalid for distillation: allowed is 1"):
        launch_distillation(tiny_spec(), student, "teacher.pt")
    with pytest.raises(ValueError, match=r"teacher_spec.seq_len=16 is invalid: allowed is 32\b"):
        launch_distillation(student, student.replace(seq_len=16), "teacher.pt")


def test_distilled_student_run_with_alpha_0_is_exactly_a_plain_run(tmp_path):
    student = tiny_spec(strategy="single", world_size=1, steps=4)
    teacher = student.replace(model_size="small")
    torch.save(build_model(teacher).state_dict(), tmp_path / "teacher.pt")
    plain = launch(student).wait()
    alone = launch_distillation(student, teacher, tmp_path / "teacher.pt", alpha=0.0).wait()
    torch.testing.assert_close(torch.tensor(alone["losses"]), torch.tensor(plain["losses"]))
    run = launch_distillation(student, teacher, tmp_path / "teacher.pt", temperature=2.0,
                              alpha=0.5, save_state=str(tmp_path / "student.pt"))
    summary = run.wait()
    assert summary["steps"] == 4 and all(math.isfinite(x) for x in summary["losses"])
    assert summary["losses"][0] == plain["losses"][0]   # same start; then the objectives differ
    assert summary["losses"][1:] != plain["losses"][1:]
    assert all(math.isfinite(r["objective"]) for r in run.records)
    build_model(student).load_state_dict(torch.load(tmp_path / "student.pt"))


def test_student_shape_builds_a_smaller_gpt_and_trains_it(tmp_path):
    from gpututor.compression.distill import build_student

    student = tiny_spec(strategy="single", world_size=1, steps=3)
    shape = (("n_layer", 1), ("n_head", 2), ("d_model", 32))
    model = build_student(student, shape)
    assert len(model.blocks) == 1 and model.cfg.d_model == 32
    torch.testing.assert_close(build_student(student)(one_batch()[0]),
                               build_model(student)(one_batch()[0]))  # no shape: spec's model
    # alpha = 0 needs no teacher: the file does not exist, and the run still trains
    summary = launch_distillation(student, student, tmp_path / "missing.pt", alpha=0.0,
                                  student_shape=shape).wait()
    assert summary["steps"] == 3 and summary["params"] == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("shape", [(("n_layer", 0),), (("width", 8),), (("d_model", 30), ("n_head", 4)),
                                   "big", ((1, 2),)])
def test_bad_student_shape_is_a_clear_error(shape):
    from gpututor.compression.distill import build_student

    with pytest.raises(ValueError, match=r"student_shape=.* is invalid: allowed is None or"):
        build_student(tiny_spec(strategy="single", world_size=1), shape)


def test_pruned_latency_is_judged_against_two_models_of_the_same_work():
    from gpututor.lessons.compression.runs import pruned_latency_lines
    rows = [{"variant": "fp32 teacher", "latency_s": 1.04},      # same work: a 4 % gap is noise
            {"variant": "unpruned + 5 steps", "latency_s": 1.00},
            {"variant": "50% weights pruned + 5 steps", "latency_s": 1.02},
            {"variant": "90% weights pruned + 5 steps", "latency_s": 0.80},
            {"variant": "int8", "latency_s": 2.0}]
    lines = pruned_latency_lines(rows, "unpruned + 5 steps")
    assert len(lines) == 2
    assert "1.020x" in lines[0] and "(4.0%:" in lines[0] and "no measurable change" in lines[0]
    assert "0.800x" in lines[1] and "faster beyond" in lines[1]
    rows[3]["latency_s"] = 1.5
    assert "slower beyond" in pruned_latency_lines(rows, "unpruned + 5 steps")[1]


def test_the_noise_floor_counts_each_models_own_jitter():
    from gpututor.lessons.compression.runs import pruned_latency_lines
    rows = [{"variant": "fp32 teacher", "latency_s": 1.00, "latency_median_s": 1.01},
            {"variant": "unpruned + 5 steps", "latency_s": 1.00, "latency_median_s": 1.01},
            {"variant": "50% weights pruned + 5 steps", "latency_s": 0.97, "latency_median_s": 1.05}]
    line, = pruned_latency_lines(rows, "unpruned + 5 steps")
    # the two same-work models agree exactly, but the pruned one's own passes spread 8 %
    assert "no measurable change" in line and "(8.2%:" in line


class _RunsOnLoad:
    """Unpickling this touches ``marker``: what a crafted teacher file could do instead."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        from pathlib import Path
        return (Path.touch, (Path(self.marker),))


def test_the_teacher_file_is_read_as_tensors_only(tmp_path, monkeypatch, one_thread):
    """The distillation task loads the teacher with ``weights_only=True``: a file holding
    anything but tensors is refused unread, even where the environment asks torch for full
    unpickling by default (TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD); the weights it saves load back."""
    import pickle

    from gpututor.compression.distill import DistillTask
    spec = tiny_spec(strategy="single", world_size=1, steps=1)
    marker = tmp_path / "ran"
    torch.save({"weights": _RunsOnLoad(str(marker))}, tmp_path / "teacher.pt")
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(pickle.UnpicklingError):
        DistillTask(spec, str(tmp_path / "teacher.pt"))(spec, 0, 1, torch.device("cpu"),
                                                        emit=lambda record: None)
    assert not marker.exists()
    student = DistillTask(spec, "unused.pt", alpha=0.0, save_state=str(tmp_path / "student.pt"))
    student(spec, 0, 1, torch.device("cpu"), emit=lambda record: None)
    teacher = DistillTask(spec, str(tmp_path / "student.pt"), alpha=0.5)   # saved -> loaded
    teacher(spec, 0, 1, torch.device("cpu"), emit=lambda record: None)
