"""Lesson 02's exercise checkers: each takes the learner's answer and the lesson's own objects
(the runs' summaries) and derives what it expects, so the notebook shows only the call. ``...``
means "not answered yet".

- :func:`check_allreduce`: the learner's ring all-reduce, run in real ranks (3 and 4) against
  ``dist.all_reduce``; every built-in collective and the package's own ``ring_allreduce``
  refuse while it runs, and its sends are recorded (:class:`RecordedSends`): a ring sends only
  to the right neighbour, at most ``2(N-1)`` chunks of ``ceil(S/N)`` elements.
- :func:`check_bytes_per_step`: the bytes DDP would all-reduce per step for a GPT no run here
  trained (the medium one): the bytes per parameter the DDP run measured, times that model's
  parameters (counted here), so no recorded field is the answer.
- :func:`check_sent_per_rank`: the bytes each rank sends in a ring all-reduce of the DDP run's
  gradients on more ranks than any run here had (64; the formula ``2(N-1)/N · S``).

The ranks run on CPU (gloo) whatever the machine has: the checker's tensors are CPU tensors. The
learner's function travels to them inside a small task object, by value (cloudpickle), so a
function defined in a notebook cell works.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist

from ...config import RunSpec
from ...formulas import bus_factor, ring_steps
from ...i18n import say, tr
from ...models import build_model, count_parameters
from ...parallel.data_parallel import ring
from ..common.code_exercise import CalledTheReference, call_refusing
from ..common.exercises import check_answer, records_in_ranks
from ..common.guards import OnlyPointToPoint, RecordedSends


def ring_send_bound(numel: int, world: int) -> int:
    """The most elements a rank of a ring all-reduce sends: ``2(N-1)`` chunks (reduce-scatter,
    then all-gather), none longer than ``ceil(S/N)`` (``torch.chunk`` and ``tensor_split`` give
    at most that), so ``2(N-1)/N · S`` plus the rounding of each chunk."""
    return ring_steps("all_reduce", world) * -(-numel // world)


@dataclass(frozen=True)
class AllReduceCheck:
    """In every rank: the candidate and ``dist.all_reduce`` on the same tensors, compared. While
    the candidate runs, every built-in collective refuses (:class:`OnlyPointToPoint`) and so does
    the package's ring (``ring_allreduce``, its exchange and its schedule, ``ring_schedule``, which
    the lesson draws): the exercise is to build it from
    point-to-point messages. The sizes are at least one element per rank and not all multiples
    of the world size, so ``torch.chunk`` and ``torch.tensor_split`` solutions both work and
    uneven pieces are tried. Every send is recorded (:class:`RecordedSends`): one to a rank
    other than ``(rank + 1) % world``, or more elements than :func:`ring_send_bound`, is not a
    ring (an all-to-all exchange gives the right sum too)."""

    candidate: Callable

    def __call__(self, spec, rank, world, device, emit):
        for step, numel in enumerate((world, world * 3 + 1, 1000)):
            gen = torch.Generator().manual_seed(1000 * rank + step)
            x = torch.randn(numel, generator=gen)
            expected = x.clone()
            dist.all_reduce(expected)
            given = x.clone()
            with OnlyPointToPoint() as guard, RecordedSends() as sent:
                try:
                    got = call_refusing(self.candidate, (given, rank, world), refused=(
                        ring.ring_allreduce, ring._exchange, ring.ring_schedule))
                except CalledTheReference:
                    emit({"step": step, "numel": numel, "max_error": float("inf"),
                          "reference": True})
                    return   # the other ranks stop too: they would wait for this one
                except RuntimeError:
                    if not guard.used:
                        raise
                    got = None
            if guard.used:
                emit({"step": step, "numel": numel, "max_error": float("inf"),
                      "built_in": guard.used[0]})
                return
            right = (rank + 1) % world
            others = sorted({peer for peer, _, _ in sent.sends if peer != right})
            total = sum(n for _, n, _ in sent.sends)
            if others or total > ring_send_bound(numel, world):
                emit({"step": step, "numel": numel, "max_error": float("inf"),
                      "not_a_ring": {"peers": others, "sent": total,
                                     "bound": ring_send_bound(numel, world), "right": right}})
                return
            if got is None:      # in place, returning nothing, as dist.all_reduce does
                got = given
            error = float((got - expected).abs().max()) if isinstance(got, torch.Tensor) and \
                got.shape == expected.shape else float("inf")
            in_place = float((given - expected).abs().max()) <= 1e-4
            emit({"step": step, "numel": numel, "max_error": error, "in_place": in_place})


def check_allreduce(candidate, world_sizes: tuple = (3, 4)) -> None:
    """Run ``candidate(tensor, rank, world)`` in real ranks against ``dist.all_reduce``, on 3
    and on 4 ranks (on 2 ranks the left and the right neighbour are the same rank, so a ring
    that sends the wrong way would pass). Prints what matched; raises ``AssertionError``
    saying what did not, or that it called a built-in collective or the package's ring."""
    if candidate is Ellipsis:
        say("ring all-reduce: not answered yet. Define your function and pass it in.")
        return
    for world_size in world_sizes:
        spec = RunSpec(world_size=world_size, device="cpu", timeout=20)
        records = records_in_ranks(AllReduceCheck(candidate), spec,
                                   "on {world} ranks your function failed: {error}")
        if any(r.get("reference") for r in records):
            raise AssertionError(tr("your function called the package's ring (ring_allreduce or "
                                    "ring_schedule): write the ring yourself"))
        built_in = [r["built_in"] for r in records if "built_in" in r]
        if built_in:
            raise AssertionError(tr("your function called the built-in collective {name}: "
                                    "build the sum from dist.isend / dist.recv only",
                                    name=built_in[0]))
        not_ring = next((r for r in records if "not_a_ring" in r), None)
        if not_ring is not None:
            found = not_ring["not_a_ring"]
            if found["peers"]:
                raise AssertionError(tr(
                    "on {world} ranks, rank {rank} sent to a rank other than its right "
                    "neighbour, rank {right} (it sent to: {peers}): in a ring each rank sends "
                    "only to its right neighbour", world=world_size,
                    rank=not_ring["rank"], peers=", ".join(map(str, found["peers"])),
                    right=found["right"]))
            raise AssertionError(tr(
                "on {world} ranks, rank {rank} sent {sent} elements of a {numel}-element tensor: "
                "a ring sends at most {bound} (2(N-1) chunks of ceil(S/N))", world=world_size,
                rank=not_ring["rank"], sent=found["sent"], numel=not_ring["numel"],
                bound=found["bound"]))
        worst = max(records, key=lambda r: r["max_error"])
        if worst["max_error"] <= 1e-4 and not all(r["in_place"] for r in records):
            raise AssertionError(tr("your function returned the sum but left the tensor it was "
                                    "given unchanged: sum into that tensor, in place"))
        if worst["max_error"] > 1e-4:
            raise AssertionError(tr("on {world} ranks, rank {rank}: a tensor of {numel} elements "
                                    "differs from dist.all_reduce by {error:.3g}",
                                    world=world_size, rank=worst["rank"], numel=worst["numel"],
                                    error=worst["max_error"]))
    *first, last = world_sizes
    sizes = tr("{sizes} and {last}", sizes=", ".join(map(str, first)), last=last) if first \
        else str(last)
    say("Correct: equals dist.all_reduce on {sizes} ranks, from point-to-point messages "
             "only, each rank sending only to its right neighbour and no more than a ring does",
             sizes=sizes)


