"""Model-parallel figures, measured side by side (interleaved) in one run:

- pipeline bubble, measured vs theory (p-1)/(m+p-1), for m = 1, 2, 4, 8 at p = 2, with the
  from-scratch GPipe and 1F1B schedules                              target: within 0.05
- tp (from scratch) vs tp-dtensor step time
- pp (from scratch) vs pp-torch step time (1F1B, 4 micro-batches)

    python benchmarks/bench_model_parallel.py [--size small] [--batch 128] [--steps 8] [--repeats 3]

The bubble is measured in every step from the stages' own timelines (gpututor/parallel/pipeline/timeline.py);
the figure per m is the median over the repeats of each run's median step. On a machine where
other processes compete for the cores, stages slow down at random and the bubble grows.
"""
from __future__ import annotations

import argparse
import os
import statistics

from common import interleave, ratio, report
from gpututor import RunSpec, launch
from gpututor.parallel.pipeline.timeline import theoretical_bubble_fraction

MICROBATCHES = (1, 2, 4, 8)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="small")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    base = RunSpec(model_size=args.size, batch_size=args.batch, steps=args.steps, world_size=2)
    pipe = lambda strategy, schedule, m: base.replace(
        strategy=strategy, options=(("schedule", schedule), ("microbatches", m)))
    bubble_runs = {f"{schedule}_m{m}": pipe("pp", schedule, m)
                   for schedule in ("gpipe", "1f1b") for m in MICROBATCHES}
    timed_runs = {"tp": base.replace(strategy="tp"),
                  "tp-dtensor": base.replace(strategy="tp-dtensor"),
                  "pp": pipe("pp", "1f1b", 4), "pp-torch": pipe("pp-torch", "1f1b", 4)}
    load_before = os.getloadavg()[0]   # other programs on the cores distort timelines
    for spec in timed_runs.values():   # first launches: imports, forkserver
        launch(spec.replace(steps=1)).wait()
    summaries = interleave({k: (lambda s=s: launch(s).wait()) for k, s in
                            {**bubble_runs, **timed_runs}.items()}, args.repeats)
    step = {k: [s["step_time_s"] for s in runs] for k, runs in summaries.items()}
    bubbles = {}
    for name in bubble_runs:
        m = int(name.split("_m")[1])
        measured = statistics.median(s["bubble_fraction"] for s in summaries[name])
        theory = theoretical_bubble_fraction(2, m)
        bubbles[name] = {"measured": measured, "theory": theory, "difference": measured - theory,
                         "each_repeat": [s["bubble_fraction"] for s in summaries[name]]}
    report("model_parallel", {
        "config": {"model_size": args.size, "batch_size": args.batch, "steps": args.steps,
                   "repeats": args.repeats, "stages": 2, "seq_len": base.seq_len},
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "bubble": bubbles,
        "bubble_within_0.05": all(abs(b["difference"]) <= 0.05 for b in bubbles.values()),
        "step_time_s": {k: step[k] for k in timed_runs},
        "tp_dtensor_vs_tp_step_time": ratio(step, "tp-dtensor", "tp"),
        "pp_torch_vs_pp_step_time": ratio(step, "pp-torch", "pp"),
    })


if __name__ == "__main__":
    main()
