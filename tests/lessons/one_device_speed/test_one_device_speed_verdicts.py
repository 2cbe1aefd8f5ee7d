"""Lesson 01c's verdicts: each wording is chosen by the numbers that select it (fed here, nothing
compiled or profiled), and the missing compiler is explained in the notebook's language."""
import pytest
import torch

from gpututor.i18n import set_language
from gpututor.lessons.one_device_speed import verdicts
from gpututor.lessons.one_device_speed.compiled import CompilerMissing, require_compiler


def comp(low: float, high: float, eager_s: float = 0.045, compiled_s: float = 0.044) -> dict:
    return {"speedup_range": (low, high), "pairs": [(eager_s, compiled_s)] * 8,
            "speedup": eager_s / compiled_s, "compile_s": 24.0, "recompile_s": 0.3,
            "eager_s": eager_s, "compiled_s": compiled_s,
            "loss": {"eager": 4.591948, "compiled": 4.591948}, "max_grad_diff": 2.1e-7,
            "kernels": [{"computing_ops": ["add", "gelu", "sum"]}, {"computing_ops": ["add"]},
                        {"computing_ops": ["add", "native_layer_norm"]}]}


def test_compiled_faster_in_every_pair_slower_in_every_pair_or_both():
    headline, details, tone = verdicts.compile_verdict(comp(1.05, 1.2, 0.05, 0.04))
    assert "faster than eager in all 8 pairs (×1.25" in headline and "2,396 steps" in headline   # (24 - 0.04) / (0.05 - 0.04): one compiled step is not start-up
    assert tone == "good" and "first compiled step 24.0 s" in details
    headline, _, tone = verdicts.compile_verdict(comp(0.8, 0.95, 0.04, 0.05))
    assert "slower than eager in all 8 pairs" in headline and "not repaid" in headline
    assert tone == "bad"
    headline, _, tone = verdicts.compile_verdict(comp(0.96, 1.10))
    assert "cannot be told apart" in headline and "(×0.96 to ×1.10)" in headline and tone == "mixed"


def test_kernel_rows_list_the_most_fused_first():
    assert verdicts.kernel_rows(comp(1, 1)) == [["add, gelu, sum"], ["add, native_layer_norm"]]


def parts(compute: float) -> dict:
    rest = (1 - compute) / 3
    return {"wall_s": 0.15, "compute_s": 0.15 * compute, "copy_s": 0.15 * rest,
            "other_s": 0.15 * rest, "idle_s": 0.15 * rest}


def test_profile_mostly_matmul_or_mostly_outside():
    headline, details, _ = verdicts.profile_verdict(parts(0.69), 0.07, 0.25)
    assert headline.startswith("Compute (matmuls and attention) took 69%") and "only faster matmul and attention kernels" in headline
    assert "25% of their time" in headline and "optimizer's phase 7%" in details
    headline, _, _ = verdicts.profile_verdict(parts(0.3), 0.07, 0.6)
    assert headline.startswith("Compute (matmuls and attention) took only 30%")


def test_roofline_fewer_compute_bound_on_the_gpu_or_not():
    headline, details, tone = verdicts.roofline_verdict(11, ["a", "b"], [], "A100-80GB")
    assert "2 of 11 operators are compute-bound here, 0 would be" in headline and tone == "bad"
    assert "in bf16: —" in details
    headline, _, tone = verdicts.roofline_verdict(11, ["a"], ["a", "b"], "A100-80GB")
    assert headline.startswith("2 of 11 operators would be compute-bound") and tone == "good"


def lever(name: str, tokens: float, peak=40e6) -> dict:
    return {"name": name, "tokens_per_s": tokens, "peak_bytes": peak, "losses": [3.18]}


def test_levers_faster_or_slower_per_lever_and_together():
    rows = [lever("as in lesson 01", 16826, 51.1e6), lever("+ SDPA attention", 18997, 46.9e6),
            lever("+ 8-bit Adam state", 15912, 42.0e6), lever("+ torch.compile", 15729, None)]
    gaps = {"+ SDPA attention": 2.4e-7, "+ 8-bit Adam state": 5.4e-4, "+ torch.compile": 2.4e-7}
    headline, details, tone = verdicts.levers_verdict(rows, gaps)
    assert "×0.93 the tokens/s of the first row (as in lesson 01): slower here" in headline
    assert tone == "bad" and "+ SDPA attention: ×1.13 the row above's tokens/s, faster" in details
    assert "time traded for memory (peak 46.9 → 42.0 MB)" in details
    assert "did not beat eager's here" in details
    rows[2]["peak_bytes"] = 50e6
    assert "slower, and its peak not measured lower" in verdicts.levers_verdict(rows, gaps)[1]
    assert "+ 8-bit Adam state: losses up to 5.4e-04" in details
    assert "+ torch.compile: losses within 2.4e-07 of the row above: float rounding" in details
    headline, _, tone = verdicts.levers_verdict(rows[:2], gaps)
    assert headline.startswith("With every lever on, ×1.13") and tone == "good"
    table = verdicts.lever_rows(rows, gaps)
    assert table[0][-1] == "-" and table[3][3] == "not measured" and table[1][2] == "1.13×"


def test_a_missing_compiler_is_said_in_the_notebooks_language(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(CompilerMissing) as caught:
        require_compiler(torch.device("cpu"))
    headline, details, tone = verdicts.compiler_missing_verdict(caught.value)
    assert headline.startswith("No C++ compiler here") and "apt install g++" in details
    assert "CXX, c++, g++, clang++" in details and tone == "bad"
    set_language("zh")
    try:
        headline, details, _ = verdicts.compiler_missing_verdict(caught.value)
        assert "编译器" in headline and "apt install g++" in details and "编译器" in details
    finally:
        set_language("en")


def test_the_published_a100_speedups_are_pytorchs():
    # PyTorch 2.0's announcement: 163 models, 21 % faster in float32, 51 % with AMP, on an A100
    assert verdicts.PUBLISHED_COMPILE_A100 == {"models": 163, "float32": 1.21, "amp": 1.51}
