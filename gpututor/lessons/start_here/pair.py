"""Lesson 00's independent pair: two 1-rank runs that train at the same time and never talk.

Started one after the other, the first of two runs could train alone while the second is still
starting, and the last one alone after the first has ended: both would run faster than two
runs that share the machine all along, and their sum would overstate what two ranks can reach.
So each run starts behind a barrier: once its process has started (torch imported, its process
group of one made) it marks itself ready in a folder the two share and trains only when both are
ready (:class:`TrainBehindBarrier`). Past the barrier each still builds its model before its
first step, and one may be quicker at it, so only the steady steps that ran while both were
training count (:func:`while_both_trained`): from the moment the later of the two started its
first step until the earlier one ended its last.
"""
from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass

from ...runtime.summary import steady_steps, summarize

POLL_S = 0.001   # how often a waiting run looks for the other's mark: the barrier's resolution


def wait_at_barrier(folder: str, name: str, names: tuple[str, ...], timeout_s: float) -> dict:
    """Mark ``name`` ready in ``folder`` and wait until every one of ``names`` is; return when
    this one was ready and when it went on (``time.time()`` seconds). Raises TimeoutError if
    the others are not ready within ``timeout_s``."""
    ready_at = time.time()
    with open(os.path.join(folder, f"ready-{name}"), "w") as f:
        f.write(repr(ready_at))
    deadline = time.monotonic() + timeout_s
    while not all(os.path.exists(os.path.join(folder, f"ready-{n}")) for n in names):
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {name} waited {timeout_s:.0f} s at the barrier; not ready: "
                               + ", ".join(n for n in names if not os.path.exists(
                                   os.path.join(folder, f"ready-{n}"))))
        time.sleep(POLL_S)
    return {"ready_at": ready_at, "passed_at": time.time()}


@dataclass(frozen=True)
class TrainBehindBarrier:
    """A ``launch(spec, task=...)`` task: wait at the pair's barrier, then train ``spec`` as
    ``launch(spec)`` would (the same ``train``), each record stamped with the wall-clock time
    its step ended (``ended_at``) and the barrier's times."""

    folder: str
    name: str
    names: tuple[str, ...]

    def __call__(self, spec, rank, world_size, device, emit) -> None:
        from ...runtime.worker import train
        gate = wait_at_barrier(self.folder, self.name, self.names, spec.timeout)
        train(spec, rank, world_size, device,
              emit=lambda record: emit({**record, "ended_at": time.time(), **gate}),
              start_time=gate["passed_at"])

    def summarize(self, spec, records: list[dict], status: str = "finished") -> dict:
        """The training run's summary, with each steady step's end, when its first step began
        and its last ended, and the barrier's times."""
        steady = set(steady_steps(spec, records))
        return {**summarize(spec, records, status),
                "began_at": min((r["ended_at"] - r["step_time_s"] for r in records),
                                default=None),
                "ended_at": max((r["ended_at"] for r in records), default=None),
                "steady": [{"step": r["step"], "ended_at": r["ended_at"],
                            "step_time_s": r["step_time_s"]}
                           for r in records if r["step"] in steady],
                "ready_at": min((r["ready_at"] for r in records), default=None),
                "passed_at": min((r["passed_at"] for r in records), default=None)}


def while_both_trained(summaries: list[dict]) -> list[dict]:
    """Each summary with its ``tokens_per_s`` and ``step_time_s`` taken again over the steady
    steps that ran while every run was training (begun after the last run's first step began,
    ended before the first run's last step ended), and how many those were (``steps_together``);
    None where there were none."""
    if any(summary.get("began_at") is None for summary in summaries):
        first = last = None   # a run with no step: no step ran beside it
    else:
        first = max(summary["began_at"] for summary in summaries)
        last = min(summary["ended_at"] for summary in summaries)
    out = []
    for summary in summaries:
        times = [s["step_time_s"] for s in summary["steady"]
                 if first is not None and s["ended_at"] - s["step_time_s"] >= first
                 and s["ended_at"] <= last]
        tokens = summary["batch_size"] * summary["seq_len"]
        out.append({**summary, "steps_together": len(times),
                    "tokens_per_s": tokens * len(times) / sum(times) if times else None,
                    "step_time_s": statistics.median(times) if times else None})
    return out


def run_pair(halves: list, launch) -> list[dict]:
    """Launch one run of each spec in ``halves`` behind one barrier (``launch``: the runtime's,
    passed in so a test can stand in for it) and return their summaries; a run that fails stops
    the others, and the barrier's folder is removed."""
    folder = tempfile.mkdtemp(prefix="gpututor-pair-")
    names = tuple(str(k) for k in range(len(halves)))
    runs = []
    try:
        for name, half in zip(names, halves):
            runs.append(launch(half, task=TrainBehindBarrier(folder, name, names)))
        return [run.wait() for run in runs]
    finally:
        for run in runs:
            if not run.done:
                run.stop()
        shutil.rmtree(folder, ignore_errors=True)
