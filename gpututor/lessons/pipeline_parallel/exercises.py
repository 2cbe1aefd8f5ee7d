"""Lesson 05's exercise checkers: each takes the learner's answer and the lesson's own objects
(the numbers of the question, the sweep of runs) and derives what it expects, so the notebook
shows only the call. ``...`` means "not answered yet".

- :func:`check_bubble_formula`: the learner's function for the bubble of GPipe or 1F1B when the
  last stage costs ``1 + x`` times the others (a formula no cell prints: :func:`uneven_bubble`),
  on cases the learner does not choose (fixed and drawn), with every function of the package
  that gives a bubble (``gpututor.formulas.theoretical_bubble_fraction``, the ideal timeline,
  the measured bubble) refused while it runs.
- :func:`check_fewest_microbatches`: the learner's function for the fewest micro-batches that
  keep the theory's bubble of (interleaved) 1F1B, ``(p-1)/(v·m+p-1)``, at or under a target, on
  fixed and drawn cases, the same functions refused.
- :func:`check_measured_bubble`: the learner's function from a timeline to its bubble, run on
  timelines no run recorded (the package's own ``measured_bubble_fraction`` refused), then on
  the m=8 run's last step against what its ranks recorded.
- :func:`check_1f1b_order`: the learner's 1F1B order for one stage, against the order the
  package's schedule (``parallel.pipeline.schedules.one_f_one_b``) runs, for stages and
  micro-batch counts the learner does not choose.
"""
from __future__ import annotations

import random
from typing import Callable

from ...formulas import _bubble_slots, bubble_to_compute_ratio, theoretical_bubble_fraction
from ...i18n import say, tr
from ...parallel.pipeline.schedules import call_order, ideal_timeline, one_f_one_b
from ...parallel.pipeline.timeline import free_handoff_bubble, measured_bubble_fraction
from ..common.code_exercise import call_refusing, number_from


# the functions of the package that give the theory's bubble, directly or from an ideal
# timeline: refused while the learner's bubble functions run (exercises 1 and 2)
def _bubble_references() -> tuple:
    return (theoretical_bubble_fraction, bubble_to_compute_ratio, _bubble_slots, ideal_timeline,
            measured_bubble_fraction, free_handoff_bubble, timeline_bubble, uneven_bubble)


# exercise 1's (stages p, micro-batches m, extra cost x of the last stage) every check runs:
# x = 0 (section 5's balanced stages) once, the others where a formula without x is wrong;
# two more are drawn
BUBBLE_CASES = ((4, 8, 0.5), (2, 4, 1.0), (8, 16, 0.25), (3, 5, 0.0), (6, 9, 2.0))


def drawn_bubble_cases(count: int = 2, rng: random.Random | None = None) -> list[tuple]:
    """``count`` (p, m, x) drawn at random, none of them a fixed one: 2 to 8 stages, 1 to 4p
    micro-batches, the last stage 5 % to 200 % more expensive (steps of 5 %)."""
    rng, drawn = rng or random.Random(), []
    while len(drawn) < count:
        p = rng.randint(2, 8)
        case = (p, rng.randint(1, 4 * p), rng.randint(1, 40) / 20)
        if case not in BUBBLE_CASES and case not in drawn:
            drawn.append(case)
    return drawn


def uneven_bubble(p: int, m: int, x: float) -> float:
    """The idle share of GPipe's or 1F1B's step (hand-offs free) on ``p`` stages with ``m``
    micro-batches when the last stage's passes take ``1 + x`` times every other stage's: the
    step lasts the first micro-batch's way through every stage, ``p + x`` stage-times, plus
    ``m - 1`` of the slowest stage's, ``1 + x`` each (what paces a pipeline is its slowest
    stage); the stages are busy ``m·(p + x)`` of ``p`` times that. With ``x = 0`` it is section
    5's ``(p-1)/(m+p-1)``. (The lesson's tests run both schedules' call orders on such stages.)"""
    step = p + x + (m - 1) * (1 + x)
    return 1 - m * (p + x) / (p * step)


