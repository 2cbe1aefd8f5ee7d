"""The summary of a training run: one JSON-ready dict made from every rank's step records.

Throughput and times are medians over steady steps (after ``warmup_steps``, and without the two
steps slowed down by counting FLOPs and probing memory). What a run did not measure is None: a
run too short to have a steady step (with the defaults, fewer than 4 steps) has no steady
figures, rather than figures that mix in the warm-up and the measuring steps.
"""
from __future__ import annotations

import statistics


def steady_steps(spec, records: list[dict]) -> list[int]:
    """The steps every figure of the summary is taken over: complete (every rank reported),
    after ``spec.warmup_steps``, and not slowed down by counting FLOPs or probing memory."""
    steps = sorted({r["step"] for r in records})
    first = steps[0] if steps else 0  # > 0 for a run resumed from a checkpoint
    by_step = {s: [r for r in records if r["step"] == s] for s in steps}
    return [s for s in steps if len(by_step[s]) == spec.world_size
            and s >= first + spec.warmup_steps and not any(r.get("probe") for r in by_step[s])]


def summarize(spec, records: list[dict], status: str = "finished") -> dict:
    """The run's JSON summary (the contract in docs/architecture.md) from all ranks' records."""
    world = spec.world_size
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
