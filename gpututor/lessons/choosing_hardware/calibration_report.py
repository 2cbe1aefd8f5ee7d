"""What section 1 of lesson 08 shows of a calibration: a verdict chosen from its errors (the
10 % memory target met or not, how far the step times are off), with the machine's fitted
figures one click away, and the table of every run, predicted beside measured.

The numbers come from :mod:`gpututor.lessons.choosing_hardware.calibrate`
(``calibration_rows``, ``calibration_notes``, ``summary_errors``); nothing here measures.
"""
from __future__ import annotations

import torch

from ...i18n import show_table, show_verdict, tr
from .calibrate import Calibration, calibration_notes, calibration_rows, summary_errors

# the target the lesson states for the memory prediction (tests/plan/test_plan.py holds it)
MEMORY_TARGET = 0.10


def device_line(device: str, ranks: int) -> str:
    """What the calibration's collectives were, as the time model counts them: blocking gloo on
    a CPU (all exposed), or NCCL on GPUs (which overlaps data parallel's buckets with backward,
    so the model over-counts there)."""
    if torch.device(device).type == "cpu":
        return tr("calibrated on this machine's CPU: its {ranks} ranks share its cores, caches and "
                  "memory bandwidth, and gloo runs each collective blocking, as the time model "
                  "counts them: all exposed", ranks=ranks)
    return tr("calibrated on {ranks} GPUs over NCCL: the time model counts every collective as "
              "exposed, while NCCL overlaps data parallel's buckets with backward, so for data "
              "parallel the exposed-collective term over-counts by what overlapped (the measured "
              "step may still be above the prediction, for the reasons below)", ranks=ranks)


def calibration_verdict(errors: dict, runs: int, predicted: int) -> tuple[str, str]:
    """``(headline, tone)`` from :func:`~.calibrate.summary_errors`'s ``errors`` over ``runs``
    runs, ``predicted`` of them predicted (not fitted): whether the largest peak-memory error is
    within :data:`MEMORY_TARGET` (tone "good") or not ("bad"; "mixed" where no peak was
    measured), then the step-time errors where there are any."""
    peak, median, largest = (errors["max_peak_error"], errors["median_step_error"],
                             errors["max_step_error"])
    step = "" if median is None else tr(
        "; step time off by {median:.0%} at the median, {largest:.0%} at most over {runs} "
        "predicted runs", median=median, largest=largest, runs=predicted)
    if peak is None:
        return tr("Peak memory: not measured") + step, "mixed"
    if peak <= MEMORY_TARGET:
        return tr("Peak memory predicted within {error:.1%} on all {runs} runs, inside the "
                  "{target:.0%} target", error=peak, runs=runs, target=MEMORY_TARGET) + step, "good"
    return tr("Peak memory predicted with errors up to {error:.1%} over {runs} runs, outside the "
              "{target:.0%} target", error=peak, runs=runs, target=MEMORY_TARGET) + step, "bad"


def calibration_details(cal: Calibration, seconds: float | None = None) -> list[str]:
    """The lines behind the verdict: the machine and the fitted figures, how its collectives
    ran, the general formula's largest error, what was skipped, and how long it took."""
    notes = calibration_notes(cal)
    formula = [abs(r["formula_error"]) for r in cal.rows
               if r["formula_error"] is not None and r["formula_error"] == r["formula_error"]]
    lines = [notes[0], device_line(cal.machine.device, cal.machine.world_size),
             tr("peak memory by the general formula: largest error {error:.1%}",
                error=max(formula)) if formula else tr("no formula error measured")]
    lines += notes[1:]
    if seconds is not None:
        lines.append(tr("calibrate took {seconds:.0f} s here", seconds=seconds))
    return lines


def show_calibration(cal: Calibration, seconds: float | None = None) -> None:
    """The verdict (details: :func:`calibration_details`), then the table of every run."""
    predicted = sum(not r["fitted"] for r in cal.rows)
    headline, tone = calibration_verdict(summary_errors(cal), len(cal.rows), predicted)
    show_verdict(headline, "\n".join(calibration_details(cal, seconds)), tone)
    show_table(*calibration_rows(cal))
