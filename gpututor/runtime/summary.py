"""The summary of a training run: one JSON-ready dict made from every rank's step records.

Throughput and times are medians over steady steps (after ``warmup_steps``, and without the two
steps slowed down by counting FLOPs and probing memory). What a run did not measure is None: a
run too short to have a steady step (with the defaults, fewer than 4 steps) has no steady
figures, rather than figures that mix in the warm-up and the measuring steps.

A run restarted after a failure (``launch(spec, max_restarts=N)``) re-runs the steps after its
last checkpoint: its figures are made of :func:`current_records` (the re-run's record of each
step replaces the lost attempt's), and ``failures`` says what failed and where it resumed.
"""
from __future__ import annotations

import statistics

from ..i18n import tr


def current_records(records: list[dict]) -> list[dict]:
    """For each rank and step, the record of the latest attempt (in arrival order): after a
    restart the steps from the checkpoint on run again, and their new records replace those of
    the attempt that failed (the failure itself stays in the run's ``failures``)."""
    latest = {}
    for r in records:
        key = (r["rank"], r["step"])
        if key not in latest or r.get("attempt", 1) >= latest[key].get("attempt", 1):
            latest[key] = r
    return [r for r in records if latest[(r["rank"], r["step"])] is r]


def failure_note(failure: dict, attempts: int) -> str:
    """One sentence for a failure of a run allowed ``attempts`` attempts (``max_restarts + 1``):
    which rank failed at which step and where the run restarted from (``failure`` is an entry
    of ``Run.failures``: ``attempt``, ``rank``, ``step``, ``error``, ``resumed_from``; under
    torchrun a summary's failure has no rank or step: torchrun's log names them)."""
    if failure.get("resumed_from") is None:
        return tr("rank {rank} failed at step {step} (attempt {attempt} of {attempts}); no "
                  "restart left", rank=failure["rank"], step=failure["step"],
                  attempt=failure["attempt"], attempts=attempts)
    return tr("rank {rank} failed at step {step}; restarted from step {resumed} (attempt "
              "{attempt} of {attempts})", rank=failure["rank"], step=failure["step"],
              resumed=failure["resumed_from"], attempt=failure["attempt"] + 1, attempts=attempts)


def unechoed(run) -> str:
    """What ``run`` (a launcher's Run) has not printed yet, marked as printed: the launcher's
    notices, the ranks' lines (prefixed with the rank), and a line for each restart."""
    notices, new, failures = (run.notices[run._echoed_notices:], run.output[run._echoed:],
                              run.failures[run._echoed_failures:])
    run._echoed_notices += len(notices)
    run._echoed += len(new)
    run._echoed_failures += len(failures)
    return ("".join(f"[gpututor] {line}\n" for line in notices)
            + "".join(f"[rank {rank}] {line}\n" for rank, _, line in new)
            + "".join(f"[gpututor] {failure_note(f, run.spec.max_restarts + 1)}: {f['error']}\n"
                      for f in failures if f["resumed_from"] is not None))


def steady_steps(spec, records: list[dict]) -> list[int]:
    """The steps every figure of the summary is taken over: complete (every rank reported),
    after the warm-up (``spec.warmup_steps`` from the start of each attempt: a restarted run
    warms up again), and not slowed down by counting FLOPs or probing memory. Records of a
    restarted run count once per rank and step (:func:`current_records`)."""
    records = current_records(records)
    began = {}   # attempt -> its first step (> 0 for a run resumed from a checkpoint)
    for r in records:
        began[r.get("attempt", 1)] = min(began.get(r.get("attempt", 1), r["step"]), r["step"])
    warming = lambda r: r["step"] < began[r.get("attempt", 1)] + spec.warmup_steps
    steps = sorted({r["step"] for r in records})
    by_step = {s: [r for r in records if r["step"] == s] for s in steps}
    return [s for s in steps if len(by_step[s]) == spec.world_size
            and not any(warming(r) or r.get("probe") for r in by_step[s])]


