"""Every exercise checker accepts the lesson's published solution and rejects plausible wrong
answers, each named by the mistake it models, for the reason its message gives.

The published solutions are read from the lessons' "Solutions" cells, as
``tests/test_exercises.py`` reads them (nothing is executed but the solution's own code). The
ring all-reduce's checker also proves the from-scratch ring equals ``dist.all_reduce``.
"""
import math
import re

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed import all_reduce as imported_before   # bound before any check

from gpututor import RunSpec
from gpututor.lessons.data_parallel.exercises import check_allreduce
from gpututor.lessons.common.exercises import check_answer
from gpututor.parallel.pipeline.timeline import theoretical_bubble_fraction
from exercise_solutions import published as _published, rejected



def published(stem: str, variable: str, **names):
    return _published(stem, variable, math=math, torch=torch, F=F, **names)


# ---- check_answer ------------------------------------------------------------------------------

def test_check_answer_accepts_the_published_bubble_and_rejects_the_classic_mistakes(capsys):
    expected, what = theoretical_bubble_fraction(4, 8, 2), "bubble for p=4, m=8, v=2"   # lesson 05's
    solution = lambda p, m, v: (p - 1) / (v * m + p - 1)   # section 9's formula (exercise 2 uses it)
    check_answer(solution(4, 8, 2), expected, what, rel_tol=0.001)
    assert "Correct. bubble for p=4, m=8, v=2" in capsys.readouterr().out
    wrong = {
        "the ratio to the ideal time, not the fraction of the step": (4 - 1) / (2 * 8),
        "off by one stage: p instead of p - 1": 4 / (2 * 8 + 4 - 1),
        "the sequence for sums, not a number": "(4 - 1) / (2 * 8 + 4 - 1)",
        "a yes/no, not a number": True,
    }
    for mistake, answer in wrong.items():
        rejected(check_answer, answer, expected, what, rel_tol=0.001,
                 match=re.escape(f"{what}: {answer!r} is not what this notebook measured"))


def test_check_answer_takes_any_real_number_and_says_when_nothing_is_measured(capsys):
    check_answer(..., 8, "batch")
    assert "not answered yet" in capsys.readouterr().out
    for same in (np.float64(1.53), torch.tensor(1.53), np.array(1.53)):   # any real number
        check_answer(same, 1.54, "speedup")
    with pytest.raises(AssertionError, match="not measured it yet"):   # no crash on None
        check_answer(1.5, None, "speedup")


# ---- check_allreduce (lesson 02; real ranks) ----------------------------------------------------

def test_ring_allreduce_equals_dist_all_reduce(capsys):
    check_allreduce(published("02_data_parallel", "my_allreduce"))   # on 3 and on 4 ranks
    assert "Correct: equals dist.all_reduce on 3 and 4 ranks" in capsys.readouterr().out


def test_allreduce_checker_rejects_a_ring_that_forgets_to_sum():
    def forgets_to_sum(tensor, rank, world):  # defined here: sent to the ranks by value
        return tensor

    rejected(check_allreduce, forgets_to_sum,
             match=r"on 3 ranks, rank \d: a tensor of \d+ elements differs from dist.all_reduce")


def test_allreduce_checker_rejects_a_sum_that_is_not_in_place():
    ring = published("02_data_parallel", "my_allreduce")

    def returns_a_copy(tensor, rank, world):   # the right sum, in a new tensor
        return ring(tensor.clone(), rank, world)

    rejected(check_allreduce, returns_a_copy,
             match="returned the sum but left the tensor it was given unchanged: sum into that "
                   "tensor, in place")


def test_allreduce_checker_rejects_the_built_in_collective():
    def via_library(tensor, rank, world):
        dist.all_reduce(tensor)
        return tensor

    rejected(check_allreduce, via_library,
             match="your function called the built-in collective allreduce: build the sum from "
                   "dist.isend / dist.recv only")


