"""Lesson 03b's exercise checker: the published solution passes, on the fixed cases and on
drawn sizes; named wrong answers fail, each with the sentence that says why (bare module,
ZeRO3 with only the root, units by nn.Linear across the tied head, torch's fully_shard, units by
a class the checked models do not use, an optimizer made before wrapping)."""
from __future__ import annotations

import pytest
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

from gpututor.lessons.your_own_model.exercises import check_my_wrap, drawn_cases
from gpututor.lessons.your_own_model.training import adamw
from gpututor.parallel import DataParallel, ZeRO3


def solution(module):        # the notebook's published solution
    def is_block(name, submodule):
        return name.rpartition(".")[2].isdigit()
    model = ZeRO3(module, units=is_block)
    return model, adamw(model)


class LessonBlock(nn.Module):   # stands for the lesson's own Block: no checked model uses it
    pass


def bare(module):
    return module, adamw(module)


def data_parallel(module):
    model = DataParallel(module)
    return model, adamw(model)


def root_only(module):
    model = ZeRO3(module)
    return model, adamw(model)


def by_linear(module):
    model = ZeRO3(module, units=nn.Linear)
    return model, adamw(model)


def by_lesson_class(module):
    model = ZeRO3(module, units=LessonBlock)
    return model, adamw(model)


def torch_fsdp(module):
    fully_shard(module)
    return module, adamw(module)


def optimizer_first(module):
    optimizer = adamw(module)      # over the parameters ZeRO3 is about to empty
    return ZeRO3(module, units=lambda n, m: n.rpartition(".")[2].isdigit()), optimizer


def test_the_published_solution_passes_on_fixed_and_drawn_sizes(capsys):
    check_my_wrap(solution, seed=1)
    assert "Correct" in capsys.readouterr().out


def test_the_drawn_cases_are_on_2_and_3_ranks_with_two_trainable_blocks_or_more():
    for seed in range(20):
        cases = drawn_cases(seed)
        assert {c[3] for c in cases} == {2, 3}
        assert all(c[2] >= 3 for c in cases)   # ListStack freezes its first block


@pytest.mark.parametrize("wrong, says", [
    (bare, "nothing is sharded"), (data_parallel, "nothing is sharded"),
    (root_only, "gathered at once"), (by_lesson_class, "gathered at once"),
    (by_linear, "also used outside it"), (torch_fsdp, "fully_shard"), (optimizer_first, "differs from one process"),
])
def test_named_wrong_answers_fail_saying_why(wrong, says):
    with pytest.raises(AssertionError, match=says):
        check_my_wrap(wrong, seed=1)


def test_not_answered_yet_is_said_not_raised(capsys):
    check_my_wrap(...)
    assert "not answered yet" in capsys.readouterr().out
