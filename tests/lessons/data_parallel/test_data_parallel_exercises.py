"""Lesson 02's checkers (``gpututor.lessons.data_parallel.exercises``): each accepts the lesson's
published solution, read from its Solutions cell, and rejects plausible wrong answers, each named
by the mistake it models. The ring checker's guards against the built-in collectives are tested
in ``test_checkers.py``; here, that the package's own ring refuses too."""
import ast
import functools
import inspect
import re

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch.distributed import isend as isend_bound_before   # bound before any check starts

from gpututor import RunSpec, build_model
from gpututor.models import count_parameters
from gpututor.i18n import ZH, set_language
from gpututor.lessons.data_parallel import exercises as data_parallel_exercises
from gpututor.lessons.data_parallel.exercises import (check_allreduce, check_bytes_per_step,
                                                      check_sent_per_rank)
from gpututor.parallel.data_parallel import ring as imported_ring
from gpututor.parallel.data_parallel.ring import ring_allreduce as imported_before
from exercise_solutions import published as _published, rejected

PARAMS = count_parameters(build_model(RunSpec(model="gpt", model_size="small")))   # the small GPT's
RUNS = {"single": {"params": PARAMS}, "ddp": {"comm_bytes_per_step": 4 * PARAMS}}   # as measured


def published(variable: str, **names):
    return _published("02_data_parallel", variable, torch=torch, **names)


# ---- exercise 2: the bytes DDP would all-reduce for a model no run trained -------------------

MEDIUM = count_parameters(build_model(RunSpec(model="gpt", model_size="medium")))


def test_bytes_per_step_asks_for_a_model_no_run_trained(capsys):
    names = dict(runs=RUNS, base=RunSpec(model="gpt", model_size="small"),
                 build_model=build_model, count_parameters=count_parameters)
    check_bytes_per_step(published("my_bytes_per_step", **names), RUNS)
    assert "Correct. bytes all-reduced per step, medium GPT: 1.095e+07 (from this run's " \
        "measurements: 1.095e+07)" in capsys.readouterr().out
    wrong = {"the field the run recorded (the small GPT's)": RUNS["ddp"]["comm_bytes_per_step"],
             "counted the gradients twice": 2 * 4 * MEDIUM, "bf16, not fp32": 2 * MEDIUM,
             "the parameter count, not bytes": MEDIUM,
             "what each rank sends on 8 ranks": 2 * (8 - 1) / 8 * 4 * MEDIUM}
    for mistake, answer in wrong.items():
        rejected(check_bytes_per_step, answer, RUNS,
                 match=re.escape(f"{answer!r} is not what this run's measurements give"))
    for shape in (np.int64(4 * MEDIUM), torch.tensor(4.0 * MEDIUM)):
        check_bytes_per_step(shape, RUNS)
    rejected(check_bytes_per_step, 4 * MEDIUM, {"single": {"params": PARAMS}},
             match="has not measured it yet")


def test_bytes_per_step_follows_the_runs_measured_bytes_per_parameter():
    """The expected value comes from the run: were gradients sent in 16 bits (2 bytes per
    parameter measured), the answer would be 2 x the medium GPT's parameters."""
    half = {"single": {"params": PARAMS}, "ddp": {"comm_bytes_per_step": 2 * PARAMS}}
    check_bytes_per_step(2 * MEDIUM, half)
    rejected(check_bytes_per_step, 4 * MEDIUM, half, match="is not what this run's")


# ---- exercise 3: what each rank sends on 64 ranks --------------------------------------------

def test_sent_per_rank_asks_for_a_world_no_run_had(capsys):
    check_sent_per_rank(published("my_sent_on_64", runs=RUNS), RUNS)
    assert "Correct. bytes sent per rank on 64 ranks: 6.602e+06 (the formula gives 6.602e+06)" \
        in capsys.readouterr().out
    wrong = {
        "forgot the (N-1)/N factor": 2 * 4 * PARAMS,
        "the 2-rank run's recorded wire bytes": 2 * (2 - 1) / 2 * 4 * PARAMS,
        "8 ranks, not 64": 2 * (8 - 1) / 8 * 4 * PARAMS,
        "one phase only: the reduce-scatter without the all-gather": (64 - 1) / 64 * 4 * PARAMS,
        "counted the gradients twice": 2 * (64 - 1) / 64 * 8 * PARAMS,
        "(N-1)/N of the whole world's bytes": 2 * (64 - 1) / 64 * 4 * PARAMS * 64,
    }
    for mistake, answer in wrong.items():
        rejected(check_sent_per_rank, answer, RUNS,
                 match=re.escape(f"bytes sent per rank on 64 ranks: {answer!r} is not what the "
                                 "formula gives"))


def test_sent_per_rank_takes_other_world_sizes(capsys):
    check_sent_per_rank(2 * 3 / 4 * 4 * PARAMS, RUNS, world_size=4)
    assert "Correct. bytes sent per rank on 4 ranks" in capsys.readouterr().out
    rejected(check_sent_per_rank, 2 * 7 / 8 * 4 * PARAMS, RUNS, world_size=4,
             match="is not what the formula gives")


# ---- exercise 1: the package's ring refuses while the learner's runs (real ranks) ------------

