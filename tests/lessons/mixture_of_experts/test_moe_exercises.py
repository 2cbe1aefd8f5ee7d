"""Lesson 11's capacity exercise is code the learner writes: the published solution passes on the
checker's cases and the ones it draws, named wrong answers fail for the reason their message
gives, and ``expert_capacity`` (section 2's formula, imported in the lesson's first cell) refuses
while the learner's function runs."""
import math
import random

import pytest

from gpututor.lessons.mixture_of_experts.exercises import (CAPACITY_CASES, check_capacity,
                                                           drawn_capacity_cases)
from gpututor.moe import expert_capacity
from exercise_solutions import published, rejected


def test_the_published_capacity_passes_on_the_checkers_cases(capsys):
    solution = published("11_mixture_of_experts", "my_capacity", math=math)
    check_capacity(solution)
    assert "Correct: your function gives each expert's slots exactly in 9 cases" in \
        capsys.readouterr().out
    assert solution(24 * 64, 2, 4, 1.5) == 1152   # the run of base.replace(batch_size=24, ...)
    check_capacity(...)
    assert "not answered yet" in capsys.readouterr().out


def test_named_wrong_capacities_fail():
    wrong = {"floor instead of ceil": lambda t, k, e, f: math.floor(f * t * k / e),
             "rounded to the nearest": lambda t, k, e, f: round(f * t * k / e),
             "forgot top_k": lambda t, k, e, f: math.ceil(f * t / e),
             "forgot the capacity factor": lambda t, k, e, f: math.ceil(t * k / e),
             "every slot of every token (no division by the experts)":
                 lambda t, k, e, f: math.ceil(f * t * k),
             "the exercise's old answer for every case": lambda t, k, e, f: 1152}
    for mistake, candidate in wrong.items():
        rejected(check_capacity, candidate, match="not the slots each expert may take")
    rejected(check_capacity, lambda t, k, e, f: None, match="not a number")
    rejected(check_capacity, 1152, match="pass your function my_capacity itself")


def test_calling_expert_capacity_is_refused_and_it_works_again_afterwards():
    rejected(check_capacity, lambda t, k, e, f: expert_capacity(t, k, e, f),
             match="called gpututor.moe.expert_capacity")
    rejected(check_capacity, expert_capacity, match="called gpututor.moe.expert_capacity")
    assert expert_capacity(10, 2, 4, 1.25) == 7


def test_a_table_of_the_fixed_cases_made_beforehand_does_not_pass():
    table = {case: expert_capacity(*case) for case in CAPACITY_CASES}
    rejected(check_capacity, lambda *case: table[case], match="your function failed: KeyError")
    for tokens, top_k, n_expert, factor in drawn_capacity_cases(50, random.Random(0)):
        assert (factor * tokens * top_k / n_expert) % 1   # floor and ceil differ on every draw
    for tokens, top_k, n_expert, factor in CAPACITY_CASES[1:]:
        assert (factor * tokens * top_k / n_expert) % 1
