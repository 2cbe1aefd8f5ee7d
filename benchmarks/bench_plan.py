"""The planner against real runs, at the lessons' own sizes: predicted vs measured, one table.

Measures this machine (matmul FLOP/s, collectives), fits the step-time model on two
single-rank runs, then predicts every registered strategy's peak memory and step time *before*
launching it, and launches it. Writes ``results/plan.json`` and ``results/plan.md``.

    python benchmarks/bench_plan.py [--size small] [--batch 64] [--seq 64] [--steps 8]
"""
from __future__ import annotations

import argparse

from common import RESULTS, report
from gpututor import RunSpec, warm_up
from gpututor.lessons.choosing_hardware.calibrate import calibrate, calibration_table, summary_errors


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="small")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    warm_up(block=True)
    base = RunSpec(model="gpt", model_size=args.size, batch_size=args.batch, seq_len=args.seq,
                   steps=args.steps)
    cal = calibrate(base, repeats=args.repeats)
    table = calibration_table(cal)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "plan.md").write_text("```\n" + table + "\n```\n")
    m = cal.machine
    report("plan", {
        "config": {"model_size": args.size, "batch_size": args.batch, "seq_len": args.seq,
                   "steps": args.steps, "repeats": args.repeats},
        "calibrated_machine": {"matmul_flops": m.matmul_flops, "efficiency": m.efficiency,
                    "overhead_s": m.overhead_s, "comm_alpha_beta": m.comm,
                    "load_average": m.load_average},
        "rows": cal.rows, "skipped": cal.skipped, **summary_errors(cal),
    })


if __name__ == "__main__":
    main()
