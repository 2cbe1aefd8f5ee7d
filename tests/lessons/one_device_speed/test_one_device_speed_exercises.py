"""Lesson 01c's checkers (``gpututor.lessons.one_device_speed.exercises``): each accepts the
lesson's published solution, read from its Solutions cell, and rejects plausible wrong answers,
each named by the mistake it models; the intensity checker also refuses the package's own count."""
import math
import re

import numpy as np
import pytest
import torch

from gpututor import RunSpec
from gpututor.i18n import ZH, set_language
from gpututor.lessons.one_device_speed import exercises as speed
from gpututor.lessons.one_device_speed.exercises import (check_compute_bound_rows,
                                                         check_matmul_intensity,
                                                         _fewest_compute_bound_rows)
from gpututor.measure import roofline
from gpututor.measure.roofline import catalog_roofs, matmul_elements, matmul_intensity
from exercise_solutions import published as _published, rejected

SPEC = RunSpec(model="gpt", model_size="small", batch_size=16, seq_len=64, world_size=1)
WIDE = SPEC.replace(model_size="large")
A100 = catalog_roofs(("A100-80GB",), "bf16")[0]


def published(variable: str, **names):
    return _published("01c_one_device_speed", variable, **names)


# ---- the package's count: one home for every matmul's bytes ---------------------------------

def test_the_roofline_counts_its_matmuls_and_linears_with_matmul_elements():
    """``operator_costs`` rows' elements are ``matmul_elements``' count (a linear adds its bias):
    the count exercise 1 asks for is the one the roofline plots."""
    cfg = SPEC.model_config
    rows, d, T = SPEC.batch_size * SPEC.seq_len, cfg.d_model, SPEC.seq_len
    model = roofline.build_model(SPEC)
    ops = {op: nbytes for op, _, _, nbytes, _ in roofline._operators(
        model, SPEC.batch_size, SPEC.seq_len, torch.device("cpu"), torch.float32)}
    assert ops["linear: MLP fc"] == matmul_elements(rows, d, 4 * d, bias=4 * d) * 4
    assert ops["linear: LM head"] == matmul_elements(rows, d, cfg.vocab_size) * 4   # no bias
    bh, hd = SPEC.batch_size * cfg.n_head, d // cfg.n_head
    assert ops["matmul: attention scores q·kᵀ"] == matmul_elements(T, hd, T, batches=bh) * 4
    assert ops["matmul: attention mix p·v"] == matmul_elements(T, T, hd, batches=bh) * 4
    assert matmul_intensity(2, 3, 4, 2) == 2 * 2 * 3 * 4 / ((6 + 12 + 8) * 2)


# ---- exercise 1: a matmul's intensity ----------------------------------------------------------

def test_matmul_intensity_takes_the_solution_and_rejects_the_classic_mistakes(capsys):
    check_matmul_intensity(published("my_matmul_intensity"))
    assert "Correct: the roofline's FLOPs per byte for 6 shapes, at 4 and at 2 bytes" in \
        capsys.readouterr().out
    wrong = {
        "forgot the output's write": (lambda m, k, n, b: 2 * m * k * n / ((m * k + k * n) * b),
                                      "the output forgotten"),
        "m·k·n FLOPs, not 2·m·k·n": (lambda m, k, n, b: m * k * n / ((m * k + k * n + m * n) * b),
                                     "A multiply and an add are two FLOPs"),
        "bytes_per_element ignored (always fp32)":
            (lambda m, k, n, b: 2 * m * k * n / ((m * k + k * n + m * n) * 4),
             "bytes_per_element ignored"),
        "elements, not bytes": (lambda m, k, n, b: 2 * m * k * n / (m * k + k * n + m * n),
                                "Count the FLOPs"),
        "a number, not a function": (1.6, "must be a function"),
    }
    for mistake, (answer, message) in wrong.items():
        rejected(check_matmul_intensity, answer, match=message)


def test_matmul_intensity_accepts_any_numeric_return_and_refuses_the_package():
    check_matmul_intensity(lambda m, k, n, b: np.float64(2 * m * k * n / ((m * k + k * n + m * n) * b)))
    check_matmul_intensity(lambda m, k, n, b: torch.tensor(2.0 * m * k * n) / ((m * k + k * n + m * n) * b))
    rejected(check_matmul_intensity, matmul_intensity, match="called the package's own count")
    rejected(check_matmul_intensity, lambda m, k, n, b: 2 * m * k * n / (matmul_elements(m, k, n) * b),
             match="called the package's own count")
    assert matmul_intensity(4, 4, 4, 4) > 0    # and it works again afterwards
    rejected(check_matmul_intensity, lambda m, k, n, b: 1 / 0, match="ZeroDivisionError")