def check_bubble_formula(candidate: Callable) -> None:
    """Run ``candidate(p, m, x)`` on :data:`BUBBLE_CASES` and two drawn cases
    (:func:`drawn_bubble_cases`): the share of a step the ``p`` ranks of GPipe or 1F1B are idle
    with ``m`` micro-batches when the last stage costs ``1 + x`` times the others
    (:func:`uneven_bubble`), within 1e-9 of it (relative), with :func:`_bubble_references`
    refused while it runs."""
    if candidate is ...:
        say("bubble: not answered yet. Define your function and pass it in.")
        return
    cases = list(BUBBLE_CASES) + drawn_bubble_cases()
    for p, m, x in cases:
        got = call_refusing(candidate, (p, m, x), refused=_bubble_references(),
                            called=tr("bubble: your function ran the package's own bubble: "
                                      "work it out yourself."),
                            failed=tr("bubble: for p={p}, m={m}, x={x:g} your function failed: "
                                      "{error}"), p=p, m=m, x=x)
        got = number_from(got, tr("bubble: for p={p}, m={m}, x={x:g} your function did not "
                                  "return a number.", p=p, m=m, x=x))
        want = uneven_bubble(p, m, x)
        if abs(got - want) > 1e-9 * abs(want):
            raise AssertionError(tr(
                "bubble: for p={p}, m={m}, x={x:g} your function gives {got:.4f}, {how} than "
                "the idle share of such a pipeline. How long does the step last when the last "
                "stage is the slowest, and how long is each stage busy in it?", p=p, m=m, x=x,
                got=got, how=tr("higher") if got > want else tr("lower")))
    say("Correct: your function gives the idle share in {count} pipelines, with the last stage "
        "as fast as the others (x = 0) and slower.", count=len(cases))


# exercise 2's (p, v, target) every check runs, and two drawn: no target is a value the formula
# takes at a whole m, so rounding a float at the boundary cannot decide the answer
MICROBATCH_CASES = ((4, 1, 0.07), (8, 2, 0.06), (2, 3, 0.05), (6, 4, 0.03), (16, 1, 0.22))


def _off_boundary(p: int, v: int, target: float) -> bool:
    """Whether no whole m gives a bubble within a hair of ``target``."""
    m = (p - 1) * (1 - target) / (target * v)
    return abs(m - round(m)) > 1e-6


def drawn_microbatch_cases(count: int = 2, rng: random.Random | None = None) -> list[tuple]:
    """``count`` (p, v, target) drawn at random, off the boundary (:func:`_off_boundary`) and not
    fixed ones: 2 to 8 stages, 1 to 4 chunks per rank, a target of 2 % to 30 %."""
    rng, drawn = rng or random.Random(), []
    while len(drawn) < count:
        case = (rng.randint(2, 8), rng.randint(1, 4), rng.randint(2, 30) / 100)
        if _off_boundary(*case) and case not in MICROBATCH_CASES and case not in drawn:
            drawn.append(case)
    return drawn


def fewest_microbatches(p: int, v: int, target: float) -> int:
    """The fewest m >= 1 whose theoretical bubble with ``p`` stages and ``v`` chunks per rank is
    at most ``target``."""
    return next(m for m in range(1, 1_000_000)
                if theoretical_bubble_fraction(p, m, v) <= target)