def _ways_round_the_guard() -> dict:
    """Candidates that reach a built-in collective some other way than ``dist.all_reduce``.
    Defined inside a function, so that they travel to the ranks by value (cloudpickle)."""
    def import_made_before(tensor, rank, world):
        imported_before(tensor)
        return tensor

    def distributed_c10d(tensor, rank, world):
        torch.distributed.distributed_c10d.all_reduce(tensor)
        return tensor

    def the_group_object(tensor, rank, world):
        dist.group.WORLD.allreduce([tensor]).wait()
        return tensor

    def the_backend_object(tensor, rank, world):
        dist.group.WORLD._get_backend(tensor.device).allreduce([tensor]).wait()
        return tensor

    def a_functional_collective(tensor, rank, world):
        import torch.distributed._functional_collectives as funcol
        tensor.copy_(funcol.all_reduce(tensor, "sum", dist.group.WORLD).wait())
        return tensor

    def all_gather_then_add(tensor, rank, world):
        every = [torch.empty_like(tensor) for _ in range(world)]
        dist.all_gather(every, tensor)
        tensor.copy_(sum(every))
        return tensor

    def catching_the_refusal(tensor, rank, world):
        try:
            dist.all_reduce(tensor)
        except RuntimeError:
            pass
        return tensor

    def the_autograd_functional_op(tensor, rank, world):   # found by an examiner's reading
        ops = getattr(torch, "ops")
        gathered = ops._c10d_functional_autograd.all_gather_into_tensor(
            tensor.reshape(-1), world, dist.group.WORLD.group_name)
        gathered = ops._c10d_functional.wait_tensor(gathered)
        tensor.copy_(gathered.view(world, -1).sum(0).view_as(tensor))
        return tensor

    return {f.__name__: f for f in (import_made_before, distributed_c10d, the_group_object,
                                    the_backend_object, a_functional_collective,
                                    all_gather_then_add, catching_the_refusal,
                                    the_autograd_functional_op)}


@pytest.mark.parametrize("way", list(_ways_round_the_guard()))
def test_no_way_round_the_guard_reaches_a_built_in_collective(way):
    rejected(check_allreduce, _ways_round_the_guard()[way], world_sizes=(3,),
             match="your function called the built-in collective .*: build the sum from "
                   "dist.isend / dist.recv only")


def test_a_ring_cut_with_torch_chunk_is_right_too(capsys):
    """``torch.chunk`` gives fewer pieces than ranks for some sizes (1 element on 3 ranks): the
    checker's sizes give every rank a piece, so this natural solution passes."""
    def with_chunk(tensor, rank, world):
        chunks = list(tensor.view(-1).chunk(world))
        assert len(chunks) == world, f"{tensor.numel()} elements gave {len(chunks)} chunks"
        right, left = (rank + 1) % world, (rank - 1) % world
        for phase in ("reduce-scatter", "all-gather"):
            for step in range(world - 1):
                shift = 0 if phase == "reduce-scatter" else 1
                s, r = (rank - step + shift) % world, (rank - step - 1 + shift) % world
                incoming = torch.empty_like(chunks[r])
                req = dist.isend(chunks[s].contiguous(), right)
                dist.recv(incoming, left)
                req.wait()
                if phase == "reduce-scatter":
                    chunks[r] += incoming
                else:
                    chunks[r].copy_(incoming)
        return tensor

    check_allreduce(with_chunk)
    assert "Correct: equals dist.all_reduce on 3 and 4 ranks" in capsys.readouterr().out


def test_a_ring_that_sums_in_place_and_returns_nothing_is_right_too(capsys):
    """``dist.all_reduce`` itself returns None: a ring that sums into its tensor and returns
    nothing is a right answer (an examiner's reading found it rejected)."""
    def in_place_only(tensor, rank, world):
        chunks = list(tensor.view(-1).tensor_split(world))
        right, left = (rank + 1) % world, (rank - 1) % world
        for phase in ("reduce-scatter", "all-gather"):
            for step in range(world - 1):
                shift = 0 if phase == "reduce-scatter" else 1
                s, r = (rank - step + shift) % world, (rank - step - 1 + shift) % world
                incoming = torch.empty_like(chunks[r])
                req = dist.isend(chunks[s].contiguous(), right)
                dist.recv(incoming, left)
                req.wait()
                if phase == "reduce-scatter":
                    chunks[r] += incoming
                else:
                    chunks[r].copy_(incoming)

    check_allreduce(in_place_only)
    assert "Correct: equals dist.all_reduce on 3 and 4 ranks" in capsys.readouterr().out


