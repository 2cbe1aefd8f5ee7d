"""Lesson 05's exercise checkers: each takes the learner's answer and the lesson's own objects
(the numbers of the question, the sweep of runs) and derives what it expects, so the notebook
shows only the call. ``...`` means "not answered yet".

- :func:`check_bubble`, :func:`check_fewest_microbatches`: the bubble formula
  (``gpututor.formulas.theoretical_bubble_fraction``) for given stages and micro-batches.
- :func:`check_measured_bubble`: a run's last step's bubble, as its ranks recorded it.
- :func:`check_1f1b_order`: the learner's 1F1B order for one stage, against the order the
  package's schedule (``parallel.pipeline.schedules.one_f_one_b``) runs, for stages and
  micro-batch counts the learner does not choose.
"""
from __future__ import annotations

from typing import Callable

from ...formulas import theoretical_bubble_fraction
from ...i18n import tr
from ...parallel.pipeline.schedules import one_f_one_b
from ..common.code_exercise import call_refusing
from ..common.exercises import check_answer


def check_bubble(answer, stages: int = 2, microbatches: int = 8) -> None:
    """The share of a step each of ``stages`` stages is idle with ``microbatches``, by theory
    (the defaults: lesson 05's exercise 1)."""
    check_answer(answer, theoretical_bubble_fraction(stages, microbatches),
                 f"bubble for p={stages}, m={microbatches}", rel_tol=0.001, source="formula")


def check_fewest_microbatches(answer, stages: int = 4, bubble: float = 0.1) -> None:
    """The fewest micro-batches whose theoretical bubble on ``stages`` stages is at most
    ``bubble`` (the defaults: lesson 05's exercise 2)."""
    fewest = next(m for m in range(1, 100_000)
                  if theoretical_bubble_fraction(stages, m) <= bubble + 1e-12)
    check_answer(answer, fewest, f"fewest micro-batches for a bubble <= {bubble * 100:g} % on "
                                 f"{stages} stages", rel_tol=0, source="formula")


def check_measured_bubble(answer, sweep: dict, microbatches: int = 8) -> None:
    """The bubble fraction of the last step of ``sweep[microbatches]``, as rank 0 recorded it
    (the stages measure it together at the end of every step)."""
    run = sweep.get(microbatches)
    records = [r for r in (run.records if run is not None else []) if r.get("rank") == 0]
    recorded = records[-1].get("bubble_fraction") if records else None
    # the learner computes the same floats the ranks did: only rounding may differ
    check_answer(answer, recorded, f"measured bubble of the m={microbatches} run's last step",
                 rel_tol=1e-6)


class _Recorder:
    """Stands for a stage: records the order in which a schedule calls forward and backward."""

    def __init__(self, index: int, count: int):
        self.index, self.count, self.order = index, count, []

    def forward(self, i: int) -> None:
        self.order.append(("F", i))

    def backward(self, i: int) -> None:
        self.order.append(("B", i))


def reference_1f1b_order(stage: int, stages: int, microbatches: int) -> list[tuple[str, int]]:
    """The order stage ``stage`` of ``stages`` runs its forwards and backwards in the package's
    1F1B schedule with ``microbatches`` micro-batches."""
    worker = _Recorder(stage, stages)
    one_f_one_b(worker, microbatches)
    return worker.order


def _as_order(ops) -> list[tuple]:
    """The candidate's order as a list of ``(kind, micro-batch)`` tuples (TypeError if not)."""
    return [tuple(op) for op in ops]


def check_1f1b_order(candidate: Callable) -> None:
    """Run ``candidate(stage, stages, microbatches)`` (a list of ``("F", i)`` / ``("B", i)``)
    for every stage of four pipelines, fewer micro-batches than stages among them, against
    :func:`reference_1f1b_order`; say where the first difference is, not what the answer is."""
    if candidate is ...:
        print(tr("1F1B order: not answered yet. Define your function and pass it in."))
        return
    cases = [(stages, m, stage) for stages, m in ((2, 4), (4, 8), (4, 2), (3, 5))
             for stage in range(stages)]
    expected = {case: reference_1f1b_order(case[2], case[0], case[1]) for case in cases}
    for stages, m, stage in cases:
        want = expected[stages, m, stage]
        got = call_refusing(candidate, (stage, stages, m), read=_as_order,
                            refused=(one_f_one_b, reference_1f1b_order),
                            called=tr("1F1B order: your function ran the package's 1F1B "
                                      "schedule: write the order yourself."),
                            mistyped=tr("1F1B order: for stage {stage} of {stages} with m={m} "
                                        "your function did not return a list of (kind, "
                                        "micro-batch) pairs: {error}"),
                            stage=stage, stages=stages, m=m)
        if got == want:
            continue
        if sorted(map(repr, got)) != sorted(map(repr, want)):
            raise AssertionError(tr(
                "1F1B order: stage {stage} of {stages} with m={m} must run each micro-batch's "
                "forward and backward exactly once, {count} operations; yours runs other "
                "operations ({got_count} of them).", stage=stage, stages=stages, m=m,
                count=len(want), got_count=len(got)))
        first = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        raise AssertionError(tr(
            "1F1B order: stage {stage} of {stages} with m={m} runs the right operations, but "
            "from position {position} on in another order. How many forwards does a stage run "
            "before its first backward?", stage=stage, stages=stages, m=m, position=first))
    print(tr("Correct: your order is 1F1B's for every stage of 2, 3 and 4-stage pipelines, also "
             "with fewer micro-batches than stages."))
