"""Lesson 12, section 4's two measurements besides the saves themselves.

- :func:`write_rate`: how fast this disk takes a larger write than the lesson's saves (files of
  up to 256 MB, written at once by as many writers as the saves had ranks, each synced, then
  deleted). The saves of a few MB give a fixed cost and a cost per byte; a large job's 4 GB per
  GPU is priced at this rate instead of that fit's slope.
- :func:`steps_beside_writes`: in one asynchronous run, its steady steps that ran while a save
  was being written beside them against those that ran with none: how much slower the write
  made a step, measured in the same run.
"""
from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import threading
import time

from ...formulas import MB
from ...runtime.summary import steady_steps

CHUNK = int(8 * MB)           # bytes written per call
WRITE_CAP = 256 * MB            # all writers together write at most this much (a few seconds)


def write_rate(folder: str, writers: int, per_writer: float, cap: float = WRITE_CAP) -> dict:
    """Write ``writers`` files at once into ``folder`` (on the disk the checkpoints use), each
    ``per_writer`` bytes but all of them at most ``cap`` and a quarter of the free space, each
    synced (``os.fsync``, as DCP's writer does) and then deleted. Returns the bytes per writer,
    the wall seconds and the rate one writer got (``bytes_per_s``: its bytes over the wall time)."""
    free = shutil.disk_usage(folder).free
    size = int(min(per_writer, cap / writers, free / 4 / writers)) // CHUNK * CHUNK
    if size < CHUNK:
        raise OSError(f"{folder} has {free / MB:.0f} MB free: too little to time a write")
    block = os.urandom(CHUNK)   # not zeros: nothing on the way may compress or skip them
    scratch = tempfile.mkdtemp(prefix="write-rate-", dir=folder)
    errors = []

    def write(k: int) -> None:
        try:
            with open(os.path.join(scratch, f"writer{k}"), "wb") as f:
                for _ in range(size // CHUNK):
                    f.write(block)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(writers)]
    try:
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - start
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if errors:
        raise errors[0]
    return {"writers": writers, "bytes": size, "seconds": seconds, "bytes_per_s": size / seconds}


def _write_windows(records: list[dict]) -> list[tuple[float, float]]:
    """``(start, end)`` on the run's clock of every asynchronous write: from the moment training
    went on after starting the save (its record's ``time``) until at most the save's whole
    seconds later (the save's clock started inside the blocked time, so the write ended at or
    before that)."""
    began = {(r["rank"], r["checkpoint_step"]): r["time"] for r in records
             if r.get("checkpoint_step") is not None}
    return [(began[(r["rank"], w["step"])], began[(r["rank"], w["step"])] + w["save_s"])
            for r in records for w in r.get("checkpoint_written") or []
            if (r["rank"], w["step"]) in began and w.get("save_s") is not None]


def _covered(start: float, end: float, windows: list[tuple[float, float]]) -> float:
    """Seconds of ``[start, end]`` that some window covers (overlapping windows count once)."""
    covered, reach = 0.0, start
    for w_start, w_end in sorted(windows):
        lo, hi = max(w_start, reach), min(w_end, end)
        if hi > lo:
            covered, reach = covered + hi - lo, hi
    return covered


def _middle_half(values) -> tuple[float, float] | None:
    """The lower and upper quartile of ``values`` (one value: itself twice; none: None)."""
    values = sorted(values)
    if len(values) < 2:
        return (values[0], values[0]) if values else None
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def steps_beside_writes(run) -> dict:
    """A finished asynchronous run's steady steps (``run.spec``, ``run.records``) in two groups:
    ``beside``, those at least half of which some rank's write covered (on that rank's clock of
    the step), and ``clean``, those no write touched on any rank; steps a write covered for less
    than half are left out (``partial``): a step's end is estimated from its record, so a short
    overlap may be an artefact. Each step's time is its slowest rank's, as in the summary.
    ``slowdown``: the median ``beside`` step over the median ``clean`` one, less 1 (None where a
    group is empty); ``*_quartiles``: each group's middle half; ``counted``: the slowdown where
    the median step beside a write is slower than the upper quartile of the steps with none,
    else 0 (within step-to-step variation), None where not measured."""
    records = run.records
    windows = _write_windows(records)
    by_step = {}
    for r in records:
        blocked = r.get("checkpoint_blocked_s") or 0.0
        end = r["time"] - blocked   # the record is sent after the save's blocked time
        by_step.setdefault(r["step"], []).append((end - r["step_time_s"], end, r["step_time_s"]))
    beside, clean, partial = {}, {}, []
    for step in steady_steps(run.spec, records):
        spans = by_step[step]
        share = max(_covered(start, end, windows) / max(end - start, 1e-12)
                    for start, end, _ in spans)
        slowest = max(t for _, _, t in spans)
        if share >= 0.5:
            beside[step] = slowest
        elif share == 0.0:
            clean[step] = slowest
        else:
            partial.append(step)
    median = lambda group: statistics.median(group.values()) if group else None
    b, c = median(beside), median(clean)
    slowdown = None if b is None or c is None else b / c - 1
    clean_q = _middle_half(clean.values())
    counted = None if slowdown is None else slowdown if b > clean_q[1] else 0.0
    return {"beside": sorted(beside), "clean": sorted(clean), "partial": partial,
            "beside_s": b, "clean_s": c, "beside_quartiles": _middle_half(beside.values()),
            "clean_quartiles": clean_q, "slowdown": slowdown, "counted": counted}
