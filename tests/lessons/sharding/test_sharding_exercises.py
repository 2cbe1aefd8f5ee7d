"""Lesson 03's exercise checkers (``gpututor/lessons/sharding/exercises.py``): each accepts the
lesson's published solution, in any reasonable shape, and rejects plausible wrong answers, each
named by the mistake it models, for the reason its message gives. The reduce-scatter's checker
runs code in real ranks, where no built-in collective and none of the package's own
reduce-scatters can be reached.

The published solutions are read from the lesson's "Solutions" cell, as
``tests/test_exercises.py`` reads them.
"""

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch.distributed import reduce_scatter_tensor as imported_before   # bound before any check

from gpututor import RunSpec
from gpututor.i18n import set_language
from gpututor.lessons.sharding.exercises import (check_fewest_gpus, check_reduce_scatter,
                                                 check_state_saving, check_zero3_sent,
                                                 fewest_gpus, zero2_saving_per_rank,
                                                 zero3_sent_per_rank)
from gpututor.plan.memory import model_state_bytes
from exercise_solutions import published as _published, rejected

PSI = 2_737_152                      # lesson 03's model (gpt medium) has this many parameters


def published(variable: str, **names):
    return _published("03_sharding", variable, torch=torch, dist=dist, model_state_bytes=model_state_bytes, **names)


# ---- exercise 1: what ZeRO-2 would save on 4 ranks, counted ------------------------------------

SPEC2 = RunSpec(model="gpt", model_size="medium", strategy="zero2", world_size=2, batch_size=8,
                seq_len=32, steps=8)


def _summary(strategy: str, params: float, grads: float, optimizer: float) -> dict:
    return {"strategy": strategy, "world_size": 2, "spec": vars(SPEC2.replace(strategy=strategy)),
            "mem_by_category": {"params": [params] * 2, "grads": [grads] * 2,
                                "optimizer": [optimizer] * 2, "activations": [1e6] * 2}}


def _runs() -> dict:
    """What lesson 03's runs measure on 2 ranks, per rank: ddp keeps 4 + 4 + 8 bytes per
    parameter (and AdamW's step counters), zero2 half of the gradients and of the optimizer
    state (padded)."""
    return {"ddp": _summary("ddp", 4 * PSI, 4 * PSI, 8 * PSI + 4 * 38),
            "zero1": _summary("zero1", 4 * PSI + 24, 4 * PSI + 24, 4 * PSI + 40),
            "zero2": _summary("zero2", 4 * PSI + 24, 2 * PSI + 12, 4 * PSI + 40)}


def test_zero2_saving_is_counted_on_the_padded_units():
    assert zero2_saving_per_rank(SPEC2, 4) == pytest.approx(9 * PSI, rel=1e-4)
    assert zero2_saving_per_rank(SPEC2, 4) <= 9 * PSI     # padding only adds to what zero2 keeps


def test_state_saving_accepts_the_published_answer_in_any_shape(capsys):
    runs = _runs()
    answer = published("my_saving", n_params=PSI)
    for shape in (answer, int(answer), np.float64(answer), torch.tensor(answer)):
        check_state_saving(shape, runs)
    assert "Correct. model state zero2 saves each rank against ddp on 4 ranks" \
        in capsys.readouterr().out


@pytest.mark.parametrize("mistake, answer", [
    ("forgot the (N-1)/N factor", 12 * PSI),
    ("ZeRO-1's saving: the optimizer state only", 8 * PSI * 3 / 4),   # 6Ψ: also 2 ranks' zero2
    ("ZeRO-3's saving: the parameters too", 16 * PSI * 3 / 4),
    ("what zero2 keeps, not what it saves", 4 * PSI + 12 * PSI / 4),
])
def test_state_saving_rejects_the_classic_mistakes(mistake, answer):
    rejected(check_state_saving, answer, _runs(),
             match="is not what counting on the model gives|is what the runs on 2 ranks measured")


@pytest.mark.parametrize("mistake, answer", [
    ("the 2-rank runs' difference, pasted", 6 * PSI + 4 * 38 - 52),
    ("the 2 ranks' factor, by formula", 12 * PSI / 2),
])
def test_state_saving_is_not_passed_by_the_runs_on_2_ranks(mistake, answer):
    rejected(check_state_saving, answer, _runs(), match="is what the runs on 2 ranks measured")


