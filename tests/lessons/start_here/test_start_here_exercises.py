"""Lesson 00's checkers (``gpututor/lessons/start_here/exercises.py``): the published solutions pass,
named plausible mistakes fail for the reason the message gives, and the sampler exercise refuses
``DistributedSampler`` while the learner's function runs (and only then)."""
import math

import numpy as np
import pytest
import torch
from torch.utils.data import DistributedSampler as imported_before   # bound before any check

from gpututor import RunSpec, build_model
from gpututor.i18n import set_language
from gpututor.lessons.start_here.exercises import (check_ideal_throughput, check_optimizer_state,
                                              check_rank_indices, check_rows_per_rank,
                                              reference_rank_indices)
from gpututor.models import count_parameters
from exercise_solutions import published, rejected

STEM = "00_start_here"
SPEC = RunSpec(model="gpt", model_size="small", strategy="ddp", world_size=2, batch_size=32,
               steps=30)   # lesson 00's spec
DDP = {"world_size": 2, "tokens_per_s": 15_321.0, "params": 100_000,
       "mem_by_category": {"optimizer": [800_000 + 4 * 20, 800_080]}}
SOLO = {"world_size": 1, "tokens_per_s": 10_487.0}


def test_rows_per_rank_come_from_the_data_a_rank_gets(capsys):
    check_rows_per_rank(published(STEM, "answer_1"), SPEC)
    assert "(gpututor.batches gives rank 0 8)" in capsys.readouterr().out
    for same in (8.0, np.int64(8), torch.tensor(8)):
        check_rows_per_rank(same, SPEC)
    for mistake in (32,      # forgot to split the global batch
                    16,      # the lesson's 2 ranks, not the exercise's 4
                    128):    # multiplied by the ranks instead of dividing
        rejected(check_rows_per_rank, mistake, SPEC, match="is not how many gpututor.batches")
    rejected(check_rows_per_rank, True, SPEC, match="is not how many")   # True is not a number
    check_rows_per_rank(..., SPEC)
    assert "not answered yet" in capsys.readouterr().out


def test_rank_indices_checker_runs_the_function_against_distributed_sampler(capsys):
    solution = published(STEM, "my_rank_indices")
    check_rank_indices(solution)
    assert "Correct: your indices are DistributedSampler's" in capsys.readouterr().out
    check_rank_indices(lambda n, r, w: torch.tensor(solution(n, r, w)))    # any sequence of ints
    check_rank_indices(lambda n, r, w: np.array(solution(n, r, w)))

    def no_padding(n, rank, world):              # dealt out, but uneven lengths
        return list(range(rank, n, world))

    def contiguous_blocks(n, rank, world):      # gpututor's shard of a batch, not the sampler's deal
        per = math.ceil(n / world)
        return [i % n for i in range(rank * per, (rank + 1) * per)]

    def pads_with_the_last(n, rank, world):     # repeats the last index instead of the first ones
        return [min(rank + k * world, n - 1) for k in range(math.ceil(n / world))]

    def backwards(n, rank, world):
        return solution(n, rank, world)[::-1]

    def wraps_once(n, rank, world):              # pads from the start once: not when padding > n
        total = list(range(n)) + list(range(n))[:math.ceil(n / world) * world - n]
        return total[rank::world]

    rejected(check_rank_indices, no_padding, match=r"n=10 on 4 ranks, rank 2 gets 2 indices")
    rejected(check_rank_indices, contiguous_blocks, match="other indices than DistributedSampler's")
    rejected(check_rank_indices, pads_with_the_last, match=r"n=10 on 4 ranks, rank 2 gets other")
    rejected(check_rank_indices, backwards, match="the right indices in another order")
    rejected(check_rank_indices, wraps_once, match=r"n=2 on 5 ranks, rank 4 gets 0 indices")
    rejected(check_rank_indices, lambda n, r, w: None, match=r"returned None, not a list")
    rejected(check_rank_indices, lambda n, r, w: None, match="not a list of whole numbers")
    rejected(check_rank_indices, lambda n, r, w: [0.5] * math.ceil(n / w),
             match="not a list of whole numbers")

    def uses_the_sampler(n, rank, world):       # the class the exercise asks to write
        return list(imported_before(range(n), num_replicas=world, rank=rank, shuffle=False))

    class Subclassed(imported_before):
        pass

    def uses_a_subclass(n, rank, world):
        return list(Subclassed(range(n), num_replicas=world, rank=rank, shuffle=False))

    for candidate in (uses_the_sampler, uses_a_subclass,
                      lambda n, r, w: reference_rank_indices(n, r, w)):
        rejected(check_rank_indices, candidate, match="your function used DistributedSampler")
    assert reference_rank_indices(5, 1, 2) == [1, 3, 0]   # restored after the check


def test_ideal_throughput_is_n_times_the_one_rank_run(capsys):
    answer = published(STEM, "answer_3", ddp=DDP, solo_summary=SOLO)
    check_ideal_throughput(answer, DDP, SOLO)
    assert "tokens/s of the data-parallel run at the ideal speedup: 2.097e+04" in \
        capsys.readouterr().out
    for mistake in (2 * DDP["tokens_per_s"],                    # doubled the 2-rank run
                    SOLO["tokens_per_s"],                       # forgot the N
                    DDP["tokens_per_s"],                        # what it reached, not the ideal
                    DDP["tokens_per_s"] / SOLO["tokens_per_s"]):   # the speedup
        rejected(check_ideal_throughput, mistake, DDP, SOLO, match="is not what this run.s measurements give")
    rejected(check_ideal_throughput, 20_974, DDP, {"world_size": 1, "tokens_per_s": None},
             match="has not measured it yet")


def test_optimizer_state_is_counted_on_the_large_gpt(capsys):
    large = build_model(RunSpec(model="gpt", model_size="large"), meta=True)
    params, tensors = count_parameters(large), len(list(large.parameters()))
    answer = published(STEM, "answer_4", large_params=params)
    check_optimizer_state(answer)
    assert "Correct. AdamW state bytes of the large GPT" in capsys.readouterr().out
    check_optimizer_state(8 * params + 4 * tensors)          # the step counters too: exact
    for mistake in (4 * params,       # one moment instead of two
                    12 * params,      # the moments and the parameters
                    16 * params,      # the whole model state
                    8 * DDP["params"]):   # the lesson's model, not the large one
        rejected(check_optimizer_state, mistake, match="is not what")


def test_lesson_00_checkers_speak_chinese(capsys):
    set_language("zh")
    try:
        check_rows_per_rank(8, SPEC)
        check_rank_indices(...)
        check_ideal_throughput(20_974, DDP, SOLO)
        out = capsys.readouterr().out
        for chinese in ("gpututor.batches 分给进程 0 的是 8", "各进程的样本下标：尚未作答",
                        "理想加速比下数据并行运行的 tokens/s"):
            assert chinese in out, (chinese, out)
        with pytest.raises(AssertionError, match="得到的下标是对的，但顺序不同"):
            check_rank_indices(lambda n, r, w: published(STEM, "my_rank_indices")(n, r, w)[::-1])
    finally:
        set_language("en")
