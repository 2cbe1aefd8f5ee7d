"""Every exercise checker accepts the published solution and rejects a plausible wrong answer.

The ring all-reduce's checker also proves the from-scratch ring equals ``dist.all_reduce``.
"""
import math

import pytest
import torch.distributed as dist

import numpy as np
import torch

from gpututor.lessons.exercises import (check_allreduce, check_answer, check_fits, check_group,
                                        check_loss_scaler, check_names, check_row_parallel,
                                        first_stage_that_fits)
from gpututor.parallel.mesh import RankGrid
from gpututor.parallel.data_parallel.ring import ring_allreduce
from gpututor.parallel.tensor_parallel.megatron import reduce_from_tensor_parallel_region


def test_check_answer_accepts_the_measured_number_and_rejects_others(capsys):
    check_answer(..., 8, "batch")
    assert "not answered yet" in capsys.readouterr().out
    check_answer(1.53, 1.54, "speedup")
    assert "Correct" in capsys.readouterr().out
    for wrong in (7, "8", True):
        with pytest.raises(AssertionError):
            check_answer(wrong, 8, "batch")
    for same in (np.float64(1.53), torch.tensor(1.53), np.array(1.53)):   # any real number
        check_answer(same, 1.54, "speedup")
    with pytest.raises(AssertionError, match="not measured it yet"):   # no crash on None
        check_answer(1.5, None, "speedup")


def test_ring_allreduce_equals_dist_all_reduce(capsys):
    check_allreduce(ring_allreduce)   # on 3 and on 4 ranks
    assert "Correct" in capsys.readouterr().out


def test_allreduce_checker_rejects_a_wrong_allreduce():
    def forgets_to_sum(tensor, rank, world):  # defined here: sent to the ranks by value
        return tensor

    with pytest.raises(AssertionError, match="differs from dist.all_reduce"):
        check_allreduce(forgets_to_sum)


def test_allreduce_checker_rejects_a_sum_that_is_not_in_place():
    def returns_a_copy(tensor, rank, world):   # the right sum, in a new tensor
        from gpututor.parallel.data_parallel.ring import ring_allreduce
        return ring_allreduce(tensor.clone(), rank, world)

    with pytest.raises(AssertionError, match="in place"):
        check_allreduce(returns_a_copy)


def test_allreduce_checker_rejects_the_built_in_collective():
    def via_library(tensor, rank, world):
        dist.all_reduce(tensor)
        return tensor

    with pytest.raises(AssertionError, match="called dist.all_reduce"):
        check_allreduce(via_library)


def test_allreduce_checker_rejects_a_ring_that_sends_the_wrong_way():
    """Send left instead of right in the all-gather phase: on 2 ranks left == right, so this
    passes there; on 3 and 4 it must not."""
    def wrong_way(tensor, rank, world):
        chunks = list(tensor.view(-1).tensor_split(world))
        right, left = (rank + 1) % world, (rank - 1) % world

        def exchange(send, like, to, frm):
            incoming = torch.empty_like(like)
            req = dist.isend(send.contiguous(), to)
            dist.recv(incoming, frm)
            req.wait()
            return incoming

        for step in range(world - 1):
            s, r = (rank - step) % world, (rank - step - 1) % world
            chunks[r] += exchange(chunks[s], chunks[r], right, left)
        for step in range(world - 1):   # wrong: towards the left, as if from the right
            s, r = (rank - step + 1) % world, (rank - step) % world
            chunks[r].copy_(exchange(chunks[s], chunks[r], left, right))
        return tensor

    check_allreduce(wrong_way, world_sizes=(2,))     # the hole the 2-rank check had
    with pytest.raises(AssertionError):
        check_allreduce(wrong_way)


def test_fits_checker_accepts_the_first_stage_and_rejects_a_later_one(capsys):
    # lesson 03's question: 7.5 B parameters, 64 ranks, 24 GB each, 6 GB of activations
    question = dict(n_params=7.5e9, world_size=64, device_bytes=24e9, other_bytes=6e9)
    expected = first_stage_that_fits(**question)
    assert expected == 2 and first_stage_that_fits(7.5e9, 64, 1e9) is None
    check_fits(expected, **question)
    assert "Correct: stage 2" in capsys.readouterr().out
    for wrong in (3, 1, None, True):
        with pytest.raises(AssertionError, match="not the first that fits"):
            check_fits(wrong, **question)