def check_fewest_microbatches(candidate: Callable) -> None:
    """Run ``candidate(p, v, target)`` on :data:`MICROBATCH_CASES` and two drawn cases: the
    fewest micro-batches whose theoretical bubble is at most ``target``, exactly, with
    :func:`_bubble_references` refused while it runs."""
    if candidate is ...:
        say("fewest micro-batches: not answered yet. Define your function and pass it in.")
        return
    cases = list(MICROBATCH_CASES) + drawn_microbatch_cases()
    for p, v, target in cases:
        got = call_refusing(candidate, (p, v, target), refused=_bubble_references(),
                            called=tr("fewest micro-batches: your function ran the package's "
                                      "own bubble: use section 9's formula."),
                            failed=tr("fewest micro-batches: for p={p}, v={v}, target {target:g} "
                                      "your function failed: {error}"), p=p, v=v, target=target)
        got = number_from(got, tr("fewest micro-batches: for p={p}, v={v}, target {target:g} "
                                  "your function did not return a number.", p=p, v=v,
                                  target=target))
        want = fewest_microbatches(p, v, target)
        if got != want:
            raise AssertionError(tr(
                "fewest micro-batches: for p={p}, v={v}, target {target:g} your function gives "
                "{got:g}, {how}. Try again.", p=p, v=v, target=target, got=got,
                how=tr("too many: fewer already keep the bubble at or under the target")
                if got > want else tr("too few: the bubble is still above the target")))
    say("Correct: the fewest micro-batches in {count} cases, interleaved and not.",
        count=len(cases))


# Timelines no run recorded: stage -> [kind, micro-batch, start, end] (seconds), each with idle
# time in other places: 2 stages of GPipe, 3 stages of 1F1B with uneven passes and a late
# hand-off, 4 stages listed out of time order with zero-bubble "W" passes, a step not at t=0.
TIMELINES = (
    {0: [["F", 0, 0.0, 1.0], ["F", 1, 1.0, 2.0], ["B", 0, 4.5, 6.5], ["B", 1, 6.5, 8.5]],
     1: [["F", 0, 1.2, 2.2], ["F", 1, 2.2, 3.2], ["B", 0, 3.2, 4.4], ["B", 1, 4.4, 6.4]]},
    {0: [["F", 0, 0.0, 1.0], ["F", 1, 1.0, 2.0], ["F", 2, 2.0, 3.0], ["B", 0, 6.0, 8.0],
         ["F", 3, 8.0, 9.0], ["B", 1, 9.5, 11.5], ["B", 2, 12.0, 14.0], ["B", 3, 15.0, 17.0]],
     1: [["F", 0, 1.1, 2.1], ["F", 1, 2.1, 3.1], ["B", 0, 4.0, 6.0], ["F", 2, 6.0, 7.0],
         ["B", 1, 7.5, 9.5], ["F", 3, 9.5, 10.5], ["B", 2, 10.5, 12.5], ["B", 3, 13.0, 15.0]],
     2: [["F", 0, 2.2, 3.0], ["B", 0, 3.0, 4.0], ["F", 1, 4.0, 5.5], ["B", 1, 5.5, 7.5],
         ["F", 2, 7.5, 8.5], ["B", 2, 8.5, 10.5], ["F", 3, 10.6, 11.6], ["B", 3, 11.6, 13.0]]},
    {3: [["F", 0, 13.0, 13.5], ["B", 0, 13.5, 14.0], ["W", 0, 14.0, 14.5]],
     0: [["W", 0, 16.0, 16.5], ["F", 0, 10.0, 10.5], ["B", 0, 15.5, 16.0]],
     2: [["F", 0, 12.0, 12.5], ["B", 0, 14.5, 15.0], ["W", 0, 15.0, 15.5]],
     1: [["F", 0, 11.0, 11.5], ["B", 0, 15.0, 15.5], ["W", 0, 15.5, 16.0]]},
)


def timeline_bubble(events: dict) -> float:
    """The bubble of one step's timeline, as the ranks compute it (``measured_bubble_fraction``
    of each stage's first start, last end and busy seconds)."""
    return measured_bubble_fraction([(min(s for _, _, s, _ in evs), max(e for *_, e in evs),
                                      sum(e - s for _, _, s, e in evs))
                                     for evs in events.values()])


