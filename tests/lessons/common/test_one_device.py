"""Lesson 01b's levers: torch.compile gives eager's numbers (and says clearly when it cannot run),
the levers together train the same model, and the capacity test finds what fits."""
from __future__ import annotations

import pytest
import torch

from gpututor import RunSpec
from gpututor.lessons.one_device_speed import compiled as compiled_mod
from gpututor.lessons.one_device_speed.compiled import (CompilerMissing, compile_costs, compiler_for, fused_ops,
                                       kernels_in, require_compiler, speedup_range)
from gpututor.lessons.common.one_device import Levers, before_and_after, largest_that_fits, loss_gaps

# the spec lesson 01b compiles: the same graph here and there, so Inductor's cache serves the second
LESSON_SPEC = RunSpec(model="gpt", model_size="small", attention="sdpa", batch_size=16,
                      seq_len=64, world_size=1)
NO_COMPILER = compiler_for(torch.device("cpu")) is None


def test_kernel_names_read_as_the_operators_they_fused():
    vocab = {"add", "gelu", "gelu_backward", "native_layer_norm", "_softmax", "masked_fill", "view"}
    assert fused_ops("cpp_fused_add_gelu_gelu_backward_3", vocab) == ["add", "gelu", "gelu_backward"]
    assert fused_ops("cpp_fused__softmax_masked_fill_view_12", vocab) == ["_softmax", "masked_fill", "view"]
    assert fused_ops("triton_per_fused_native_layer_norm_0", vocab) == ["native_layer_norm"]
    assert fused_ops("aten.addmm", vocab) == []
    rows = kernels_in(["def call():\n    cpp_fused_add_native_layer_norm_view_4(buf0)\n"
                       "    cpp_fused_add_native_layer_norm_view_4(buf1)\n"])
    assert rows == [{"kernel": "cpp_fused_add_native_layer_norm_view_4",
                     "ops": ["add", "native_layer_norm", "view"],
                     "computing_ops": ["add", "native_layer_norm"]}]


def test_a_missing_compiler_is_said_before_compiling(monkeypatch):
    monkeypatch.setattr(compiled_mod.shutil, "which", lambda name: None)
    monkeypatch.delenv("CXX", raising=False)
    assert compiler_for(torch.device("cpu")) is None
    with pytest.raises(CompilerMissing, match=r"C\+\+ compiler.*apt install g\+\+"):
        require_compiler(torch.device("cpu"))
    with pytest.raises(CompilerMissing, match="needs a C compiler"):
        require_compiler(torch.device("cuda"))
    with pytest.raises(CompilerMissing):   # before any model is built or compiled
        compile_costs(LESSON_SPEC)


@pytest.mark.skipif(NO_COMPILER, reason="torch.compile on CPU needs a C++ compiler; none on PATH")
@pytest.mark.usefixtures("one_thread")
def test_compiled_step_equals_eager_and_fuses_elementwise_operators():
    result = compile_costs(LESSON_SPEC, steps=2)
    assert result["loss"]["compiled"] == pytest.approx(result["loss"]["eager"], rel=1e-5)
    assert result["max_grad_diff"] < 1e-4
    fused = [k for k in result["kernels"] if len(k["computing_ops"]) >= 2]
    assert fused, f"no kernel fused two operators: {result['kernels']}"
    assert any("native_layer_norm" in k["ops"] for k in result["kernels"])
    assert result["compile_s"] > result["compiled_s"] > 0 and result["eager_s"] > 0
    assert len(result["pairs"]) == 2 and result["speedup_range"] == speedup_range(result["pairs"])


def test_the_speedup_range_is_over_the_interleaved_pairs():
    # lesson 01c prints "not distinguishable" when the range holds 1, a repayment only above it
    assert speedup_range([(0.061, 0.059), (0.133, 0.126)]) == pytest.approx((0.061 / 0.059, 0.133 / 0.126))
    low, high = speedup_range([(0.10, 0.11), (0.10, 0.09)])
    assert low < 1 < high


@pytest.mark.usefixtures("one_thread")
def test_levers_train_the_same_model():
    spec = RunSpec(model="gpt", model_size="tiny", batch_size=8, seq_len=32, world_size=1)
    rows = before_and_after(spec, steps=3, configs=(
        Levers("base"), Levers("sdpa", attention="sdpa"),
        Levers("selective", attention="sdpa", recompute="selective"),
        Levers("8-bit", attention="sdpa", optimizer="adam8bit")))
    base, sdpa, selective, eight = rows
    # SDPA adds in another order: float32 rounding, nothing more (fp64 equality: tests/test_attention.py)
    torch.testing.assert_close(torch.tensor(sdpa["losses"]), torch.tensor(base["losses"]),
                               rtol=1e-4, atol=0)
    torch.testing.assert_close(torch.tensor(selective["losses"]), torch.tensor(sdpa["losses"]))
    torch.testing.assert_close(torch.tensor(eight["losses"]), torch.tensor(base["losses"]),
                               rtol=0, atol=0.05)
    assert base["peak_bytes"] > sdpa["peak_bytes"] > eight["peak_bytes"] > 0
    assert all(r["tokens_per_s"] > 0 for r in rows)
    gaps = loss_gaps(rows)   # what lesson 01b prints: each row's largest loss gap to the row above
    assert list(gaps) == ["sdpa", "selective", "8-bit"]
    assert gaps["sdpa"] < 1e-4 and gaps["selective"] < 1e-4 and 0 < gaps["8-bit"] < 0.05
    assert gaps["8-bit"] == max(abs(a - b) for a, b in zip(eight["losses"], selective["losses"]))


@pytest.mark.usefixtures("one_thread")
def test_the_capacity_decides_what_fits():
    spec = RunSpec(model="gpt", batch_size=8, seq_len=32, world_size=1)
    sizes, lever = ("tiny", "small", "medium"), "SDPA + 8-bit Adam + full recomputation"
    # first the peaks, with room for everything; then a capacity halfway between what the
    # medium model needs without the levers and with them
    peaks = {(r["name"], r["model_size"]): r["peak_bytes"]
             for r in largest_that_fits(spec, 10 ** 12, sizes=sizes)}
    without, with_levers = peaks[("as in lesson 01", "medium")], peaks[(lever, "medium")]
    assert with_levers < without
    capacity = (without + with_levers) // 2
    rows = largest_that_fits(spec, capacity, sizes=sizes)
    fits = {(r["name"], r["model_size"]): r["fits"] for r in rows}
    assert not fits[("as in lesson 01", "medium")] and fits[(lever, "medium")]
    for r in rows:
        assert (r["peak_bytes"] <= capacity) == r["fits"], r
    nothing = largest_that_fits(spec, 1_000_000, sizes=("tiny",))
    assert not any(r["fits"] for r in nothing)
