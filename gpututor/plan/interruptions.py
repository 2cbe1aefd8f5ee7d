"""How often to checkpoint: failure rates, a job's mean time between failures, and the interval
that loses the least work (Young 1974, Daly 2006).

A synchronous job stops when any of its GPUs fails ("a single GPU failure may require a restart
of the entire job": Dubey et al. 2024, §3.3.4), so with failures independent and at a constant
rate per GPU, the job fails ``n_gpus`` times as often as one GPU:
``job MTBF = 1 / (n_gpus × failures per GPU-hour)``.

Over a long run, with a save every ``τ`` seconds of training that blocks training ``δ``
seconds, failures every ``M`` seconds on average, and ``R`` seconds to restart after each, the
share of the time that is lost is, to first order (Young 1974):

    saves:    δ / τ
    failures: (τ / 2 + R) / M     (a failure falls on average halfway through an interval)

and its minimum over ``τ`` is at ``τ = √(2 δ M)`` (:func:`young_interval`). Daly 2006 adds
higher-order terms (:func:`daly_interval`). Both assume ``δ``, ``R`` ≪ ``M``.

- J. W. Young, "A first order approximation to the optimum checkpoint interval",
  Communications of the ACM 17(9), 530-531, 1974.
- J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps",
  Future Generation Computer Systems 22(3), 303-312, 2006 (eq. for τ_opt; his Figs. 3-5 give
  117, 57 and 9.1 minutes for M = 24 h, 6 h, 15 min with δ = 5 min: tests/plan/test_failures.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .. import checks
from ..formulas import DAY, HOUR


@dataclass(frozen=True)
class FailureRecord:
    """Interruptions a training run reported over a period, on a number of GPUs."""

    name: str
    days: float
    gpus: int
    interruptions: int   # all of them, planned ones included
    unexpected: int      # the ones a checkpoint must cover: nobody saw them coming
    source: str


# Dubey et al. 2024, "The Llama 3 Herd of Models", §3.3.4 (Table 5 classifies the 419): "During
# a 54-day snapshot period of pre-training, we experienced a total of 466 job interruptions. Of
# these, 47 were planned [...]. The remaining 419 were unexpected interruptions". The GPU count
# is an assumption: the paper trains on "up to 16K" H100s (§3.3.1), 16,384 in Table 4's
# configurations, and does not say how many ran during the snapshot.
LLAMA3 = FailureRecord("Llama 3 405B pre-training", days=54, gpus=16_384, interruptions=466,
                       unexpected=419,
                       source="Dubey et al. 2024, 'The Llama 3 Herd of Models', §3.3.4 and "
                              "Table 5 (GPU count: Table 4's 16,384, assumed for the snapshot)")


def failures_per_gpu_hour(record: FailureRecord = LLAMA3, planned: bool = False) -> float:
    """Failures per GPU-hour in ``record``: its unexpected interruptions (with ``planned``, all)
    over its GPU-hours."""
    count = record.interruptions if planned else record.unexpected
    return count / (record.days * 24 * record.gpus)


def job_mtbf_s(n_gpus: int, per_gpu_hour: float) -> float:
    """Mean seconds between failures of a job on ``n_gpus`` GPUs, each failing ``per_gpu_hour``
    times an hour, independently (any one stops the job)."""
    checks.positive("n_gpus", n_gpus)
    checks.positive("per_gpu_hour", per_gpu_hour)
    return HOUR / (n_gpus * per_gpu_hour)


def young_interval(save_s: float, mtbf_s: float) -> float:
    """Young's interval between checkpoints, in seconds: ``√(2 · save_s · mtbf_s)``."""
    checks.positive("save_s", save_s)
    checks.positive("mtbf_s", mtbf_s)
    return math.sqrt(2 * save_s * mtbf_s)


def daly_interval(save_s: float, mtbf_s: float) -> float:
    """Daly's higher-order interval, in seconds: with ``x = δ / (2M)``,
    ``√(2δM) · (1 + √x / 3 + x / 9) − δ`` for ``δ < 2M``, else ``M``."""
    checks.positive("save_s", save_s)
    checks.positive("mtbf_s", mtbf_s)
    if save_s >= 2 * mtbf_s:
        return mtbf_s
    x = save_s / (2 * mtbf_s)
    return math.sqrt(2 * save_s * mtbf_s) * (1 + math.sqrt(x) / 3 + x / 9) - save_s


def lost_fraction(interval_s: float, save_s: float, mtbf_s: float, restart_s: float) -> float:
    """The share of a job's time lost, to first order: saving (``δ/τ``) plus, per failure, half
    an interval of work and the restart (``(τ/2 + R)/M``)."""
    checks.positive("interval_s", interval_s)
    checks.positive("mtbf_s", mtbf_s)
    checks.positive("save_s", save_s, allow_zero=True)
    checks.positive("restart_s", restart_s, allow_zero=True)
    return save_s / interval_s + (interval_s / 2 + restart_s) / mtbf_s


def lost_gpu_hours_per_day(interval_s: float, save_s: float, mtbf_s: float, n_gpus: int,
                           restart_s: float) -> float:
    """GPU-hours a job on ``n_gpus`` GPUs loses per day (:func:`lost_fraction` of its
    ``n_gpus × 24`` GPU-hours)."""
    checks.positive("n_gpus", n_gpus)
    return n_gpus * DAY / HOUR * lost_fraction(interval_s, save_s, mtbf_s, restart_s)
