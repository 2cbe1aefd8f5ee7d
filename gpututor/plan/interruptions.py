"""How often to checkpoint: interruption rates, a job's mean time between interruptions, and the
interval that loses the least work (Young 1974, Daly 2006) [ref: young1974-interval]
[ref: daly2006-interval].

A synchronous job stops when any of its GPUs fails ("a single GPU failure may require a restart
of the entire job": Dubey et al. 2024, §3.3.4) [ref: dubey2024-synchronous]. A published rate
counts every interruption that stopped such a job, whatever its cause (Llama 3's 419 unexpected
ones: GPUs, software bugs, network, hosts) [ref: dubey2024-interruptions]. Spread over its
GPU-hours and taken as independent and at a constant rate per GPU, a job on ``n_gpus`` GPUs is
interrupted ``n_gpus`` times as often as one GPU's share:
``job MTBF = 1 / (n_gpus × interruptions per GPU-hour)``.

Over a long run, with a save every ``τ`` seconds of training that blocks training ``δ``
seconds, interruptions every ``M`` seconds on average, and ``R`` seconds to restart after each,
the share of the time that is lost is, to first order:

    saves:    δ / τ
    failures: (τ / 2 + R) / M     (a failure falls on average halfway through an interval)

and its minimum over ``τ`` is Young's ``τ = √(2 δ M)`` (:func:`young_interval`; ``R`` does
not move it) [ref: young1974-interval]. Daly 2006 adds higher-order terms
(:func:`daly_interval`) [ref: daly2006-interval]. Both assume ``δ``, ``R`` ≪ ``M``.

An asynchronous save blocks training only ``δ`` (its copy to CPU memory and the set-up around
it), but becomes usable only when its write of ``W`` seconds ends: a failure during the write
falls back one interval further, so each failure loses on average ``W`` more seconds, ``W / M``
of the job's time (``write_s``), which does not move the optimum. Below ``τ = W`` a save would
start before the last one is written: saves queue. Steps slowed beside the write are not in
these formulas: a caller adds the work they lose to ``δ`` (lesson 12 does: ``s·W/(1+s)`` for
steps ``1+s`` times slower through a write of ``W`` seconds of wall time).

- J. W. Young, "A first order approximation to the optimum checkpoint interval",
  Communications of the ACM 17(9), 530-531, 1974 [ref: young1974-interval].
- J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps",
  Future Generation Computer Systems 22(3), 303-312, 2006: his Figs. 3-5 give 117, 57 and
  9.1 minutes for M = 24 h, 6 h, 15 min with δ = 5 min, which :func:`daly_interval`
  reproduces (tests/plan/test_interruptions.py) [ref: daly2006-interval].
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
    gpu_share: float     # the share of the unexpected ones the source puts down to the GPUs
    source: str          # its key in gpututor/references/


# Dubey et al. 2024, "The Llama 3 Herd of Models", §3.3.4 and Table 5 [ref: dubey2024-interruptions]:
# "During a 54-day snapshot period of pre-training, we experienced a total of 466 job
# interruptions. Of these, 47 were planned [...]. The remaining 419 were unexpected
# interruptions", of every cause; "GPU issues are the largest category, accounting for 58.7% of
# all unexpected issues" (the sum of Table 5's GPU percentages; its GPU rows' counts add up to
# 268 of 419, 64 %: the faulty-GPU row prints 30.1 % beside 148, which is 35.3 % of 419).
# The GPU count is an assumption: the paper trains on "up to 16K" H100s (§3.3.1), 16,384 in two
# of Table 4's configurations, and does not say how many ran during the snapshot
# [ref: dubey2024-cluster] [ref: dubey2024-configs].
LLAMA3 = FailureRecord("Llama 3 405B pre-training", days=54, gpus=16_384, interruptions=466,
                       unexpected=419, gpu_share=0.587,
                       source="dubey2024-interruptions")   # [ref: dubey2024-interruptions]


def interruptions_per_gpu_hour(record: FailureRecord = LLAMA3, planned: bool = False) -> float:
    """Job interruptions per GPU-hour in ``record``: its unexpected ones, of every cause (with
    ``planned``, all), over its GPU-hours. Not GPU failures: the GPUs caused only
    ``record.gpu_share`` of them."""
    count = record.interruptions if planned else record.unexpected
    return count / (record.days * 24 * record.gpus)


def job_mtbf_s(n_gpus: int, per_gpu_hour: float) -> float:
    """Mean seconds between interruptions of a job on ``n_gpus`` GPUs, each GPU-hour bringing
    ``per_gpu_hour`` of them, independently (any one stops the job)."""
    checks.positive("n_gpus", n_gpus)
    checks.positive("per_gpu_hour", per_gpu_hour)
    return HOUR / (n_gpus * per_gpu_hour)


def young_interval(save_s: float, mtbf_s: float) -> float:
    """Young's interval between checkpoints, in seconds: ``√(2 · save_s · mtbf_s)``
    [ref: young1974-interval]."""
    checks.positive("save_s", save_s)
    checks.positive("mtbf_s", mtbf_s)
    return math.sqrt(2 * save_s * mtbf_s)


def daly_interval(save_s: float, mtbf_s: float) -> float:
    """Daly's higher-order interval, in seconds: with ``x = δ / (2M)``,
    ``√(2δM) · (1 + √x / 3 + x / 9) − δ`` for ``δ < 2M``, else ``M`` [ref: daly2006-interval]."""
    checks.positive("save_s", save_s)
    checks.positive("mtbf_s", mtbf_s)
    if save_s >= 2 * mtbf_s:
        return mtbf_s
    x = save_s / (2 * mtbf_s)
    return math.sqrt(2 * save_s * mtbf_s) * (1 + math.sqrt(x) / 3 + x / 9) - save_s


def lost_fraction(interval_s: float, save_s: float, mtbf_s: float, restart_s: float,
                  write_s: float = 0.0) -> float:
    """The share of a job's time lost, to first order: saving (``δ/τ``) plus, per failure, half
    an interval of work and the restart (``(τ/2 + R)/M``). ``write_s``: an asynchronous save's
    write (``W``), during which a failure falls back one more interval (``+ W/M``); it must not
    exceed the interval (saves would queue)."""
    checks.positive("interval_s", interval_s)
    checks.positive("mtbf_s", mtbf_s)
    checks.positive("save_s", save_s, allow_zero=True)
    checks.positive("restart_s", restart_s, allow_zero=True)
    checks.positive("write_s", write_s, allow_zero=True)
    if write_s > interval_s:   # each save would start before the last one is written
        raise checks.InvalidValue("write_s", write_s, "at most interval_s",
                                  why=f"for interval_s={interval_s:g} (saves would queue)")
    return save_s / interval_s + (interval_s / 2 + write_s + restart_s) / mtbf_s


def lost_gpu_hours_per_day(interval_s: float, save_s: float, mtbf_s: float, n_gpus: int,
                           restart_s: float, write_s: float = 0.0) -> float:
    """GPU-hours a job on ``n_gpus`` GPUs loses per day (:func:`lost_fraction` of its
    ``n_gpus × 24`` GPU-hours)."""
    checks.positive("n_gpus", n_gpus)
    return n_gpus * DAY / HOUR * lost_fraction(interval_s, save_s, mtbf_s, restart_s, write_s)