def test_matmul_intensity_not_answered(capsys):
    check_matmul_intensity(...)
    assert "Not answered yet" in capsys.readouterr().out


# ---- exercise 2: the fewest rows at which the up-projection is compute-bound ------------------

def test_fewest_rows_is_where_the_intensity_first_reaches_the_ridge():
    k, n = speed._up_projection(WIDE)
    assert (k, n) == (256, 1024)
    m = _fewest_compute_bound_rows(k, n, 2, A100["ridge"])
    assert matmul_intensity(m, k, n, 2) >= A100["ridge"] > matmul_intensity(m - 1, k, n, 2)
    # the lesson's small GPT never gets there: its bf16 intensity levels off at 0.8 * 128
    assert _fewest_compute_bound_rows(*speed._up_projection(SPEC), 2, A100["ridge"]) is None
    with pytest.raises(ValueError, match="pass a wider model"):
        check_compute_bound_rows(100, SPEC)


def test_compute_bound_rows_takes_the_solution_and_rejects_the_classic_mistakes(capsys):
    answer = published("my_rows", wide=WIDE, a100=A100)
    check_compute_bound_rows(answer, WIDE)
    assert "Correct. fewest rows at which the MLP up-projection is compute-bound" in \
        capsys.readouterr().out
    k, n, ridge = 256, 1024, A100["ridge"]
    cpu_ridge = 8.0   # a one-thread CPU's ridge is of this order (peak / copy bandwidth)
    wrong = {
        "this CPU's ridge, not the A100's": _fewest_compute_bound_rows(k, n, 2, cpu_ridge),
        "the H100's ridge": _fewest_compute_bound_rows(
            k, n, 2, catalog_roofs(("H100-80GB",), "bf16")[0]["ridge"]),
        "m·k·n FLOPs: half the intensity": _fewest_compute_bound_rows(k, n, 2, 2 * ridge) or 10**9,
        "the output forgotten": next(m for m in range(1, 10**5)
                                     if 2 * m * k * n / ((m * k + k * n) * 2) >= ridge),
    }
    for mistake, value in wrong.items():
        rejected(check_compute_bound_rows, value, WIDE,
                 match=re.escape(f"{value!r} is not what the formula gives"))
    # 4-byte elements: no m reaches the ridge; the closed form turns negative
    four_bytes = math.ceil(4 * ridge * k * n / (2 * k * n - 4 * ridge * (k + n)))
    rejected(check_compute_bound_rows, four_bytes, WIDE, match="Solved for 4-byte elements")
    rejected(check_compute_bound_rows, None, WIDE, match="not what the formula gives")


def test_compute_bound_rows_allows_the_printed_ridge_and_the_bias():
    k, n = 256, 1024
    exact = _fewest_compute_bound_rows(k, n, 2, A100["ridge"])
    printed = _fewest_compute_bound_rows(k, n, 2, round(A100["ridge"]))      # "ridge at 153"
    with_bias = next(m for m in range(1, 10**5)
                     if 2 * m * k * n / ((m * k + k * n + m * n + n) * 2) >= A100["ridge"])
    for answer in (exact, printed, with_bias, float(exact), np.int64(exact), exact - 0.4):
        check_compute_bound_rows(answer, WIDE)


def test_the_checkers_speak_chinese():
    set_language("zh")
    try:
        for template in ("Not answered yet: define my_matmul_intensity and run the cell again.",
                         "fewest rows at which the MLP up-projection is compute-bound"):
            assert template in ZH
        with pytest.raises(AssertionError) as raised:
            check_matmul_intensity(lambda m, k, n, b: m * k * n / ((m * k + k * n + m * n) * b))
        assert "矩阵乘法" in str(raised.value) and "两个 FLOPs" in str(raised.value)
        with pytest.raises(AssertionError) as raised:
            check_compute_bound_rows(-5, WIDE)
        assert "脊点" in str(raised.value)
    finally:
        set_language("en")


def test_a_table_filled_beforehand_does_not_pass_the_intensity_check():
    """The check draws one shape when it runs: answers looked up from the published shapes fail."""
    from gpututor.lessons.one_device_speed.exercises import BYTES, SHAPES, check_matmul_intensity
    from gpututor.measure.roofline import matmul_intensity
    table = {(m, k, n, b): matmul_intensity(m, k, n, b) for m, k, n in SHAPES for b in BYTES}
    with pytest.raises(AssertionError):
        check_matmul_intensity(lambda m, k, n, b: table.get((m, k, n, b), 0.0))
