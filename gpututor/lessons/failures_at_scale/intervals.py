"""Lesson 12's checkpoint intervals at scale: a save time measured here, scaled to a large job's
state per GPU (a fixed cost and a cost per byte, fitted to saves of two sizes), and for one job
the intervals and the work lost (the formulas of :mod:`gpututor.plan.interruptions`), as a row
the notebook prints. The notebook imports these, not the formulas its exercises ask the learner
to write. It also gives a job's MTBF for the notebook (:func:`mtbf_hours`).
"""
from __future__ import annotations

from ...formulas import HOUR
from ...plan.interruptions import daly_interval, job_mtbf_s, lost_gpu_hours_per_day, young_interval

# δ/M below which the save counts as small against the MTBF: there Daly's interval is within
# 5 % of Young's (their ratio is 1 − (2/3)·√(δ/2M) + δ/(18M), 0.953 at δ/M = 0.01)
SMALL = 0.01


def save_cost_fit(small: tuple[float, float], large: tuple[float, float]) -> dict:
    """A save's cost as a fixed part plus a part per byte, from two saves ``(bytes, seconds)``
    of different sizes: ``per_byte_s`` the slope between them (None where the larger save was
    not slower: the per-byte part is then lost in the noise), ``fixed_s`` what is left of the
    larger save, and ``fixed_share`` its share of the larger save."""
    (b1, t1), (b2, t2) = sorted((small, large))
    if b2 <= b1:
        raise ValueError(f"two saves of different sizes are needed, not {b1:g} and {b2:g} bytes")
    if t2 <= t1:
        return {"fixed_s": t2, "per_byte_s": None, "fixed_share": None, "bytes": b2, "seconds": t2}
    per_byte = (t2 - t1) / (b2 - b1)
    fixed = max(t2 - per_byte * b2, 0.0)
    return {"fixed_s": fixed, "per_byte_s": per_byte, "fixed_share": fixed / t2, "bytes": b2,
            "seconds": t2}


def at_scale(fit: dict, state_bytes: float) -> float:
    """Seconds to save ``state_bytes`` by :func:`save_cost_fit`'s ``fit``: its fixed part plus
    its per-byte part times ``state_bytes``. Where the fit found no per-byte part, the whole
    larger save is taken as per byte (its rate: an upper bound)."""
    if fit["per_byte_s"] is None:
        return state_bytes * fit["seconds"] / fit["bytes"]
    return fit["fixed_s"] + fit["per_byte_s"] * state_bytes


def async_at_scale(sync_at_scale_s: float, sync_s: float, blocked_s: float, save_s: float,
                   step_async_s: float, step_sync_s: float) -> dict:
    """An asynchronous save at scale, from one measured beside a synchronous save of the same
    state: its blocked time (``blocked_s``) and its whole save (``save_s``, the write ``W``)
    keep their ratios to the synchronous save (``sync_s``, measured; ``sync_at_scale_s``, that
    save at scale: an assumption), and the steps beside the write are slower by ``slowdown``,
    the median step of the asynchronous run over the synchronous one's, less 1 (0 where it was
    not slower). ``W`` is wall time: the steps beside it run at ``1/(1+s)`` of their speed, so
    the work lost in it is ``W − W/(1+s) = s·W/(1+s)``, and training loses
    ``delta_s = blocked + s·W/(1+s)`` per save."""
    blocked = sync_at_scale_s * blocked_s / sync_s
    write = sync_at_scale_s * save_s / sync_s
    slowdown = max(step_async_s / step_sync_s - 1, 0.0)
    slowed = slowdown * write / (1 + slowdown)
    return {"blocked_s": blocked, "write_s": write, "slowdown": slowdown,
            "slowed_s": slowed, "delta_s": blocked + slowed}


def mtbf_hours(n_gpus: int, per_gpu_hour: float) -> float:
    """Mean hours between interruptions of a job on ``n_gpus`` GPUs (``job_mtbf_s`` in hours)."""
    return job_mtbf_s(n_gpus, per_gpu_hour) / HOUR


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
