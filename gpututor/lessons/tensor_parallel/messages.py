"""Lesson 04: the messages a tensor-parallel and a DDP run sent in their steady step.

Read from the runs' records: how many all-reduces and bytes, and how many of DDP's bytes were
launched before backward's last gradient existed (the DDP hook's ``ddp_buckets`` records,
``gpututor/parallel/data_parallel/ddp.py``): only those can overlap backward.
"""
from __future__ import annotations

from ...runtime.summary import steady_steps


def last_steady_step(spec, records: list[dict]) -> int:
    """The last step the run's summary takes its figures over (the last step recorded if the run
    had no steady step)."""
    steady = steady_steps(spec, records)
    return steady[-1] if steady else max(r["step"] for r in records)


def ddp_buckets(spec, records: list[dict], rank: int = 0) -> dict:
    """Rank ``rank``'s DDP buckets in the run's last steady step: ``step``, ``count``, ``bytes``,
    ``early_bytes`` (launched before backward's last gradient: they can overlap it) and
    ``early_share``."""
    step = last_steady_step(spec, records)
    buckets = next(r["ddp_buckets"] for r in records
                   if r["step"] == step and r.get("rank") == rank and r.get("ddp_buckets"))
    total = sum(b["bytes"] for b in buckets)
    early = sum(b["bytes"] for b in buckets if b["before_last_grad_s"] > 0.0)
    return {"step": step, "count": len(buckets), "bytes": total, "early_bytes": early,
            "early_share": early / total}


def tp_allreduces(summary: dict, activation_bytes: int) -> dict:
    """A tensor-parallel run's all-reduces per step: ``count`` (the bytes it counted over the
    bytes of one all-reduce of the activations, ``activation_bytes``) and ``bytes``."""
    return {"count": round(summary["comm_bytes_per_step"] / activation_bytes),
            "bytes": summary["comm_bytes_per_step"]}
