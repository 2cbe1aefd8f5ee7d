"""The step a lesson reads from a run's timeline (``RunSpec(timeline=True)``): the last one that
recorded spans, and every rank's record of it."""
from __future__ import annotations


def last_timed_step(records: list[dict], step: int | None = None
                    ) -> tuple[int, list[dict]] | None:
    """``step`` (default: the last step whose records carry a ``timeline``) and its records
    with a timeline, in rank order; None when no record has one."""
    timed = [r for r in records if r.get("timeline")]
    if not timed:
        return None
    step = max(r["step"] for r in timed) if step is None else step
    return step, sorted((r for r in timed if r["step"] == step), key=lambda r: r["rank"])
