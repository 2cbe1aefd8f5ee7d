"""Lesson 00's exercise checkers: each takes the learner's answer and the lesson's own objects
(the spec, the runs' summaries) and derives what it expects from them, so the notebook shows
only the call. ``...`` means "not answered yet".

- :func:`check_rows_per_rank`: the sequences one data-parallel rank trains on per step, as
  ``gpututor.batches`` hands them to rank 0 of ``world_size`` ranks.
- :func:`check_rank_indices`: the learner's ``my_rank_indices(n, rank, world_size)`` against
  ``torch.utils.data.DistributedSampler`` (no shuffling) for dataset lengths and world sizes the
  learner does not choose, some of which do not divide.
- :func:`check_ideal_throughput`: the tokens/s the data-parallel run would have reached at the
  ideal speedup (world size x the 1-rank run's measured tokens/s).
- :func:`check_optimizer_state`: AdamW's state for the large GPT (no run trains it), counted.
"""
from __future__ import annotations

from typing import Callable

from torch.utils.data import DistributedSampler

from ...config import RunSpec
from ...data import batches
from ...i18n import say, tr
from ...measure.memory import adamw_state_bytes
from ...models import build_model
from ..common.code_exercise import call_refusing
from ..common.exercises import as_number, check_answer


def check_rows_per_rank(answer, spec, world_size: int = 4) -> None:
    """Sequences per step that rank 0 of ``world_size`` data-parallel ranks trains on with
    ``spec``'s global batch: the rows ``gpututor.batches`` really yields it."""
    if answer is ...:
        say("{what}: not answered yet. Replace ... with your answer and run the cell again.",
                 what=tr("sequences per rank per step"))
        return
    inputs, _ = next(batches(spec.replace(world_size=world_size), rank=0, world_size=world_size))
    expected, number = inputs.shape[0], as_number(answer)
    what = tr("sequences per rank per step")
    if number != expected:
        raise AssertionError(tr("{what}: {answer} is not how many gpututor.batches gives rank 0. "
                                "Try again.", what=what, answer=repr(answer)))
    say("Correct. {what}: {number} (gpututor.batches gives rank 0 {expected})", what=what,
             number=f"{number:g}", expected=expected)


# dataset lengths and world sizes: even splits, uneven ones, fewer samples than ranks, and
# more padding than samples (2 on 5 ranks: the indices wrap around more than once)
SAMPLER_CASES = ((12, 4), (10, 4), (7, 3), (9, 2), (3, 4), (2, 5))


def reference_rank_indices(n: int, rank: int, world_size: int) -> list[int]:
    """The indices ``DistributedSampler`` (no shuffling, ``drop_last=False``) gives ``rank`` of
    ``world_size`` for a dataset of ``n`` samples."""
    return list(DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=False))


def _as_indices(got) -> list[int] | None:
    try:
        values = list(got)
    except TypeError:
        return None
    if isinstance(got, (str, bytes)) or any(isinstance(v, bool) for v in values):
        return None
    try:
        ints = [int(v) for v in values]
    except (TypeError, ValueError, RuntimeError):
        return None
    return ints if all(i == v for i, v in zip(ints, values)) else None


def check_rank_indices(candidate: Callable) -> None:
    """Run ``candidate(n, rank, world_size)`` for every rank of each of :data:`SAMPLER_CASES`
    against :func:`reference_rank_indices`, with ``DistributedSampler`` refused while it runs;
    say what is wrong (how many, which ones, their order), not what the indices are."""
    if candidate is ...:
        say("rank indices: not answered yet. Define your function and pass it in.")
        return
    cases = [(n, world, rank) for n, world in SAMPLER_CASES for rank in range(world)]
    expected = {case: reference_rank_indices(case[0], case[2], case[1]) for case in cases}
    for n, world, rank in cases:
        want = expected[n, world, rank]
        got = call_refusing(candidate, (n, rank, world),
                            refused=(DistributedSampler.__init__, DistributedSampler.__iter__,
                                     reference_rank_indices),
                            called=tr("rank indices: your function used DistributedSampler: "
                                      "deal the indices out yourself."))
        indices = _as_indices(got)
        where = dict(n=n, world=world, rank=rank)
        if indices is None:
            raise AssertionError(tr("rank indices: for n={n} on {world} ranks, rank {rank}, your "
                                    "function returned {got!r}, not a list of whole numbers.",
                                    got=got, **where))
        if len(indices) != len(want):
            raise AssertionError(tr(
                "rank indices: for n={n} on {world} ranks, rank {rank} gets {count} indices from "
                "yours; every rank must get the same number, enough that together the ranks "
                "cover all {n} samples.", count=len(indices), **where))
        if indices == want:
            continue
        if sorted(indices) == sorted(want):
            raise AssertionError(tr("rank indices: for n={n} on {world} ranks, rank {rank} gets "
                                    "the right indices in another order.", **where))
        raise AssertionError(tr(
            "rank indices: for n={n} on {world} ranks, rank {rank} gets other indices than "
            "DistributedSampler's, from position {position} on. Does rank r take r, r + N, "
            "r + 2N, ...? Where do the extra ones come from when n does not divide?",
            position=next(i for i, (a, b) in enumerate(zip(indices, want)) if a != b), **where))
    sizes = ", ".join(f"(n={n}, N={world})" for n, world in SAMPLER_CASES)
    say("Correct: your indices are DistributedSampler's for every rank of {sizes}.",
             sizes=sizes)


def check_ideal_throughput(answer, ddp: dict, solo: dict) -> None:
    """The tokens/s the data-parallel run ``ddp`` would reach at the ideal speedup: its world
    size times the measured tokens/s of the 1-rank run ``solo`` (same model and global batch)."""
    base = solo.get("tokens_per_s") if solo.get("world_size") == 1 else None
    expected = ddp["world_size"] * base if base else None
    check_answer(answer, expected, "tokens/s of the data-parallel run at the ideal speedup",
                 rel_tol=0.001, source="derived")


# exercise 4's model: not the one the lesson's runs train (small)
OPTIMIZER_SIZE = "large"


def check_optimizer_state(answer, size: str = OPTIMIZER_SIZE) -> None:
    """AdamW's state in bytes for the ``size`` GPT, counted here after a step
    (``gpututor.measure.memory.adamw_state_bytes``); no run of the lesson trains that model.
    Within 0.1 %: its two fp32 moments per parameter (its step counters are a few bytes more)."""
    model = build_model(RunSpec(model="gpt", model_size=size))
    check_answer(answer, adamw_state_bytes(model), "AdamW state bytes of the large GPT",
                 rel_tol=0.001, source="counted")
