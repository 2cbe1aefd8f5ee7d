"""Lesson 12's exercise checkers: each takes the learner's answer and derives what it expects
from the formulas of :mod:`gpututor.plan.interruptions`, so the notebook shows only the call. ``...``
means "not answered yet".

- :func:`check_young_interval`: Young's checkpoint interval for a job the exercise describes
  (2,048 GPUs at Llama 3's interruption rate per GPU, a save that blocks training 45 s).
- :func:`check_lost_gpu_hours`: the learner's GPU-hours lost per day, run against
  :func:`gpututor.plan.interruptions.lost_gpu_hours_per_day` on inputs the learner does not choose.
"""
from __future__ import annotations

import math
from typing import Callable

from ...i18n import tr
from ...plan import interruptions
from ...plan.interruptions import (interruptions_per_gpu_hour, job_mtbf_s,
                                  lost_gpu_hours_per_day, young_interval)
from ..common.code_exercise import call_refusing, number_from
from ..common.exercises import check_answer

YOUNG_GPUS, YOUNG_SAVE_S = 2048, 45.0   # exercise 1's job

# (interval_s, save_s, mtbf_s, n_gpus, restart_s): a 16k-GPU job saving every half hour, one
# with no restart time, a small one, one that saves rarely; none where two mistakes coincide
CASES = ((1800.0, 60.0, 11_131.0, 16_384, 600.0), (3600.0, 10.0, 360_000.0, 512, 0.0),
         (600.0, 5.0, 50_000.0, 8, 1200.0), (7200.0, 120.0, 900_000.0, 64, 300.0))


def check_young_interval(answer) -> None:
    """Young's interval, in seconds, for :data:`YOUNG_GPUS` GPUs interrupted at Llama 3's rate
    per GPU-hour (its unexpected interruptions, of every cause) with saves that block training
    :data:`YOUNG_SAVE_S` seconds; within 2 % (Daly's interval is within that here too)."""
    mtbf = job_mtbf_s(YOUNG_GPUS, interruptions_per_gpu_hour())
    check_answer(answer, young_interval(YOUNG_SAVE_S, mtbf),
                 "Young's interval for 2,048 GPUs and saves that block 45 s, in seconds", rel_tol=0.02,
                 source="formula")


def check_lost_gpu_hours(candidate: Callable) -> None:
    """Run ``candidate(interval_s, save_s, mtbf_s, n_gpus, restart_s)`` on :data:`CASES`
    against :func:`~gpututor.plan.interruptions.lost_gpu_hours_per_day`, which refuses while the
    learner's function runs."""
    if candidate is ...:
        print(tr("GPU-hours lost per day: not answered yet. Define your function and pass it in."))
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
    print(tr("Correct: your function gives the formula's GPU-hours lost per day on {n} jobs.",
             n=len(CASES)))