def _ways_to_the_packages_ring() -> dict:
    """Candidates that call the package's ring instead of one of their own. Defined inside a
    function, so that they travel to the ranks by value (cloudpickle)."""
    def import_inside(tensor, rank, world):
        from gpututor.parallel.data_parallel.ring import ring_allreduce
        return ring_allreduce(tensor, rank, world)

    def import_made_before(tensor, rank, world):
        return imported_before(tensor, rank, world)

    def its_exchange_helper(tensor, rank, world):   # the ring written round the package's sends
        chunks = list(tensor.view(-1).tensor_split(world))
        right, left = (rank + 1) % world, (rank - 1) % world
        for step in range(world - 1):
            s, r = (rank - step) % world, (rank - step - 1) % world
            chunks[r] += imported_ring._exchange(chunks[s], chunks[r], right, left)
        return tensor

    def its_drawn_schedule(tensor, rank, world):   # the schedule lesson 02 draws, read, not written
        from gpututor.parallel.data_parallel.ring import ring_schedule
        for step in ring_schedule(world):
            step["send"][rank]
        return tensor

    return {f.__name__: f for f in (import_inside, import_made_before, its_exchange_helper,
                                    its_drawn_schedule)}


@pytest.mark.parametrize("way", list(_ways_to_the_packages_ring()))
def test_the_packages_ring_is_refused(way):
    rejected(check_allreduce, _ways_to_the_packages_ring()[way], world_sizes=(3,),
             match=re.escape("your function called the package's ring (ring_allreduce or "
                             "ring_schedule): write the ring yourself"))


# ---- exercise 1: right sums that are not a ring -------------------------------------------

def _not_rings() -> dict:
    """Candidates that return the right sum without a ring (an examiner's all-to-all passed)."""
    def all_to_all(tensor, rank, world, isend=None):   # every rank sends its whole tensor to every other
        isend = isend or dist.isend    # looked up as it runs, unless bound before the check
        incoming = [torch.empty_like(tensor) for _ in range(world)]
        requests = [isend(tensor.clone(), peer) for peer in range(world) if peer != rank]
        for peer in range(world):
            if peer != rank:
                dist.recv(incoming[peer], peer)
        for request in requests:
            request.wait()
        for peer in range(world):
            if peer != rank:
                tensor += incoming[peer]
        return tensor

    def whole_tensor_round_the_ring(tensor, rank, world):   # right neighbour, but S per step
        right, left = (rank + 1) % world, (rank - 1) % world
        passing, total = tensor.clone(), tensor.clone()
        for _ in range(world - 1):
            incoming = torch.empty_like(passing)
            request = dist.isend(passing, right)
            dist.recv(incoming, left)
            request.wait()
            total += incoming
            passing = incoming
        tensor.copy_(total)
        return tensor

    return {"all_to_all": all_to_all, "whole_tensor_round_the_ring": whole_tensor_round_the_ring,
            # an examiner's way around: an isend imported before the check started
            "all_to_all_with_isend_bound_before": functools.partial(all_to_all,
                                                                    isend=isend_bound_before)}


def test_a_right_sum_that_is_not_a_ring_is_refused():
    for way in ("all_to_all", "all_to_all_with_isend_bound_before"):
        rejected(check_allreduce, _not_rings()[way], world_sizes=(3,),
                 match=r"on 3 ranks, rank \d sent to a rank other than its right neighbour, rank \d "
                       r"\(it sent to: \d\): in a ring each rank sends only to its right neighbour")
    rejected(check_allreduce, _not_rings()["whole_tensor_round_the_ring"], world_sizes=(3,),
             match=r"on 3 ranks, rank \d sent 6 elements of a 3-element tensor: a ring sends at "
                   r"most 4 \(2\(N-1\) chunks of ceil\(S/N\)\)")


def test_the_ring_bound_allows_the_rounding_of_each_chunk():
    assert data_parallel_exercises.ring_send_bound(13, 4) == 2 * 3 * 4   # chunks of 4,3,3,3
    assert data_parallel_exercises.ring_send_bound(1000, 4) == 2 * 3 * 250


# ---- Chinese -------------------------------------------------------------------------------

def test_every_message_of_the_checkers_has_its_chinese_line(capsys):
    found = set()
    for node in ast.walk(ast.parse(inspect.getsource(data_parallel_exercises))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("tr", "check_answer"):
            index = 0 if node.func.id == "tr" else 2
            if len(node.args) > index and isinstance(node.args[index], ast.Constant):
                found.add(node.args[index].value)
    found |= {"bytes sent per rank on 64 ranks", "bytes all-reduced per step, medium GPT"}
    assert len(found) >= 8 and sorted(t for t in found if t not in ZH) == []
    set_language("zh")
    try:
        check_bytes_per_step(4 * MEDIUM, RUNS)
        check_sent_per_rank(2 * 63 / 64 * 4 * PARAMS, RUNS)
        check_allreduce(...)
        out = capsys.readouterr().out
        assert "中型 GPT 每步全归约的字节数" in out and "64 个进程时每个进程发送的字节数" in out
        assert "环形全归约：尚未作答" in out
    finally:
        set_language("en")
