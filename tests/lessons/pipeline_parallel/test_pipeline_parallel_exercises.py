"""Lesson 05's bubble exercises (``gpututor.lessons.pipeline_parallel.exercises``): the learner's
bubble with a slow last stage and fewest-micro-batches functions run on cases they do not choose (fixed and
drawn), the published solutions pass, the classic mistakes fail, each named, and the package's
bubble functions refuse while they run. (The measured bubble and the 1F1B order are tested in
``tests/lessons/common/test_checkers.py``.)"""
import math
import random

import pytest

from gpututor.formulas import bubble_to_compute_ratio, theoretical_bubble_fraction
from gpututor.lessons.pipeline_parallel.exercises import (BUBBLE_CASES, MICROBATCH_CASES,
                                                          _off_boundary, check_bubble_formula,
                                                          check_fewest_microbatches,
                                                          drawn_bubble_cases,
                                                          drawn_microbatch_cases,
                                                          fewest_microbatches, uneven_bubble)
from gpututor.parallel.pipeline.schedules import call_order, ideal_timeline
from exercise_solutions import published, rejected

STEM = "05_pipeline_parallel"


def test_the_published_bubble_formula_passes_in_any_numeric_shape(capsys):
    check_bubble_formula(published(STEM, "my_bubble"))
    assert "Correct: your function gives the idle share in 7 pipelines" in capsys.readouterr().out
    from fractions import Fraction
    check_bubble_formula(lambda p, m, x: 1 - Fraction(m) * Fraction(p + x)
                         / (p * (p + Fraction(x) + (m - 1) * (1 + Fraction(x)))))   # exact: passes
    check_bubble_formula(...)
    assert "not answered yet" in capsys.readouterr().out


def schedule_bubble(schedule, p, m, x):
    """The idle share of the schedule's own call order (``call_order``) on ``p`` stages, each
    pass started as soon as its stage is free and its input has arrived, the last stage's
    passes ``1 + x`` times the others' (a forward 1, a backward 2), hand-offs free."""
    cost = [1.0] * (p - 1) + [1.0 + x]
    orders = {s: call_order(schedule, s, p, m) for s in range(p)}
    done, free, at, busy = {}, [0.0] * p, [0] * p, 0.0
    while any(at[s] < len(orders[s]) for s in range(p)):
        for s in range(p):
            while at[s] < len(orders[s]):
                kind, i = orders[s][at[s]]
                needs = (("F", s - 1, i) if kind == "F" and s > 0 else
                         ("B", s + 1, i) if kind == "B" and s < p - 1 else None)
                if needs is not None and needs not in done:
                    break
                took = cost[s] * (1 if kind == "F" else 2)
                free[s] = done[(kind, s, i)] = max(free[s], done.get(needs, 0.0)) + took
                busy, at[s] = busy + took, at[s] + 1
    return 1 - busy / (p * max(free))


def test_the_expected_bubble_is_what_gpipe_and_1f1b_run_with_a_slow_last_stage():
    rng = random.Random(2)
    for case in list(BUBBLE_CASES) + drawn_bubble_cases(20, rng):
        for schedule in ("gpipe", "1f1b"):
            assert math.isclose(schedule_bubble(schedule, *case), uneven_bubble(*case),
                                rel_tol=1e-12), (schedule, case)
    assert uneven_bubble(4, 8, 0.0) == theoretical_bubble_fraction(4, 8, 1)


def balanced(p, m, x):                 # section 5's formula: the slow last stage left out
    return (p - 1) / (m + p - 1)


def interleaved_transcribed(p, m, x):  # section 9's printed formula, x put where v was
    return (p - 1) / (x * m + p - 1)


def slow_fill_only(p, m, x):           # the slow stage lengthens the fill, not the steady part
    return 1 - m * (p + x) / (p * (p + x + (m - 1)))


def everything_slower(p, m, x):        # every stage 1 + x: the same as balanced, scaled
    return 1 - m * p * (1 + x) / (p * (1 + x) * (m + p - 1))


def rounded(p, m, x):                  # three decimals, as a printed table
    return round(1 - m * (p + x) / (p * (p + x + (m - 1) * (1 + x))), 3)


FIXED_TABLE = {case: uneven_bubble(*case) for case in BUBBLE_CASES}


def from_a_table(p, m, x):             # the fixed cases, computed before the check
    return FIXED_TABLE.get((p, m, x), 0.0)


@pytest.mark.parametrize("mistake", [balanced, interleaved_transcribed, slow_fill_only,
                                     everything_slower, rounded, from_a_table])
def test_the_classic_bubble_mistakes_fail(mistake):
    rejected(check_bubble_formula, mistake, match="than the idle share of such a pipeline")