def _ddp_bytes(runs: dict) -> float | None:
    """What the 2-rank DDP run all-reduced per step (its gradients), as it counted them."""
    run = runs.get("ddp") or {}
    return run.get("comm_bytes_per_step") or None


@functools.lru_cache(maxsize=None)
def gpt_parameters(model_size: str) -> int:
    """The parameters of the lesson's GPT at ``model_size``, counted on a model built here."""
    return count_parameters(build_model(RunSpec(model="gpt", model_size=model_size)))


def check_bytes_per_step(answer, runs: dict, model_size: str = "medium") -> None:
    """The bytes DDP would all-reduce per step for the ``model_size`` GPT: the bytes per
    parameter the DDP run measured (its ``comm_bytes_per_step`` over its parameters: one fp32
    gradient each) times that model's parameter count. No run of the lesson trains it."""
    measured = _ddp_bytes(runs)
    params = (runs.get("ddp") or {}).get("params") or (runs.get("single") or {}).get("params")
    expected = measured / params * gpt_parameters(model_size) if measured and params else None
    check_answer(answer, expected, f"bytes all-reduced per step, {model_size} GPT",
                 rel_tol=0.001, source="derived")


def check_sent_per_rank(answer, runs: dict, world_size: int = 64) -> None:
    """The bytes each of ``world_size`` ranks sends in one ring all-reduce of the gradients the
    DDP run all-reduced: ``2(N-1)/N`` times their size (reduce-scatter, then all-gather;
    ``gpututor.formulas.bus_factor``). No run of the lesson has 64 ranks."""
    size = _ddp_bytes(runs)
    expected = bus_factor("all_reduce", world_size) * size if size is not None else None
    check_answer(answer, expected, f"bytes sent per rank on {world_size} ranks", rel_tol=0.001,
                 source="formula")
