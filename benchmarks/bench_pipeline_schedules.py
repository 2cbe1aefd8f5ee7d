"""Pipeline schedules' measured bubble against theory, side by side (interleaved repeats):
1F1B (p-1)/(m+p-1) vs interleaved 1F1B (p-1)/(v*m+p-1), from scratch and through torch, and
torch's zero-bubble schedules (no closed form here: their ideal is ~0 when F = B = W).

    python benchmarks/bench_pipeline_schedules.py [--size small] [--batch 128] [--steps 6] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import statistics

from common import interleave, report
from gpututor import RunSpec, launch
from gpututor.parallel.pipeline.timeline import theoretical_bubble_fraction

RUNS = [("pp", "1f1b"), ("pp", "interleaved-1f1b"), ("pp-torch", "1f1b"),
        ("pp-torch", "interleaved-1f1b"), ("pp-torch", "interleaved-zero-bubble"),
        ("pp-torch", "zbv")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="small")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--microbatches", type=int, nargs="+", default=[4, 8])
    args = parser.parse_args()
    p, v = args.ranks, 2
    base = RunSpec(model_size=args.size, batch_size=args.batch, steps=args.steps, world_size=p,
                   timeout=120.0)
    specs = {f"{s}:{sch}:m{m}": base.replace(strategy=s, options=(("schedule", sch), ("microbatches", m)))
             for m in args.microbatches for s, sch in RUNS}
    load_before = os.getloadavg()[0]
    for spec in list(specs.values())[:2]:
        launch(spec.replace(steps=1)).wait()    # warm the forkserver
    summaries = interleave({k: (lambda s=s: launch(s).wait()) for k, s in specs.items()}, args.repeats)
    rows = {}
    for name, runs in summaries.items():
        strategy, schedule, m = name.split(":")
        m = int(m[1:])
        chunks = v if schedule != "1f1b" else 1
        theory = theoretical_bubble_fraction(p, m, chunks) if "zero" not in schedule and schedule != "zbv" else None
        measured = statistics.median(s["bubble_fraction"] for s in runs)
        rows[name] = {"measured": round(measured, 3), "theory": None if theory is None else round(theory, 3),
                      "each_repeat": [round(s["bubble_fraction"], 3) for s in runs],
                      "step_time_s": round(statistics.median(s["step_time_s"] for s in runs), 4)}
        print(f"{strategy:9s} {schedule:24s} p={p} m={m}: bubble measured {measured:.3f}"
              + (f"  theory {theory:.3f}" if theory is not None else "  (zero bubble: ideal ~0)"), flush=True)
    report(f"pipeline_schedules_p{p}", {"config": vars(args), "load_average_1min":
           {"before": load_before, "after": os.getloadavg()[0]}, "bubble": rows})


if __name__ == "__main__":
    main()
