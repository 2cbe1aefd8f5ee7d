"""DDP's buckets as one run made them: read from the records the DDP hook writes
(``ddp_buckets``: each bucket's bytes, in launch order, and how long before backward's last
gradient it was launched, ``gpututor/parallel/data_parallel/ddp.py``)."""
from __future__ import annotations

from ...i18n import ntr, tr


def bucket_steps(records: list[dict], rank: int = 0) -> dict[int, list[dict]]:
    """Step -> that step's buckets on ``rank``, in the order they were launched."""
    return {r["step"]: r["ddp_buckets"] for r in records
            if r.get("rank") == rank and r.get("ddp_buckets")}


def late_share(buckets: list[dict]) -> float:
    """The share of a step's bytes in buckets launched only once backward's last gradient
    existed: they cannot overlap backward, whatever the link."""
    total = sum(b["bytes"] for b in buckets)
    return sum(b["bytes"] for b in buckets if b["before_last_grad_s"] <= 0.0) / total


def describe(records: list[dict]) -> list[str]:
    """Lines, in the notebook's language, on rank 0's buckets: the first step's, and the last
    step's (the steady layout) with each bucket's lead over the last gradient."""
    steps = bucket_steps(records)
    if not steps:
        return [tr("this run recorded no DDP buckets (one rank, or not a DDP run)")]
    lines = []
    for step in dict.fromkeys((min(steps), max(steps))):
        buckets = steps[step]
        sizes = ", ".join(tr("{mb:.2f} MB launched {ms:.1f} ms before the last gradient",
                             mb=b["bytes"] / 1e6, ms=b["before_last_grad_s"] * 1e3)
                          for b in buckets)
        lines.append(ntr("step {step}: {n} bucket, in launch order: {sizes}; {late:.0%} of "
                         "the bytes launched only after the last gradient (no overlap with "
                         "backward)",
                         "step {step}: {n} buckets, in launch order: {sizes}; {late:.0%} of "
                         "the bytes launched only after the last gradient (no overlap with "
                         "backward)", len(buckets), step=step, sizes=sizes,
                         late=late_share(buckets)))
    return lines