def check_measured_bubble(candidate, sweep: dict, microbatches: int = 8) -> None:
    """``candidate(events)`` (stage -> ``[kind, micro-batch, start, end]``) -> the step's bubble
    fraction, with the package's ``measured_bubble_fraction`` and ``free_handoff_bubble``
    refused: on :data:`TIMELINES`, which no run recorded, within 1e-6 (relative); then on the
    last step of ``sweep[microbatches]``, against the bubble its ranks recorded."""
    if candidate is ...:
        say("Measured bubble: not answered yet. Define your function and pass it in.")
        return
    refused = (measured_bubble_fraction, free_handoff_bubble, timeline_bubble)
    for number, events in enumerate(TIMELINES, start=1):
        got = call_refusing(candidate, ({k: [list(e) for e in v] for k, v in events.items()},),
                            refused=refused,
                            called=tr("Measured bubble: your function ran the package's own "
                                      "bubble: compute it from the intervals yourself."),
                            failed=tr("Measured bubble: on the checker's timeline {number} "
                                      "your function failed: {error}"), number=number)
        got = number_from(got, tr("Measured bubble: on the checker's timeline {number} your "
                                  "function did not return a number.", number=number))
        want = timeline_bubble(events)
        if abs(got - want) > 1e-6 * abs(want):
            raise AssertionError(tr(
                "Measured bubble: on the checker's timeline {number} ({stages} stages) your "
                "function gives {got:.4f}, which is not the idle share of stages x (last end - "
                "first start). Try again.", number=number, stages=len(events), got=got))
    run = sweep.get(microbatches)
    records = [r for r in (run.records if run is not None else []) if r.get("rank") == 0]
    if not records or records[-1].get("stage_events") is None:
        say("Correct on the checker's {count} timelines (section 5 has not measured its "
                 "m={m} run yet).", count=len(TIMELINES), m=microbatches)
        return
    last = records[-1]["step"]
    events = {r["rank"]: r["stage_events"] for r in run.records
              if r["step"] == last and r.get("stage_events") is not None}
    say("Correct on the checker's {count} timelines; on the m={m} run's last step your "
             "function gives {mine:.4f}, its ranks recorded {recorded:.4f}.",
             count=len(TIMELINES), m=microbatches, mine=float(candidate(events)),
             recorded=records[-1]["bubble_fraction"])


def reference_1f1b_order(stage: int, stages: int, microbatches: int) -> list[tuple[str, int]]:
    """The order stage ``stage`` of ``stages`` runs its forwards and backwards in the package's
    1F1B schedule with ``microbatches`` micro-batches."""
    return call_order("1f1b", stage, stages, microbatches)


def _as_order(ops) -> list[tuple]:
    """The candidate's order as a list of ``(kind, micro-batch)`` tuples (TypeError if not)."""
    return [tuple(op) for op in ops]


# the pipelines every check runs (fewer micro-batches than stages among them), and two drawn at
# random on each check: a table of answers made before the call cannot cover them
FIXED_PIPELINES = ((2, 4), (4, 8), (4, 2), (3, 5))


def drawn_pipelines(count: int = 2, rng: random.Random | None = None) -> list[tuple[int, int]]:
    """``count`` (stages, micro-batches) pairs drawn at random, none of them a fixed one: 2 to 7
    stages, 1 to 12 micro-batches."""
    rng, drawn = rng or random.Random(), []
    while len(drawn) < count:
        pair = (rng.randint(2, 7), rng.randint(1, 12))
        if pair not in FIXED_PIPELINES:
            drawn.append(pair)
    return drawn


def check_1f1b_order(candidate: Callable) -> None:
    """Run ``candidate(stage, stages, microbatches)`` (a list of ``("F", i)`` / ``("B", i)``)
    for every stage of four fixed pipelines, fewer micro-batches than stages among them, and two
    drawn at random on each check (:func:`drawn_pipelines`), against
    :func:`reference_1f1b_order`; say where the first difference is, not what the answer is."""
    if candidate is ...:
        say("1F1B order: not answered yet. Define your function and pass it in.")
        return
    cases = [(stages, m, stage) for stages, m in list(FIXED_PIPELINES) + drawn_pipelines()
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
    say("Correct: your order is 1F1B's for every stage of {n} pipelines of {stages} stages, "
        "also with fewer micro-batches than stages.", n=len({c[:2] for c in cases}),
        stages=", ".join(str(s) for s in sorted({c[0] for c in cases})))
