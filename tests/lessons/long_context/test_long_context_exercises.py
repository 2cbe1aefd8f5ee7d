"""Lesson 10's checkers: each accepts the lesson's published solution and rejects plausible wrong
answers, each named by the mistake it models; the merge exercise's reference (ring attention's
own merge) refuses while the learner's merge runs."""

import pytest
import torch

from gpututor import RunSpec
from gpututor.lessons.long_context.exercises import (check_activation_prediction, check_cp_bytes,
                                                     check_merge, check_visible_pairs)
from gpututor.models import build_model, count_parameters
from gpututor.parallel.context_parallel.ring_attention import merge
from exercise_solutions import published as _published, rejected



def published(variable: str, **names):
    return _published("10_long_context", variable, torch=torch, build_model=build_model, count_parameters=count_parameters, **names)


def test_a_table_of_the_fixed_cases_made_beforehand_does_not_pass():
    """The final check reading's walk-around: answers for VISIBLE_CASES computed with causal_work
    before the check, looked up inside it. The three drawn cases are not in the table."""
    from gpututor.lessons.long_context.exercises import VISIBLE_CASES, drawn_cases
    from gpututor.parallel.context_parallel import causal_work
    table = {case: causal_work(*case[:3])[case[3]] for case in VISIBLE_CASES}
    rejected(check_visible_pairs, lambda T, n, s, r: table[(T, n, s, r)], match="failed")
    import random
    for case in drawn_cases(50, random.Random(0)):
        T, n, split, rank = case
        assert T % (2 * n) == 0 and 2 <= n <= 8 and 0 <= rank < n and split in ("contiguous",
                                                                                  "zigzag")


