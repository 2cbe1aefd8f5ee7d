"""Lesson 05's bubble exercises (``gpututor.lessons.pipeline_parallel.exercises``): the learner's
bubble formula and fewest-micro-batches functions run on cases they do not choose (fixed and
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
                                                          fewest_microbatches)
from gpututor.parallel.pipeline.schedules import ideal_timeline
from exercise_solutions import published, rejected

STEM = "05_pipeline_parallel"


def test_the_published_bubble_formula_passes_in_any_numeric_shape(capsys):
    check_bubble_formula(published(STEM, "my_bubble"))
    assert "Correct: your function gives the theory's bubble in 7 cases" in capsys.readouterr().out
    from fractions import Fraction
    check_bubble_formula(lambda p, m, v: Fraction(p - 1, v * m + p - 1))   # exact: passes
    check_bubble_formula(...)
    assert "not answered yet" in capsys.readouterr().out


def without_v(p, m, v):                # the plain 1F1B bubble: forgot the chunks
    return (p - 1) / (m + p - 1)


def the_ratio(p, m, v):                # idle over ideal compute, not over the step
    return (p - 1) / (v * m)


def v_everywhere(p, m, v):             # the whole step divided by v, not only the fill and drain
    return (p - 1) / (v * (m + p - 1))


def rounded(p, m, v):                  # three decimals, as a printed table
    return round((p - 1) / (v * m + p - 1), 3)


FIXED_TABLE = {case: theoretical_bubble_fraction(*case) for case in BUBBLE_CASES}


def from_a_table(p, m, v):             # the fixed cases, computed before the check
    return FIXED_TABLE.get((p, m, v), 0.0)


@pytest.mark.parametrize("mistake", [without_v, the_ratio, v_everywhere, rounded, from_a_table])
def test_the_classic_bubble_mistakes_fail(mistake):
    rejected(check_bubble_formula, mistake, match="not the theory's|than the theory's idle share")


def test_every_way_to_the_packages_bubble_is_refused():
    def the_formula(p, m, v):
        return theoretical_bubble_fraction(p, m, v)

    def the_ratio_converted(p, m, v):
        r = bubble_to_compute_ratio(p, m, v)
        return r / (1 + r)

    def the_ideal_timeline(p, m, v):   # 1F1B on p stages with v·m micro-batches, hand-offs free
        events = ideal_timeline("1f1b", p, v * m)
        start = min(s for evs in events.values() for _, _, s, _ in evs)
        end = max(e for evs in events.values() for *_, e in evs)
        busy = sum(e - s for evs in events.values() for _, _, s, e in evs)
        return 1 - busy / (p * (end - start))

    assert math.isclose(the_ideal_timeline(4, 8, 2), 3 / 19)   # a real way round, outside the check
    for candidate in (the_formula, the_ratio_converted, the_ideal_timeline):
        rejected(check_bubble_formula, candidate, match="ran the package's own bubble")
    assert theoretical_bubble_fraction(4, 8, 2) == 3 / 19         # restored afterwards
    rejected(check_bubble_formula, lambda p, m, v: "0.16", match="did not return a number")
    rejected(check_bubble_formula, lambda p, m, v: 1 / 0, match="failed: ZeroDivisionError")


def test_the_drawn_bubble_cases_are_new_and_valid():
    rng = random.Random(0)
    for _ in range(50):
        for p, m, v in drawn_bubble_cases(2, rng):
            assert (p, m, v) not in BUBBLE_CASES and m % p == 0 and 2 <= p <= 8 and 1 <= v <= 4


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
        assert "正确：你的函数在 7 个情形上都给出了理论气泡" in out
        assert "正确：你的函数在 7 个情形上都给出了最少微批次数" in out
        with pytest.raises(AssertionError, match="气泡：在 p=4、m=8、v=2 时你的函数给出 0.2727，比理论"):
            check_bubble_formula(without_v)
        with pytest.raises(AssertionError, match="最少微批次数：在 p=4、v=1、目标 0.07 时你的函数给出 43"):
            check_fewest_microbatches(from_the_ratio)
    finally:
        set_language("en")