def test_a_ring_with_batch_isend_irecv_is_right_too(capsys):
    """The lesson offers ``dist.batch_isend_irecv`` (a send and a receive posted together): the
    guard lets it through."""
    def batched(tensor, rank, world):
        chunks = list(tensor.view(-1).tensor_split(world))
        right, left = (rank + 1) % world, (rank - 1) % world
        for phase in ("reduce-scatter", "all-gather"):
            for step in range(world - 1):
                shift = 0 if phase == "reduce-scatter" else 1
                s, r = (rank - step + shift) % world, (rank - step - 1 + shift) % world
                incoming = torch.empty_like(chunks[r])
                ops = [dist.P2POp(dist.isend, chunks[s].contiguous(), right),
                       dist.P2POp(dist.irecv, incoming, left)]
                for req in dist.batch_isend_irecv(ops):
                    req.wait()
                if phase == "reduce-scatter":
                    chunks[r] += incoming
                else:
                    chunks[r].copy_(incoming)
        return tensor

    check_allreduce(batched)
    assert "Correct: equals dist.all_reduce on 3 and 4 ranks" in capsys.readouterr().out


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
    # on 3 ranks it sends to the left neighbour: the checker's record of the sends refuses it
    # (before, gloo aborted a rank on a chunk of another size and the crash was reported)
    rejected(check_allreduce, wrong_way,
             match=r"on 3 ranks, rank \d sent to a rank other than its right neighbour, rank \d")




# ---- lesson 11: capacity, dropped share, the balancing loss -----------------------------------

def _moe_records(dropped_per_step):
    return [{"step": s, "expert_tokens": [[300, 250, 260, 214 - d]],
             "expert_dropped": [[d, 0, 0, 0]]} for s, d in enumerate(dropped_per_step)]


def test_dropped_share_checker_counts_every_step_and_refuses_a_run_that_dropped_nothing(capsys):
    from gpututor.lessons.mixture_of_experts.exercises import check_dropped_share
    recs = _moe_records([0, 12, 30, 4])         # step 0 dropped nothing: a 0 there proves nothing
    check_dropped_share(published("11_mixture_of_experts", "my_dropped_share", recs=recs), recs)
    assert "Correct. dropped share of layer 0" in capsys.readouterr().out
    wrong = {"step 0 only": 0.0,
             "over the kept slots only": 46 / sum(sum(r["expert_tokens"][0]) for r in recs),
             "a count, not a share": 46}
    for mistake, answer in wrong.items():
        rejected(check_dropped_share, answer, recs, match="is not what this notebook measured")
    with pytest.raises(AssertionError, match="this run dropped no slot of layer 0, so any 0 "
                                             "would pass"):
        check_dropped_share(0.0, _moe_records([0, 0, 0]))


def test_balancing_loss_checker_runs_the_function_and_rejects_the_classic_mistakes(capsys):
    from gpututor.lessons.mixture_of_experts.exercises import check_balancing_loss
    check_balancing_loss(published("11_mixture_of_experts", "my_balancing_loss"))
    assert "Correct: your balancing loss equals" in capsys.readouterr().out

    def share(experts, n):
        return torch.bincount(experts.flatten(), minlength=n).float() / experts.numel()

    def no_factor(probs, experts):
        return (share(experts, probs.shape[1]) * probs.mean(dim=0)).sum()

    def first_choice_only(probs, experts):   # f over tokens' first experts, not all slots
        n = probs.shape[1]
        return n * (share(experts[:, :1], n) * probs.mean(dim=0)).sum()

    def f_times_f(probs, experts):           # the value at uniform routing, but no gradient
        n = probs.shape[1]
        f = share(experts, n)
        return n * (f * f).sum() + 0 * probs.sum()

    def detached(probs, experts):            # the right number, cut off from the router
        n = probs.shape[1]
        return n * (share(experts, n) * probs.detach().mean(dim=0)).sum()

    for candidate in (no_factor, first_choice_only, f_times_f):
        rejected(check_balancing_loss, candidate, match="not the reference's value")
    rejected(check_balancing_loss, detached, match="the value is right but its gradient")
    rejected(check_balancing_loss, lambda probs, experts: 1.0, match="not a one-number tensor")

    from gpututor.moe import load_balancing_loss as imported_before

    def calls_the_built_in(probs, experts):   # the function the exercise asks for
        return imported_before(probs, share(experts, probs.shape[1]))
    rejected(check_balancing_loss, calls_the_built_in, match="called gpututor.moe.load_balancing")

    def in_float64(probs, experts):           # right, in another dtype: passes
        n = probs.shape[1]
        return n * (share(experts, n).double() * probs.double().mean(dim=0)).sum()
    check_balancing_loss(in_float64)


# ---- lesson 05: a measured bubble, the 1F1B order (its bubble formula: tests/lessons/pipeline_parallel)

