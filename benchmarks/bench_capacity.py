"""What a memory capacity (``RunSpec.device_memory``) costs, measured side by side in one run.

The same 1-rank ``single`` run, interleaved:

1. no cap vs a hand-written minimal PyTorch loop      target >= 0.97 (as bench_throughput)
2. a generous cap (the CPU CapacityGuard follows every op of every step) vs no cap   (reported)

Without a cap the per-step code path is the one from before the cap existed: the worker builds
no guard, and ``measured_step`` only sets ``ctx.probe = None`` on steps that do not probe. So
(1) is the figure that says a cap you did not ask for costs nothing; the code before the change
cannot run side by side in the same process, and needs not.

    python benchmarks/bench_capacity.py [--size small] [--batch 64] [--seq 64] [--steps 12]
                                        [--repeats 3]
"""
from __future__ import annotations

import argparse

import torch

from bench_throughput import gpututor_tokens_per_s, handwritten_tokens_per_s
from common import interleave, ratio, report
from gpututor import RunSpec, launch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="small")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    free = RunSpec(model_size=args.size, strategy="single", world_size=1,
                   batch_size=args.batch, seq_len=args.seq, steps=args.steps)
    launch(free.replace(steps=1)).wait()  # start the forkserver before timing anything
    peak = launch(free.replace(steps=3)).wait()["peak_mem_bytes"][0]
    capped = free.replace(device_memory=4 * peak)   # generous: the guard runs, never fires
    results = interleave({
        "handwritten_1thread": lambda: handwritten_tokens_per_s(free, 1),
        "gpututor_no_cap": lambda: gpututor_tokens_per_s(free),
        "gpututor_capped": lambda: gpututor_tokens_per_s(capped),
    }, args.repeats)
    torch.set_num_threads(1)
    report("capacity", {
        "config": {"model_size": args.size, "batch_size": args.batch, "seq_len": args.seq,
                   "steps": args.steps, "repeats": args.repeats, "peak_mem_bytes": peak,
                   "device_memory": capped.device_memory},
        "tokens_per_s": results,
        "no_cap_vs_handwritten": ratio(results, "gpututor_no_cap", "handwritten_1thread"),
        "capped_vs_no_cap": ratio(results, "gpututor_capped", "gpututor_no_cap"),
        "no_cap_code_path": "unchanged per step: no guard is built, nothing extra is entered "
                            "(measured_step sets ctx.probe = None); see no_cap_vs_handwritten",
    })


if __name__ == "__main__":
    main()
