"""Lesson 12's checkpoint intervals at scale: a save time measured here, scaled to a large job's
state per GPU, and for one job the intervals and the work lost (the formulas of
:mod:`gpututor.plan.interruptions`), as a row the notebook prints. The notebook imports these,
not the formulas its exercises ask the learner to write.
"""
from __future__ import annotations

from ...formulas import HOUR
from ...plan.interruptions import daly_interval, job_mtbf_s, lost_gpu_hours_per_day, young_interval

# δ/M below which the save counts as small against the MTBF: there Daly's interval is within
# 5 % of Young's (their ratio is 1 − (2/3)·√(δ/2M) + δ/(18M), 0.953 at δ/M = 0.01)
SMALL = 0.01


def at_scale(seconds: float, bytes_written: float, state_bytes: float) -> float:
    """Seconds to save ``state_bytes`` at the rate a rank saved ``bytes_written`` bytes in
    ``seconds`` (the rate measured here, assumed to hold at that size)."""
    return state_bytes * seconds / bytes_written


def interval_row(n_gpus: int, per_gpu_hour: float, save_s: float, restart_s: float,
                 write_s: float = 0.0) -> dict:
    """One job on ``n_gpus`` GPUs interrupted ``per_gpu_hour`` times per GPU-hour, whose saves
    block training ``save_s`` seconds (``δ``) and, when asynchronous, are written in ``write_s``
    (``W``). Its MTBF (``M``), ``δ/M`` and whether that is small (:data:`SMALL`), Young's and
    Daly's intervals, the interval used (Young's, or ``W`` where Young's is shorter: saves
    would queue), the GPU-hours lost per day at it and their share of the job's, the share a
    failure during the write adds (``W/M``), and the GPU-hours lost when saving every hour
    (None where an hour is shorter than the write)."""
    mtbf = job_mtbf_s(n_gpus, per_gpu_hour)
    young = young_interval(save_s, mtbf)
    interval = max(young, write_s)

    def lost(every: float):
        return lost_gpu_hours_per_day(every, save_s, mtbf, n_gpus, restart_s, write_s)

    at_best = lost(interval)
    return {"n_gpus": n_gpus, "mtbf_s": mtbf, "save_s": save_s, "save_over_mtbf": save_s / mtbf,
            "small": save_s / mtbf < SMALL, "young_s": young,
            "daly_s": daly_interval(save_s, mtbf), "write_s": write_s, "queues": young < write_s,
            "interval_s": interval, "lost": at_best, "share": at_best / (24 * n_gpus),
            "write_share": write_s / mtbf, "hourly": lost(HOUR) if HOUR >= write_s else None}
