"""Sharding, measured side by side in one run.

1. Per-rank memory of ddp, zero1, zero2, zero3 and fsdp on 2 ranks: model state and peak,
   measured, next to the formula (fp32 AdamW, 4 + 4 + 8 bytes per parameter), and the peak
   next to "formula state + measured activations" (what the formula alone cannot see).
2. Bytes each rank sends per step, relative to ddp (expected: 1, 1, 1, 1.5, 1.5).
3. Step time of the from-scratch zero3 vs FSDP2 (``fsdp``), interleaved repeats (A B A B ...).

    python benchmarks/bench_sharding.py [--size medium] [--batch 8] [--steps 12] [--repeats 3]
"""
from __future__ import annotations

import argparse
import statistics

from common import interleave, ratio, report
from gpututor import RunSpec, launch
from gpututor.lessons.sharding.figures import ORDER, comm_rows, memory_rows, zero_stage


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="medium")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    base = RunSpec(model_size=args.size, world_size=2, batch_size=args.batch, seq_len=args.seq,
                   steps=args.steps)
    launch(base.replace(model_size="tiny", steps=1)).wait()  # start the forkserver first

    summaries = {name: launch(base.replace(strategy=name)).wait() for name in ORDER}
    memory = {}
    for row in memory_rows(summaries):
        memory[row["label"]] = {
            "stage": zero_stage(row["strategy"]),
            "measured_state_bytes": row["measured_state"],
            "formula_state_bytes": row["formula_total"],
            "state_gap_bytes": row["state_gap"],
            "activations_bytes": row["measured_activations"],
            "peak_bytes_per_rank": summaries[row["label"]]["peak_mem_bytes"],
            "peak_vs_ddp": row["peak"] / summaries["ddp"]["peak_mem_bytes"][0],
            # formula for the state + the measured activations: what a planner would predict
            "formula_state_plus_activations_bytes": row["formula_total"]
            + row["measured_activations"],
            "peak_vs_that": row["peak"] / (row["formula_total"] + row["measured_activations"]),
        }
    comm = {r["label"]: {"wire_bytes_per_step": r["wire_bytes"], "vs_ddp": r["vs_baseline"],
                         "exposed_comm_s": r["comm_s"], "step_time_s": r["step_time_s"]}
            for r in comm_rows(summaries)}

    step = lambda name: lambda: launch(base.replace(strategy=name)).wait()["step_time_s"]
    times = interleave({"zero3": step("zero3"), "fsdp": step("fsdp")}, args.repeats)
    report("sharding", {
        "config": {"model_size": args.size, "params": summaries["ddp"]["params"],
                   "world_size": 2, "batch_size": args.batch, "seq_len": args.seq,
                   "steps": args.steps, "repeats": args.repeats,
                   "convention": "fp32-adamw: 4 + 4 + 8 bytes per parameter"},
        "memory": memory,
        "comm": comm,
        "step_time_s": times,
        "step_time_median_s": {k: statistics.median(v) for k, v in times.items()},
        "zero3_vs_fsdp_step_time": ratio(times, "zero3", "fsdp"),
    })


if __name__ == "__main__":
    main()
