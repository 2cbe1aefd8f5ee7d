"""Lesson 03b's exercise checker: the published solution passes, on the fixed cases and on
drawn sizes, returned as a tuple or a list; named wrong answers fail, each with the sentence that
says why (bare module, ZeRO3 with only the root, units by nn.Linear across the tied head, torch's
fully_shard, units by a class the checked models do not use, an optimizer made before wrapping,
data parallel under ZeRO3's name (every trainable tensor but one kept whole), units for the first
two blocks only, units by nn.LayerNorm, the blocks' container as one unit)."""
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


def data_parallel_by_another_name(module):   # ZeRO3 in name: all but one tensor kept whole
    trainable = [p for p in dict.fromkeys(module.parameters()) if p.requires_grad]
    smallest = min(trainable, key=lambda p: p.numel())
    model = ZeRO3(module, units=lambda n, m: False,
                  keep_whole=[p for p in trainable if p is not smallest])
    return model, adamw(model)


def first_two_blocks(module):    # blocks "0" and "1" only: the root keeps the rest of the stack
    model = ZeRO3(module, units=lambda n, m: n.rpartition(".")[2] in ("0", "1"))
    return model, adamw(model)


def by_layernorm(module):        # only the norms are units: the blocks' linears stay in the root
    model = ZeRO3(module, units=nn.LayerNorm)
    return model, adamw(model)


def whole_stack(module):         # the container of the blocks as one unit, gathered with the root
    model = ZeRO3(module, units=(nn.Sequential, nn.ModuleList))
    return model, adamw(model)


def as_list(module):             # the solution, returning a list
    return list(solution(module))


@pytest.mark.parametrize("right, seed", [(solution, 1), (as_list, 2)])
def test_the_published_solution_passes_on_fixed_and_drawn_sizes(right, seed, capsys):
    check_my_wrap(right, seed=seed)
    assert "Correct" in capsys.readouterr().out


def test_the_drawn_cases_are_on_2_and_3_ranks_with_two_trainable_blocks_or_more():
    for seed in range(20):
        cases = drawn_cases(seed)
        assert {c[3] for c in cases} == {2, 3}
        assert all(c[2] >= 3 for c in cases)   # ListStack freezes its first block


@pytest.mark.parametrize("wrong, says", [
    (bare, "not sharded"), (data_parallel, "not sharded"),
    (root_only, "left to the root's unit"), (by_lesson_class, "left to the root's unit"),
    (by_linear, "also used outside it"), (torch_fsdp, "fully_shard"),
    (optimizer_first, "differs from one process"), (data_parallel_by_another_name, "kept whole"),
    (first_two_blocks, "left to the root's unit"), (by_layernorm, "left to the root's unit"),
    (whole_stack, "gathered at once"),
])
def test_named_wrong_answers_fail_saying_why(wrong, says):
    with pytest.raises(AssertionError, match=says):
        check_my_wrap(wrong, seed=1)


def test_not_answered_yet_is_said_not_raised(capsys):
    check_my_wrap(...)
    assert "not answered yet" in capsys.readouterr().out