def test_state_saving_says_when_the_runs_are_missing():
    rejected(check_state_saving, 9 * PSI, {"ddp": _runs()["ddp"]}, match="has not measured it yet")


# ---- exercise 2: what fits, at scale (formula) -------------------------------------------------

def test_fewest_gpus_accepts_the_published_pair_in_any_shape(capsys):
    answer = published("my_fewest_gpus")
    assert answer == (31, 7)
    assert [fewest_gpus(13e9, stage, 40e9, 8e9) for stage in range(4)] == [None, None, 31, 7]
    for shape in (answer, list(answer), (np.int64(31), torch.tensor(7)), (31.0, 7.0)):
        check_fewest_gpus(shape)
    assert "ZeRO-2 fits from 31 GPUs, ZeRO-3 from 7" in capsys.readouterr().out


@pytest.mark.parametrize("mistake, answer", [
    ("rounded down: N >= 30.3 and 6.5 taken as 30 and 6", (30, 6)),
    ("the stages swapped", (7, 31)),
    ("the 8 GB for activations left out (40 GB of state)",
     (fewest_gpus(13e9, 2, 40e9), fewest_gpus(13e9, 3, 40e9))),
    ("all 40 GB counted and the 8 GB added on top", (fewest_gpus(13e9, 2, 48e9), 7)),
    ("the question's device count of old (32 GPUs) for both", (32, 32)),
])
def test_fewest_gpus_rejects_the_classic_mistakes(mistake, answer):
    assert answer != (31, 7)
    rejected(check_fewest_gpus, answer, match="is not what the formula gives")


@pytest.mark.parametrize("answer", [31, "31, 7", (31,), (31, 7, 1), (31.5, 7), (None, 7)])
def test_fewest_gpus_wants_a_pair_of_whole_numbers(answer):
    rejected(check_fewest_gpus, answer, match="is not a pair of whole numbers")


def test_fewest_gpus_follows_the_question():
    check_fewest_gpus((fewest_gpus(7.5e9, 2, 40e9, 8e9), fewest_gpus(7.5e9, 3, 40e9, 8e9)),
                      n_params=7.5e9)
    rejected(check_fewest_gpus, (31, 7), n_params=7.5e9, match="is not what the formula gives")


# ---- exercise 3: what ZeRO-3 would send on 8 ranks, counted ------------------------------------

SPEC = RunSpec(model="gpt", model_size="medium", strategy="zero3", world_size=4, batch_size=8,
               seq_len=32, steps=8)
ON_4 = zero3_sent_per_rank(SPEC, 4)          # what the 4-rank run records (test_sharding checks it)
FOUR = {"strategy": "zero3", "world_size": 4, "spec": vars(SPEC), "comm_wire_bytes_per_step": ON_4}


def test_zero3_sent_counts_the_strategys_own_collectives():
    assert zero3_sent_per_rank(SPEC, 8) == pytest.approx(3 * 7 / 8 * 4 * PSI, rel=1e-4)
    assert ON_4 == pytest.approx(3 * 3 / 4 * 4 * PSI, rel=1e-4)


def test_zero3_sent_accepts_the_published_answer(capsys):
    answer = published("my_zero3_bytes", n_params=PSI)
    for shape in (answer, int(answer), np.float64(answer), torch.tensor(answer)):
        check_zero3_sent(shape, FOUR)
    assert "Correct. bytes each rank sends per step under zero3 on 8 ranks" \
        in capsys.readouterr().out


@pytest.mark.parametrize("mistake, answer", [
    ("ZeRO-2's two collectives", 2 * (8 - 1) / 8 * 4 * PSI),
    ("forgot the (N-1)/N factor: the data size", 3 * 4 * PSI),
    ("counted numbers, not bytes", 3 * (8 - 1) / 8 * PSI),
])
def test_zero3_sent_rejects_the_classic_mistakes(mistake, answer):
    rejected(check_zero3_sent, answer, FOUR, match="is not what counting on the model gives")


