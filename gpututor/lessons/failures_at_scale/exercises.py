"""Lesson 12's exercise checkers: each takes the learner's answer and derives what it expects
from the formulas of :mod:`gpututor.plan.interruptions`, so the notebook shows only the call. ``...``
means "not answered yet".

- :func:`check_young_interval`: the learner's Young's checkpoint interval for a job (GPUs,
  interruptions per GPU-hour, what a save blocks and how long it runs), run on jobs the checker
  picks with the package's interval formulas refused.
- :func:`check_lost_gpu_hours`: the learner's GPU-hours lost per day, run against
  :func:`gpututor.plan.interruptions.lost_gpu_hours_per_day` on inputs the learner does not choose.
"""
from __future__ import annotations

import math
from typing import Callable

from ...i18n import say, tr
from ...plan import interruptions
from ...plan.interruptions import (interruptions_per_gpu_hour, job_mtbf_s,
                                  lost_gpu_hours_per_day, young_interval)
from ..common.code_exercise import call_refusing, number_from

# exercise 1's jobs (n_gpus, per-GPU-hour rate, blocked_s, save_s): the question's (2,048 GPUs at
# Llama 3's rate, asynchronous saves blocking 45 s of 300 s), a synchronous one (blocked = save),
# a small job at a higher rate, a large one; none where two tested mistakes coincide
YOUNG_JOBS = ((2048, None, 45.0, 300.0), (16_384, None, 120.0, 120.0),
              (64, 1e-3, 10.0, 40.0), (8192, 5e-5, 30.0, 600.0))

# (interval_s, save_s, mtbf_s, n_gpus, restart_s): a 16k-GPU job saving every half hour, one
# with no restart time, a small one, one that saves rarely; none where two mistakes coincide
CASES = ((1800.0, 60.0, 11_131.0, 16_384, 600.0), (3600.0, 10.0, 360_000.0, 512, 0.0),
         (600.0, 5.0, 50_000.0, 8, 1200.0), (7200.0, 120.0, 900_000.0, 64, 300.0))


def check_young_interval(candidate: Callable) -> None:
    """Run ``candidate(n_gpus, per_gpu_hour, blocked_s, save_s)`` on :data:`YOUNG_JOBS` (``None``:
    Llama 3's rate) against Young's interval, in seconds, from the job's MTBF and what a save
    blocks; ``young_interval``, ``daly_interval`` and ``job_mtbf_s`` refuse while it runs. Within
    1e-6 relative."""
    if candidate is ...:
        say("Young's interval: not answered yet. Define your function and pass it in.")
        return
    if not callable(candidate):
        raise AssertionError(tr("Young's interval: pass your function my_young itself, not "
                                "{got!r}.", got=candidate))
    for n_gpus, rate, blocked, save in YOUNG_JOBS:
        rate = interruptions_per_gpu_hour() if rate is None else rate
        expected = young_interval(blocked, job_mtbf_s(n_gpus, rate))
        where = tr("{n:,} GPUs, {rate:.3g} interruptions per GPU-hour, saves blocking {blocked:g} s "
                   "of {save:g} s", n=n_gpus, rate=rate, blocked=blocked, save=save)
        got = call_refusing(candidate, (n_gpus, rate, blocked, save),
                            refused=(young_interval, interruptions.daly_interval, job_mtbf_s),
                            called=tr("Young's interval: your function called the package's "
                                      "formula (gpututor.plan.interruptions): write it yourself."))
        number = number_from(got, tr("Young's interval: for {where} your function returned "
                                     "{got!r} (a {kind}), not a number.", where=where, got=got,
                                     kind=type(got).__name__))
        if not math.isclose(number, expected, rel_tol=1e-6):
            raise AssertionError(tr(
                "Young's interval: for {where} yours gives {got:,.4g} s, not the formula's. "
                "What is the job's MTBF in seconds, and which part of a save does training lose?",
                where=where, got=number))
    say("Correct: your function gives Young's interval on {n} jobs.", n=len(YOUNG_JOBS))


def check_lost_gpu_hours(candidate: Callable) -> None:
    """Run ``candidate(interval_s, save_s, mtbf_s, n_gpus, restart_s)`` on :data:`CASES`
    against :func:`~gpututor.plan.interruptions.lost_gpu_hours_per_day`, which refuses while the
    learner's function runs."""
    if candidate is ...:
        say("GPU-hours lost per day: not answered yet. Define your function and pass it in.")
        return
    for case in CASES:
        expected = lost_gpu_hours_per_day(*case)
        got = call_refusing(candidate, case,
                            refused=(lost_gpu_hours_per_day, interruptions.lost_fraction),
                            called=tr("GPU-hours lost per day: your function called the "
                                      "package's formula (gpututor.plan.interruptions): write it "
                                      "yourself."))
        interval, save, mtbf, n, restart = case
        where = tr("interval {interval:g} s, save {save:g} s, MTBF {mtbf:,.0f} s, {n:,} GPUs, "
                   "restart {restart:g} s", interval=interval, save=save, mtbf=mtbf, n=n,
                   restart=restart)
        number = number_from(got, tr("GPU-hours lost per day: for {where} your function returned "
                                     "{got!r} (a {kind}), not a number.", where=where,
                                     got=got, kind=type(got).__name__))
        if not math.isclose(number, expected, rel_tol=1e-6):
            raise AssertionError(tr(
                "GPU-hours lost per day: for {where} yours gives {got:,.4g}, not the formula's "
                "value. Count the three costs: the saves (save time per interval), half an "
                "interval of work and the restart per failure; then all the GPUs for 24 hours.",
                where=where, got=number))
    say("Correct: your function gives the formula's GPU-hours lost per day on {n} jobs.",
             n=len(CASES))
