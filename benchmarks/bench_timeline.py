"""What recording the timeline costs a step: the same run with and without ``RunSpec(timeline=
True)``, interleaved, for every strategy of the registry at its smallest layout (the small GPT
on CPU ranks). Reports, per strategy, the median steady step time of each and their ratio (the
issue's bound: at most 2 % slower).

On a shared machine that ratio is mostly noise (runs a minute apart differ by 20 % and more), so
it also reports a bound that noise does not move: what recording does per span, measured in this
process (two clock marks, a span appended, and the conversion to wall-clock spans that follows
the step), times the most spans a rank recorded in a step, over the median step time without
recording.

    python benchmarks/bench_timeline.py [--repeats 3] [--steps 12] [--strategies ddp,zero3]

Writes benchmarks/results/timeline.json.
"""
from __future__ import annotations

import argparse
import statistics
import time

from common import interleave, report

from gpututor import RunSpec, launch
from gpututor.measure.timeline import Timeline
from gpututor.measure.timing import DeviceMark
from gpututor.parallel import STRATEGIES, small_layout

SPANS_PER_STEP: dict[str, int] = {}   # strategy -> the most spans a rank recorded in one step


def seconds_per_span(count: int = 20000, repeats: int = 5) -> float:
    """The least, over ``repeats``, of the seconds recording one span takes on CPU: two marks,
    ``Timeline.add`` and its share of ``Timeline.spans()`` (read after the step)."""
    import torch
    device, best = torch.device("cpu"), float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        timeline = Timeline(device)
        for _ in range(count):
            timeline.add("collective", "all_reduce", DeviceMark(device), DeviceMark(device),
                         1024, 2)
        timeline.spans()
        best = min(best, (time.perf_counter() - start) / count)
    return best


def steady_step_s(strategy: str, steps: int, timeline: bool) -> float:
    world, mesh, options = small_layout(strategy)
    spec = RunSpec(strategy=strategy, world_size=world, mesh=mesh, options=options,
                   model="moe" if STRATEGIES[strategy].needs_model == "moe" else "gpt",
                   model_size="small", steps=steps, batch_size=8, seq_len=64, device="cpu",
                   timeline=timeline)
    run = launch(spec)
    summary = run.wait()
    if timeline:
        SPANS_PER_STEP[strategy] = max(SPANS_PER_STEP.get(strategy, 0),
                                       *(len(r.get("timeline") or []) for r in run.records))
    return summary["step_time_s"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    args = parser.parse_args()
    rows, per_span = {}, seconds_per_span()
    print(f"one span recorded: {per_span * 1e6:.2f} us", flush=True)
    for name in args.strategies.split(","):
        times = interleave({flag: (lambda flag=flag: steady_step_s(name, args.steps, flag))
                            for flag in (False, True)}, args.repeats)
        off, on = statistics.median(times[False]), statistics.median(times[True])
        bound = SPANS_PER_STEP[name] * per_span / off
        rows[name] = {"without_s": times[False], "with_s": times[True], "ratio": on / off,
                      "spans_per_step": SPANS_PER_STEP[name], "recording_bound": bound}
        print(f"{name:14s} without {off * 1e3:7.1f} ms  with {on * 1e3:7.1f} ms  "
              f"ratio {on / off:.3f}  {SPANS_PER_STEP[name]} spans: at most {bound:.3%} of "
              "the step", flush=True)
    report("timeline", {"repeats": args.repeats, "steps": args.steps,
                        "seconds_per_span": per_span, "strategies": rows})


if __name__ == "__main__":
    main()