def test_measured_bubble_checker_runs_the_function_on_its_own_timelines(capsys):
    from gpututor.lessons.pipeline_parallel.exercises import TIMELINES, check_measured_bubble
    from gpututor.parallel.pipeline import timeline

    class FakeRun:   # the m=8 run's last step, as its ranks recorded it
        records = [{"rank": r, "step": 4, "bubble_fraction": 0.25,
                    "stage_events": [["F", 0, float(r), r + 1.0], ["B", 0, 2.0 + r, 3.0 + r]]}
                   for r in (0, 1)]
    solution = published("05_pipeline_parallel", "my_bubble_fraction")
    check_measured_bubble(solution, {8: FakeRun()})
    out = capsys.readouterr().out
    assert "Correct on the checker's 3 timelines" in out and "recorded 0.2500" in out
    check_measured_bubble(solution, {})
    assert "has not measured its m=8 run yet" in capsys.readouterr().out

    def busy_share(events):
        return 1 - solution(events)

    def pasted(events):              # a value some run recorded, whatever the timeline
        return 0.25

    def first_stage_only(events):    # one stage's idle share
        return solution({0: events[0]})

    def the_package(events):
        spans = [(min(s for _, _, s, _ in v), max(e for *_, e in v), sum(e - s for _, _, s, e in v))
                 for v in events.values()]
        return timeline.measured_bubble_fraction(spans)
    for mistake in (busy_share, pasted, first_stage_only):
        rejected(check_measured_bubble, mistake, {}, match="is not the idle share")
    rejected(check_measured_bubble, the_package, {}, match="ran the package's own bubble")
    rejected(check_measured_bubble, lambda events: "x", {}, match="did not return a number")
    assert len(TIMELINES) == 3


def test_1f1b_order_checker_runs_the_function_and_rejects_the_classic_mistakes(capsys):
    from gpututor.lessons.pipeline_parallel.exercises import check_1f1b_order, reference_1f1b_order
    check_1f1b_order(published("05_pipeline_parallel", "my_1f1b_order"))
    assert "Correct: your order is 1F1B's" in capsys.readouterr().out

    def gpipe(stage, stages, m):
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]

    def warmup_p_minus_s(stage, stages, m):       # one forward too many before the first backward
        w = min(stages - stage, m)
        return [("F", i) for i in range(w)] + [op for i in range(m - w)
                                               for op in (("F", w + i), ("B", i))] + \
            [("B", i) for i in range(m - w, m)]

    def uncapped_warmup(stage, stages, m):        # forgets m < p: forwards that do not exist
        w = stages - stage - 1
        return [("F", i) for i in range(w)] + [op for i in range(m - w)
                                               for op in (("F", w + i), ("B", i))] + \
            [("B", i) for i in range(max(0, m - w), m)]

    rejected(check_1f1b_order, gpipe, match="runs the right operations, but from position")
    rejected(check_1f1b_order, warmup_p_minus_s, match="runs the right operations, but from")
    rejected(check_1f1b_order, uncapped_warmup, match="exactly once, .* yours runs other")
    rejected(check_1f1b_order, lambda stage, stages, m: None, match="did not return a list")

    from gpututor.lessons.pipeline_parallel.exercises import FIXED_PIPELINES
    from gpututor.parallel.pipeline.schedules import call_order
    table = {(stage, stages, m): call_order("1f1b", stage, stages, m)     # made before the check
             for stages, m in FIXED_PIPELINES for stage in range(stages)}

    def answers_from_a_table(stage, stages, m):
        return table.get((stage, stages, m), [])

    rejected(check_1f1b_order, answers_from_a_table, match="exactly once")

    def calls_the_package(stage, stages, m):      # the schedule it is asked to write
        return reference_1f1b_order(stage, stages, m)

    from gpututor.parallel.pipeline.schedules import one_f_one_b as imported_before

    def runs_the_schedule(stage, stages, m):
        class Recorder:
            index, count, order = stage, stages, []
            forward = lambda self, i: self.order.append(("F", i))
            backward = lambda self, i: self.order.append(("B", i))
        r = Recorder()
        imported_before(r, m)
        return r.order

    for candidate in (calls_the_package, runs_the_schedule):
        rejected(check_1f1b_order, candidate, match="ran the package's 1F1B schedule")
    assert reference_1f1b_order(0, 2, 3) == [("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1),
                                             ("B", 2)]   # the reference is restored afterwards