def test_visible_pairs_is_a_function_run_on_the_checkers_cases(capsys):
    from gpututor.parallel.context_parallel import causal_work
    solution = published("my_visible_pairs")
    check_visible_pairs(solution)
    assert "Correct: your function counts the visible pairs of 9 cases exactly" in capsys.readouterr().out
    assert solution(96, 3, "contiguous", 2) == 2576   # the solution's own example
    check_visible_pairs(...)
    assert "not answered yet" in capsys.readouterr().out

    def contiguous(T, n, split, rank):
        return sum(p + 1 for p in range(rank * T // n, (rank + 1) * T // n))

    def zigzag_n_plus_r(T, n, split, rank):
        if split == "contiguous":
            return contiguous(T, n, split, rank)
        size = T // (2 * n)
        return sum(p + 1 for c in (rank, n + rank) for p in range(c * size, (c + 1) * size))

    wrong = {"forgot the diagonal (p keys, not p + 1)":
             lambda T, n, s, r: solution(T, n, s, r) - T // n,
             "the contiguous split for both": contiguous,
             "zig-zag as chunks r and n + r": zigzag_n_plus_r,
             "what ring_forward computes: whole rectangles": lambda T, n, s, r: T // n * T,
             "a third of all pairs": lambda T, n, s, r: T * (T + 1) // 2 // n,
             "exercise 1's old answer for every case": lambda T, n, s, r: 2576}
    for mistake, candidate in wrong.items():
        rejected(check_visible_pairs, candidate, match="not the count of the pairs")
    rejected(check_visible_pairs, lambda T, n, s, r: causal_work(T, n, s)[r],
             match="called the package's causal_work")
    rejected(check_visible_pairs, lambda T, n, s, r: None, match="not a number")
    assert causal_work(96, 3, "contiguous")[2] == 2576   # the references work again afterwards


# section 1's measured bytes (rank 0's activations), exactly a·T + b·T² as the probe gives them
MEASURED = {("one process", 128): 43533320, ("cp=2, per rank", 128): 18649608,
            ("one process", 256): 103974920, ("cp=2, per rank", 256): 37331976,
            ("one process", 192): 71640584, ("cp=2, per rank", 192): 27986696}


def test_activation_prediction_is_the_quadratic_fit_the_checker_makes_itself(capsys, monkeypatch):
    from gpututor.lessons.long_context import runs
    from gpututor.lessons.long_context.exercises import quadratic_fit
    measured_at = []

    def fake(base, lengths, layouts):
        measured_at.append((tuple(lengths), [name for name, _, _ in layouts]))
        return [{"layout": name, "seq_len": t, "activations": MEASURED[(name, t)]}
                for t in lengths for name, _, _ in layouts]
    monkeypatch.setattr(runs, "activations_by_length", fake)
    base = RunSpec(model="gpt", model_size="small", batch_size=8, device="cpu")
    by = {k: v for k, v in MEASURED.items() if k[1] != 192}
    check_activation_prediction(published("my_bytes_512", by=by), base)
    assert "Correct. one process's activation bytes at T = 512, by the a·T + b·T² fit" in \
        capsys.readouterr().out
    assert measured_at == [((128, 256), ["one process"])]   # measured again, one process only
    # the fit is the model: through 128 and 256 it gives the measured T = 192 within 2 bytes
    a, b = quadratic_fit({128: MEASURED[("one process", 128)], 256: MEASURED[("one process", 256)]})
    assert abs(a * 192 + b * 192 ** 2 - MEASURED[("one process", 192)]) <= 2

    one = {t: MEASURED[("one process", t)] for t in (128, 256)}
    cp = {t: MEASURED[("cp=2, per rank", t)] for t in (128, 256)}

    def line(m, T):   # a straight line through the two measured points
        return m[128] + (T - 128) * (m[256] - m[128]) / 128
    mean_ratio = (one[128] / cp[128] + one[256] / cp[256]) / 2
    wrong = {"a straight line through the two points (linear extrapolation)": line(one, 512),
             "the mean of section 1's two one-process/cp ratios times a cp rank's bytes "
             "extrapolated linearly (the old question's walk-around)": mean_ratio * line(cp, 512),
             "bytes in proportion to T (x2 from T = 256)": 2 * one[256],
             "the last doubling's growth again": one[256] * one[256] / one[128],
             "bytes in proportion to T² (x4 from T = 256)": 4 * one[256],
             "the cp=2 rank's bytes, not one process's": float(
                 sum(c * 512 ** p for p, c in enumerate(quadratic_fit(cp), start=1)))}
    for mistake, answer in wrong.items():
        rejected(check_activation_prediction, answer, base,
                 match="is not what this run's measurements give")
    check_activation_prediction(..., base)
    assert "not answered yet" in capsys.readouterr().out


def test_cp_bytes_for_cp_4_is_the_rings_count_and_the_meter_agrees(capsys):
    from gpututor import launch
    from gpututor.lessons.long_context.exercises import ring_bytes_per_step
    long = RunSpec(model="gpt", model_size="small", batch_size=8, device="cpu", seq_len=256,
                   steps=6)
    model = build_model(long)
    block = 2 * long.batch_size * (long.seq_len // 4) * model.cfg.d_model * 4
    sent = model.cfg.n_layer * 10 * block + 4 * count_parameters(model)
    check_cp_bytes(published("my_cp_bytes", long=long), long)
    assert "Correct. bytes per step one cp=4 rank hands to its sends and collectives" in capsys.readouterr().out
    block2 = 2 * long.batch_size * (long.seq_len // 2) * model.cfg.d_model * 4
    wrong = {"forgot the gradients' all-reduce": model.cfg.n_layer * 10 * block,
             "cp=2's count (section 4's run)": model.cfg.n_layer * 4 * block2
             + 4 * count_parameters(model),
             "the block's gradients n - 1 times, like the block": model.cfg.n_layer * 9 * block
             + 4 * count_parameters(model)}
    for mistake, answer in wrong.items():
        rejected(check_cp_bytes, answer, long, match="not what the formula gives")
    # the count is what real ranks meter (a short run, its steady steps after warm-up)
    small = long.replace(model_size="tiny", seq_len=64, batch_size=2, steps=5, strategy="cp",
                         world_size=4)
    assert launch(small).wait()["comm_bytes_per_step"] == ring_bytes_per_step(small)
    assert sent == ring_bytes_per_step(long.replace(strategy="cp", world_size=4))


def test_merge_code_exercise_equals_attention_over_all_the_keys(capsys):
    check_merge(published("my_merge"))
    assert "Correct: your merge gives attention over all the keys" in capsys.readouterr().out

    def by_the_maximum(out_a, lse_a, out_b, lse_b):   # right too, written FlashAttention's way
        m = torch.maximum(lse_a, lse_b)
        wa, wb = torch.exp(lse_a - m), torch.exp(lse_b - m)
        return (out_a * wa[..., None] + out_b * wb[..., None]) / (wa + wb)[..., None], \
            m + torch.log(wa + wb)
    check_merge(by_the_maximum)

    lse = torch.logaddexp

    def plain_average(out_a, lse_a, out_b, lse_b):
        return (out_a + out_b) / 2, lse(lse_a, lse_b)

    def no_rescale(out_a, lse_a, out_b, lse_b):
        return out_a + out_b, lse(lse_a, lse_b)

    def weights_swapped(out_a, lse_a, out_b, lse_b):
        new = lse(lse_a, lse_b)
        return out_a * torch.exp(lse_b - new)[..., None] + out_b * torch.exp(lse_a - new)[..., None], new

    for candidate in (plain_average, no_rescale, weights_swapped):
        rejected(check_merge, candidate, match="your merged output is not attention's")

    def lse_is_the_maximum(out_a, lse_a, out_b, lse_b):
        new = lse(lse_a, lse_b)
        out = out_a * torch.exp(lse_a - new)[..., None] + out_b * torch.exp(lse_b - new)[..., None]
        return out, torch.maximum(lse_a, lse_b)
    rejected(check_merge, lse_is_the_maximum, match="the output is right, but your lse")

    def exponentiates_the_lse_itself(out_a, lse_a, out_b, lse_b):   # right on paper, overflows
        ea, eb = torch.exp(lse_a), torch.exp(lse_b)
        return (out_a * ea[..., None] + out_b * eb[..., None]) / (ea + eb)[..., None], torch.log(ea + eb)
    rejected(check_merge, exponentiates_the_lse_itself, match="large scores in float32.*inf or nan")

    def one_sided(out_a, lse_a, out_b, lse_b):   # exp(lse_b - lse_a) is inf when lse_a = -inf
        w = torch.exp(lse_b - lse_a)[..., None]
        return (out_a + out_b * w) / (1 + w), lse_a + torch.log1p(torch.exp(lse_b - lse_a))
    rejected(check_merge, one_sided, match=r"the later half of the keys first.*inf or nan.*-inf")

    def forgot_the_last_axis(out_a, lse_a, out_b, lse_b):
        new = lse(lse_a, lse_b)
        return out_a * torch.exp(lse_a - new) + out_b * torch.exp(lse_b - new), new
    rejected(check_merge, forgot_the_last_axis, match="your function failed: RuntimeError")
    rejected(check_merge, lambda *tensors: tensors[0], match="not \\(out, lse\\)")

    from gpututor.parallel.context_parallel.ring_attention import merge as imported_before

    def calls_the_package(out_a, lse_a, out_b, lse_b):
        return imported_before(out_a, lse_a, out_b, lse_b)
    rejected(check_merge, calls_the_package, match="called the package's merge")
    out, new = merge(torch.zeros(2, 3), torch.zeros(2), torch.ones(2, 3), torch.zeros(2))
    torch.testing.assert_close(out, torch.full((2, 3), 0.5))   # restored afterwards
    check_merge(...)
    assert "not answered yet" in capsys.readouterr().out


def test_merge_runs_as_ring_forwards_merge_in_real_ranks():
    from gpututor.parallel.context_parallel.ring_attention import merge as imported_before

    def right(out_a, lse_a, out_b, lse_b):
        new = torch.logaddexp(lse_a, lse_b)
        return out_a * torch.exp(lse_a - new)[..., None] + out_b * torch.exp(lse_b - new)[..., None], new

    def package_inside_the_ring(out_a, lse_a, out_b, lse_b):   # head_dim 8: only in the ranks
        if out_a.shape[-1] == 8:
            return imported_before(out_a, lse_a, out_b, lse_b)
        return right(out_a, lse_a, out_b, lse_b)

    def wrong_inside_the_ring(out_a, lse_a, out_b, lse_b):     # right on the local cases only
        out, new = right(out_a, lse_a, out_b, lse_b)
        return (out * 1.01 if out_a.shape[-1] == 8 else out), new

    rejected(check_merge, package_inside_the_ring, match="called the package's merge")
    rejected(check_merge, wrong_inside_the_ring,
             match="as ring_forward's merge on 3 ranks your function does not give causal")

    def crashes_inside_the_ring(out_a, lse_a, out_b, lse_b):   # the ring must not hang on it
        return None if out_a.shape[-1] == 8 else right(out_a, lse_a, out_b, lse_b)
    rejected(check_merge, crashes_inside_the_ring,
             match="on 3 ranks your function failed: TypeError: returned NoneType")


def test_every_message_of_the_checkers_has_its_chinese_line(capsys):
    import ast
    import inspect

    from gpututor.i18n import ZH, set_language
    from gpututor.lessons.long_context import exercises as module
    tree = ast.parse(inspect.getsource(module))
    literals = {node.args[0].value for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "tr" and isinstance(node.args[0], ast.Constant)}
    literals |= {name for name, _, _ in module.MERGE_CASES} | set(module.HINTS.values())
    assert len(literals) >= 15 and sorted(literals - set(ZH)) == []
    set_language("zh")
    try:
        check_visible_pairs(published("my_visible_pairs"))
        check_merge(...)
        out = capsys.readouterr().out
        assert "正确：你的函数在 9 个情形上精确数出了可见对" in out and "合并：尚未作答" in out
        with pytest.raises(AssertionError, match="可见对：请把你的函数 my_visible_pairs 本身传进来"):
            check_visible_pairs(2576)
        with pytest.raises(AssertionError, match="可见对：在 T = 96，3 个进程，contiguous 切分，进程 2 时"):
            check_visible_pairs(lambda T, n, split, rank: T // n * T)
        with pytest.raises(AssertionError, match="合并 \\[11 个键分成 4 个和 7 个两块，无掩码\\]"):
            check_merge(lambda a, la, b, lb: ((a + b) / 2, torch.logaddexp(la, lb)))
    finally:
        set_language("en")