@pytest.mark.parametrize("mistake, answer", [
    ("the recorded field, pasted", ON_4),
    ("the 4-rank run's factor, by formula", 3 * (4 - 1) / 4 * 4 * PSI),
])
def test_zero3_sent_is_not_passed_by_the_recorded_field(mistake, answer):
    """The 4-rank run recorded its own figure: pasted, or worked out for 4 ranks, it is named
    as the recorded one."""
    rejected(check_zero3_sent, answer, FOUR, match="is what the run on 4 ranks recorded")


def test_zero3_sent_wants_the_zero3_run():
    rejected(check_zero3_sent, 9 * PSI, {**FOUR, "strategy": "ddp"},
             match="pass the zero3 run of section 8")


# ---- exercise 4: the reduce-scatter, in real ranks --------------------------------------------
# Candidates are defined inside the tests or in functions: they travel to the ranks by value.

def test_the_published_reduce_scatter_equals_the_packages(capsys):
    check_reduce_scatter(published("my_reduce_scatter"))    # on 3 and on 4 ranks
    assert "Correct: each rank's piece of the average" in capsys.readouterr().out


def _right_ones() -> dict:
    """Other right solutions: pieces by ``torch.chunk`` (uneven sizes cut otherwise than by
    tensor_split), a send and a receive posted together, and no ring at all (each rank sends each
    other rank its piece directly: as many bytes as the ring)."""
    def with_chunk(flat, rank, world):
        pieces = list(flat.chunk(world))
        right, left = (rank + 1) % world, (rank - 1) % world
        for step in range(world - 1):
            send, recv = (rank - step - 1) % world, (rank - step - 2) % world
            incoming = torch.empty_like(pieces[recv])
            req = dist.isend(pieces[send].contiguous(), right)
            dist.recv(incoming, left)
            req.wait()
            pieces[recv] += incoming
        return pieces[rank] / world

    def batched(flat, rank, world):
        pieces = list(flat.tensor_split(world))
        right, left = (rank + 1) % world, (rank - 1) % world
        for step in range(world - 1):
            send, recv = (rank - step - 1) % world, (rank - step - 2) % world
            incoming = torch.empty_like(pieces[recv])
            ops = [dist.P2POp(dist.isend, pieces[send].contiguous(), right),
                   dist.P2POp(dist.irecv, incoming, left)]
            for req in dist.batch_isend_irecv(ops):
                req.wait()
            pieces[recv] += incoming
        return pieces[rank] / world

    def direct(flat, rank, world):
        pieces = flat.tensor_split(world)
        sends = [dist.isend(pieces[q].contiguous(), q) for q in range(world) if q != rank]
        total = pieces[rank].clone()
        for q in range(world):
            if q != rank:
                incoming = torch.empty_like(pieces[rank])
                dist.recv(incoming, q)
                total += incoming
        for req in sends:
            req.wait()
        return total / world

    return {f.__name__: f for f in (with_chunk, batched, direct)}


@pytest.mark.parametrize("way", list(_right_ones()))
def test_other_right_reduce_scatters_pass_too(way, capsys):
    check_reduce_scatter(_right_ones()[way], world_sizes=(4,))
    assert "Correct" in capsys.readouterr().out


def _wrong_ones() -> dict:
    def ring(flat, rank, world, shift):
        pieces = list(flat.tensor_split(world))
        right, left = (rank + 1) % world, (rank - 1) % world
        for step in range(world - 1):
            send, recv = (rank - step - shift) % world, (rank - step - shift - 1) % world
            incoming = torch.empty_like(pieces[recv])
            req = dist.isend(pieces[send].contiguous(), right)
            dist.recv(incoming, left)
            req.wait()
            pieces[recv] += incoming
        return pieces

    def lesson_02s_phase_1_as_it_is(flat, rank, world):   # leaves rank r with piece r+1
        return ring(flat, rank, world, 0)[(rank + 1) % world] / world

    def forgot_to_average(flat, rank, world):
        return ring(flat, rank, world, 1)[rank]

    def sends_the_whole_vector(flat, rank, world):       # everyone sums everything, then slices
        sends = [dist.isend(flat, q) for q in range(world) if q != rank]
        total = flat.clone()
        for q in range(world):
            if q != rank:
                incoming = torch.empty_like(flat)
                dist.recv(incoming, q)
                total += incoming
        for req in sends:
            req.wait()
        return total.tensor_split(world)[rank] / world

    def returns_nothing(flat, rank, world):
        ring(flat, rank, world, 1)

    return {"lesson 02's phase 1 as it is": (lesson_02s_phase_1_as_it_is,
                                             r"rank \d returned rank \d's piece"),
            "forgot to average": (forgot_to_average, "is the sum over the ranks, not their average"),
            "sends the whole vector": (sends_the_whole_vector,
                                       r"sent [\d,]+ bytes, more than a reduce-scatter must"),
            "returns nothing": (returns_nothing, "returned a NoneType, not a tensor")}