def test_every_way_to_the_packages_bubble_is_refused():
    def the_formula(p, m, x):
        return theoretical_bubble_fraction(p, m, 1)

    def the_checkers_own(p, m, x):
        return uneven_bubble(p, m, x)

    def the_ratio_converted(p, m, x):
        r = bubble_to_compute_ratio(p, m, 1)
        return r / (1 + r)

    def the_ideal_timeline(p, m, x):   # 1F1B on p balanced stages, hand-offs free
        events = ideal_timeline("1f1b", p, m)
        start = min(s for evs in events.values() for _, _, s, _ in evs)
        end = max(e for evs in events.values() for *_, e in evs)
        busy = sum(e - s for evs in events.values() for _, _, s, e in evs)
        return 1 - busy / (p * (end - start))

    assert math.isclose(the_ideal_timeline(4, 8, 0), 3 / 11)   # a real way round, outside the check
    for candidate in (the_formula, the_checkers_own, the_ratio_converted, the_ideal_timeline):
        rejected(check_bubble_formula, candidate, match="ran the package's own bubble")
    assert theoretical_bubble_fraction(4, 8, 2) == 3 / 19         # restored afterwards
    rejected(check_bubble_formula, lambda p, m, x: "0.16", match="did not return a number")
    rejected(check_bubble_formula, lambda p, m, x: 1 / 0, match="failed: ZeroDivisionError")


def test_the_drawn_bubble_cases_are_new_and_valid():
    rng = random.Random(0)
    for _ in range(50):
        for p, m, x in drawn_bubble_cases(2, rng):
            assert (p, m, x) not in BUBBLE_CASES and 2 <= p <= 8 and 1 <= m <= 4 * p
            assert 0.05 <= x <= 2.0


def test_the_published_fewest_microbatches_passes(capsys):
    check_fewest_microbatches(published(STEM, "my_fewest_microbatches"))
    assert "Correct: the fewest micro-batches in 7 cases" in capsys.readouterr().out

    def closed_form(p, v, target):     # the same, solved for m: passes off the boundary
        return math.ceil((p - 1) * (1 - target) / (v * target))
    check_fewest_microbatches(closed_form)
    assert fewest_microbatches(4, 1, 0.1) == 27          # the lesson's 10 % on 4 stages


def test_the_cases_avoid_the_boundary_where_float_rounding_would_decide():
    assert all(_off_boundary(*case) for case in MICROBATCH_CASES)
    assert not _off_boundary(4, 1, 0.1)                 # 3/30 is exactly 0.1: avoided
    rng = random.Random(1)
    for _ in range(50):
        assert all(_off_boundary(*case) and case not in MICROBATCH_CASES
                   for case in drawn_microbatch_cases(2, rng))


def ignores_v(p, v, target):           # the plain 1F1B count
    return math.ceil((p - 1) * (1 - target) / target)


def from_the_ratio(p, v, target):      # (p-1)/(v m) <= target
    return math.ceil((p - 1) / (v * target))


def one_short(p, v, target):           # the last m still above the target
    return math.ceil((p - 1) * (1 - target) / (v * target)) - 1


def lesson_answer(p, v, target):       # the 10 % on 4 stages, whatever is asked
    return 27


@pytest.mark.parametrize("mistake", [ignores_v, from_the_ratio, one_short, lesson_answer])
def test_the_classic_fewest_microbatches_mistakes_fail(mistake):
    rejected(check_fewest_microbatches, mistake, match="too many|too few")


def test_looping_over_the_packages_bubble_is_refused():
    def loops_over_the_built_in(p, v, target):
        return next(m for m in range(1, 10**6) if theoretical_bubble_fraction(p, m, v) <= target)
    rejected(check_fewest_microbatches, loops_over_the_built_in, match="ran the package's own")
    rejected(check_fewest_microbatches, lambda p, v, t: None, match="did not return a number")


def test_the_bubble_checkers_speak_chinese(capsys):
    from gpututor.i18n import set_language
    set_language("zh")
    try:
        check_bubble_formula(published(STEM, "my_bubble"))
        check_fewest_microbatches(published(STEM, "my_fewest_microbatches"))
        out = capsys.readouterr().out
        assert "正确：你的函数在 7 条流水线上都给出了空闲比例" in out
        assert "正确：你的函数在 7 个情形上都给出了最少微批次数" in out
        with pytest.raises(AssertionError, match="气泡：在 p=4、m=8、x=0.5 时你的函数给出 0.2727，比这样"):
            check_bubble_formula(balanced)
        with pytest.raises(AssertionError, match="最少微批次数：在 p=4、v=1、目标 0.07 时你的函数给出 43"):
            check_fewest_microbatches(from_the_ratio)
    finally:
        set_language("en")