def summarize(spec, records: list[dict], status: str = "finished",
              failures: list[dict] = (), attempts: int | None = None) -> dict:
    """The run's JSON summary (the contract in docs/architecture.md) from all ranks' records.
    ``failures``: the run's failures (``Run.failures``), each with the step it resumed from
    (None for one that ended the run); ``attempts``: how many times the ranks started (default:
    one more than the restarts)."""
    world = spec.world_size
    records = current_records(records)
    restarts = sum(f.get("resumed_from") is not None for f in failures)
    steps = sorted({r["step"] for r in records})
    by_step = {s: [r for r in records if r["step"] == s] for s in steps}
    complete = [s for s in steps if len(by_step[s]) == world]
    losses = [statistics.fmean(r["loss"] for r in by_step[s]) for s in complete]
    first = steps[0] if steps else 0  # > 0 for a run resumed from a checkpoint
    steady = steady_steps(spec, records)   # may be empty: then None
    step_times = [max(r["step_time_s"] for r in by_step[s]) for s in steady]
    tokens = spec.batch_size * spec.seq_len
    per_rank = lambda key: [max((r[key] for r in records
                                 if r["rank"] == k and r.get(key) is not None), default=None)
                            for k in range(world)]

    def median(key, combine=statistics.fmean):
        """Median over steady steps of ``combine`` over ranks (steps where all ranks have it)."""
        values = [combine([r[key] for r in by_step[s]]) for s in steady
                  if all(r.get(key) is not None for r in by_step[s])]
        return statistics.median(values) if values else None

    return {
        "status": status,
        "strategy": spec.strategy,
        "model": spec.model,
        "model_size": spec.resolved_model_size,
        "world_size": world,
        "precision": spec.precision,
        "batch_size": spec.batch_size,
        "seq_len": spec.seq_len,
        "steps": len(complete),
        "first_step": first,
        "device": records[0]["device"] if records else spec.resolved_device(),
        "device_choice": spec.device_choice()[1],
        "params": records[0]["params"] if records else None,
        "tokens_per_s": tokens * len(step_times) / sum(step_times) if step_times else None,
        "step_time_s": statistics.median(step_times) if step_times else None,
        "losses": losses,
        "final_loss": losses[-1] if losses else None,
        "peak_mem_bytes": per_rank("mem_peak"),   # the probe's: live tensor bytes, any device
        "allocator_peak_mem_bytes": per_rank("mem_allocator_peak"),   # CUDA allocator; None on CPU
        "setup_peak_mem_bytes": per_rank("mem_setup_peak"),   # building the model, per rank
        "mem_by_category": {c: per_rank("mem_" + c) for c in
                            ("params", "grads", "optimizer", "activations")},
        "compute_s": median("compute_s"),
        "comm_s": median("comm_s"),
        "comm_bytes_per_step": median("comm_bytes"),
        "comm_wire_bytes_per_step": median("comm_wire_bytes"),
        "flops_per_step": max((r["flops"] for r in records if r.get("flops")), default=None),
        "achieved_flops": median("achieved_flops", combine=sum),  # all ranks together
        "mfu": median("mfu"),
        **({"bubble_fraction": median("bubble_fraction")}  # pipeline runs: measured idle share
           if any(r.get("bubble_fraction") is not None for r in records) else {}),
        "checkpoint": checkpoint_figures(records, world),
        "attempts": attempts if attempts is not None else 1 + restarts,
        "failures": [dict(f) for f in failures],
        "spec": {k: v for k, v in vars(spec).items()},
    }


def checkpoint_figures(records: list[dict], world: int) -> dict:
    """What the run's checkpoints cost: per rank the bytes it wrote (largest save), and the
    median over saves of the slowest rank's save seconds and of the seconds training waited for
    it (the same as the save when it is synchronous). None where not measured."""
    started = [r for r in records if r.get("checkpoint_step") is not None]
    written = [(r["rank"], w) for r in records for w in r.get("checkpoint_written") or []]
    saves = sorted({r["checkpoint_step"] for r in started})

    def slowest(pairs):   # (save's step, seconds) of every rank -> median of each save's max
        per_save = {}
        for step, seconds in pairs:
            if seconds is not None:
                per_save[step] = max(per_save.get(step, seconds), seconds)
        return statistics.median(per_save.values()) if per_save else None

    per_rank = [max((w["bytes"] for k, w in written if k == rank and w.get("bytes") is not None),
                    default=None) for rank in range(world)]
    return {"saves": len(saves), "bytes_per_rank": per_rank,
            "save_s": slowest((w["step"], w.get("save_s")) for _, w in written),
            "blocked_s": slowest((r["checkpoint_step"], r.get("checkpoint_blocked_s"))
                                 for r in started)}
