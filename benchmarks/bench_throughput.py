"""Throughput ratios of the spine, each measured side by side in one run.

1. gpututor single rank vs a hand-written minimal PyTorch loop (same model, batch, steps,
   one thread each)                                      target >= 0.97
2. DDP on 2 ranks vs 1 rank, one thread each              target >= 1.85
3. DDP on 2 ranks (1 thread each) vs one process with 2 threads   (reported, not a target)

    python benchmarks/bench_throughput.py [--size small] [--batch 32] [--steps 20] [--repeats 3]
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from common import interleave, ratio, report
from gpututor import RunSpec, batches, build_model, launch


def handwritten_tokens_per_s(spec: RunSpec, threads: int) -> float:
    """The plainest loop: no hooks, no probes, no records. Same warm-up exclusion as gpututor."""
    torch.set_num_threads(threads)
    model = build_model(spec)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    times = []
    for inputs, targets in batches(spec):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        loss.item()
        times.append(time.perf_counter() - start)
    steady = times[spec.warmup_steps:]
    return spec.batch_size * spec.seq_len * len(steady) / sum(steady)


def gpututor_tokens_per_s(spec: RunSpec) -> float:
    return launch(spec).wait()["tokens_per_s"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="small")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    base = RunSpec(model_size=args.size, batch_size=args.batch, steps=args.steps)
    one = base.replace(strategy="single", world_size=1)
    two = base.replace(strategy="ddp", world_size=2)
    launch(one.replace(steps=1)).wait()  # start the forkserver before timing anything
    results = interleave({
        "handwritten_1thread": lambda: handwritten_tokens_per_s(one, 1),
        "handwritten_2threads": lambda: handwritten_tokens_per_s(one, 2),
        "gpututor_single": lambda: gpututor_tokens_per_s(one),
        "gpututor_ddp2": lambda: gpututor_tokens_per_s(two),
    }, args.repeats)
    torch.set_num_threads(1)
    report("throughput", {
        "config": {"model_size": args.size, "batch_size": args.batch, "seq_len": base.seq_len,
                   "steps": args.steps, "repeats": args.repeats},
        "tokens_per_s": results,
        "single_vs_handwritten": ratio(results, "gpututor_single", "handwritten_1thread"),
        "ddp2_vs_single": ratio(results, "gpututor_ddp2", "gpututor_single"),
        "ddp2_vs_one_process_2threads": ratio(results, "gpututor_ddp2", "handwritten_2threads"),
    })


if __name__ == "__main__":
    main()