@pytest.mark.parametrize("mistake", list(_wrong_ones()))
def test_reduce_scatter_checker_rejects_the_classic_mistakes(mistake):
    candidate, message = _wrong_ones()[mistake]
    rejected(check_reduce_scatter, candidate, world_sizes=(3,), match=message)


def _ways_round_the_guard() -> dict:
    """Candidates that reach a built-in collective, or the package's own reduce-scatter or ring,
    some other way than ``dist.reduce_scatter_tensor``."""
    def built_in(flat, rank, world):
        out = torch.empty(flat.numel() // world)
        dist.reduce_scatter_tensor(out, flat)
        return out / world

    def import_made_before(flat, rank, world):
        out = torch.empty(flat.numel() // world)
        imported_before(out, flat)
        return out / world

    def the_group_object(flat, rank, world):
        out = torch.empty(flat.numel() // world)
        dist.group.WORLD._reduce_scatter_base(out, flat).wait()
        return out / world

    def a_functional_collective(flat, rank, world):
        import torch.distributed._functional_collectives as funcol
        return funcol.reduce_scatter_tensor(flat, "sum", 0, dist.group.WORLD).wait() / world

    def all_reduce_then_slice(flat, rank, world):
        dist.all_reduce(flat)
        return flat.tensor_split(world)[rank] / world

    def the_packages_reduce_scatter(flat, rank, world):
        from gpututor.measure.timing import CommMeter
        from gpututor.parallel.sharding.flat import reduce_scatter_mean
        return reduce_scatter_mean(flat, CommMeter(world_size=world))

    def the_packages_ring(flat, rank, world):
        from gpututor.parallel.data_parallel.ring import ring_allreduce
        return ring_allreduce(flat, rank, world).tensor_split(world)[rank] / world

    collective = "called the built-in collective"
    package = "ran the package's own reduce-scatter or ring"
    return {"dist.reduce_scatter_tensor": (built_in, collective),
            "an import made before": (import_made_before, collective),
            "the group object": (the_group_object, collective),
            "a functional collective": (a_functional_collective, collective),
            "all_reduce, then a slice": (all_reduce_then_slice, collective),
            "the package's reduce_scatter_mean": (the_packages_reduce_scatter, package),
            "the package's ring all-reduce": (the_packages_ring, package)}


@pytest.mark.parametrize("way", list(_ways_round_the_guard()))
def test_no_way_round_the_guard_reaches_a_built_in_or_the_packages_own(way):
    candidate, message = _ways_round_the_guard()[way]
    rejected(check_reduce_scatter, candidate, world_sizes=(3,), match=message)


def test_the_checkers_speak_chinese(capsys):
    set_language("zh")
    try:
        check_state_saving(9 * PSI, _runs())
        check_fewest_gpus(published("my_fewest_gpus"))
        check_zero3_sent(..., FOUR)
        check_reduce_scatter(...)
        out = capsys.readouterr().out
        for chinese in ("在 4 个进程上，与 ddp 相比 zero2 为每个进程省下的模型状态字节数", "ZeRO-2 从 31 张 GPU 起放得下",
                        "8 个进程上 zero3 每个进程每步发送的字节数", "归约分散：尚未作答"):
            assert chinese in out, (chinese, out)
        with pytest.raises(AssertionError, match="是 2 个进程上的运行测得的"):
            check_state_saving(6 * PSI, _runs())
        with pytest.raises(AssertionError, match="不是公式给出的值"):
            check_fewest_gpus((30, 6))
        with pytest.raises(AssertionError, match="请传入第 8 节的 zero3 运行"):
            check_zero3_sent(1.0, {**FOUR, "strategy": "ddp"})
    finally:
        set_language("en")
