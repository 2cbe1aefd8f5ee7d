"""What recording the timeline costs a step: the same run with and without ``RunSpec(timeline=
True)``, interleaved, for every strategy of the registry at its smallest layout (the small GPT
on CPU ranks). Reports, per strategy, the median steady step time of each and their ratio (the
issue's bound: at most 2 % slower).

    python benchmarks/bench_timeline.py [--repeats 3] [--steps 12] [--strategies ddp,zero3]

Writes benchmarks/results/timeline.json.
"""
from __future__ import annotations

import argparse
import statistics

from common import interleave, report

from gpututor import RunSpec, launch
from gpututor.parallel import STRATEGIES, small_layout


def steady_step_s(strategy: str, steps: int, timeline: bool) -> float:
    world, mesh, options = small_layout(strategy)
    spec = RunSpec(strategy=strategy, world_size=world, mesh=mesh, options=options,
                   model="moe" if STRATEGIES[strategy].needs_model == "moe" else "gpt",
                   model_size="small", steps=steps, batch_size=8, seq_len=64, device="cpu",
                   timeline=timeline)
    run = launch(spec)
    summary = run.wait()
    return summary["step_time_s"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    args = parser.parse_args()
    rows = {}
    for name in args.strategies.split(","):
        times = interleave({flag: (lambda flag=flag: steady_step_s(name, args.steps, flag))
                            for flag in (False, True)}, args.repeats)
        off, on = statistics.median(times[False]), statistics.median(times[True])
        rows[name] = {"without_s": times[False], "with_s": times[True], "ratio": on / off}
        print(f"{name:14s} without {off * 1e3:7.1f} ms  with {on * 1e3:7.1f} ms  "
              f"ratio {on / off:.3f}", flush=True)
    report("timeline", {"repeats": args.repeats, "steps": args.steps, "strategies": rows})


if __name__ == "__main__":
    main()