def test_row_parallel_checker(capsys):
    def mine(x_local, weight_local, bias, tp):   # sent to the ranks by value
        return reduce_from_tensor_parallel_region(x_local @ weight_local.T, tp) + bias

    check_row_parallel(mine)
    assert "Correct" in capsys.readouterr().out

    def forgets_the_sum(x_local, weight_local, bias, tp):
        return x_local @ weight_local.T + bias

    with pytest.raises(AssertionError, match="output differs from the dense layer's"):
        check_row_parallel(forgets_the_sum)


def test_loss_scale_exercise_checks_the_whole_trajectory(capsys):
    stream = [1.0, 1.0, 1.0, math.inf, 1.0, 1.0, 1.0, 1.0, math.nan, 1.0]   # lesson 06's

    def published(scale, clean_steps, found_inf, growth_interval):
        if found_inf:
            return scale * 0.5, 0
        clean_steps += 1
        return (scale * 2.0, 0) if clean_steps == growth_interval else (scale, clean_steps)

    def never_backs_off(scale, clean_steps, found_inf, growth_interval):
        clean_steps += 1
        return (scale * 2.0, 0) if clean_steps == growth_interval else (scale, clean_steps)

    def checks_before_counting(scale, clean_steps, found_inf, growth_interval):
        if found_inf:
            return scale * 0.5, 0
        if clean_steps == growth_interval:   # grows one step late
            return scale * 2.0, 0
        return scale, clean_steps + 1

    check_loss_scaler(published, stream)
    assert "Correct" in capsys.readouterr().out
    for wrong in (never_backs_off, checks_before_counting):
        with pytest.raises(AssertionError, match="at step"):
            check_loss_scaler(wrong, stream)


def test_group_checker_accepts_the_group_and_rejects_another_dims(capsys):
    grid = RankGrid((("dp", 2), ("pp", 2), ("tp", 2)))   # lesson 09's 3-D grid
    check_group([5, 4], grid, rank=5, dim="tp")
    assert "Correct: rank 5's tp group is [4, 5]" in capsys.readouterr().out
    for wrong in ([1, 5], [5, 7], [4, 5, 6, 7], "45", [5]):   # dp group, pp group, ...
        with pytest.raises(AssertionError):
            check_group(wrong, grid, rank=5, dim="tp")
    check_group(..., grid, rank=5, dim="tp")
    assert "Not answered yet" in capsys.readouterr().out


def test_names_checker_accepts_the_set_and_rejects_one_too_many(capsys):
    from gpututor.plan.layouts import predict_layouts
    from gpututor.plan.memory import Transformer
    rows = predict_layouts(Transformer(6, 192, 6, 96, 64), 8, 4, capacity=0.75 * 47e6)
    fit = [r["layout"] for r in rows if r["fits"]]          # lesson 09's exercise 4
    assert len(fit) >= 2
    check_names(list(reversed(fit)), fit, "layouts that fit")
    assert "Correct" in capsys.readouterr().out
    for wrong in (fit + ["ddp"], fit[:-1], "fsdp", [1, 2]):
        with pytest.raises(AssertionError):
            check_names(wrong, fit, "layouts that fit")


def test_online_softmax_checker_accepts_the_update_and_rejects_one_without_rescaling():
    from gpututor.lessons.exercises import check_online_softmax

    def update(m, l, acc, s, v):
        m_new = torch.maximum(m, s.amax(dim=-1))
        p = torch.exp(s - m_new[:, None])
        c = torch.exp(m - m_new)
        return m_new, l * c + p.sum(dim=-1), acc * c[:, None] + p @ v

    def no_rescale(m, l, acc, s, v):
        m_new = torch.maximum(m, s.amax(dim=-1))
        p = torch.exp(s - m_new[:, None])
        return m_new, l + p.sum(dim=-1), acc + p @ v

    check_online_softmax(update)
    with pytest.raises(AssertionError, match="rescale"):
        check_online_softmax(no_rescale)
    with pytest.raises(AssertionError, match="failed"):
        check_online_softmax(lambda m, l, acc, s, v: (m, l))
