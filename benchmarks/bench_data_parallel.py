"""Data-parallel ratios, measured side by side (interleaved) in one run:

- dp-bucketed vs DDP step time                       target <= 1.10x
- dp-naive vs dp-bucketed step time
- DDP 2 ranks vs 1 rank tokens/s, without and with 4x gradient accumulation
- the same on an emulated PCIe-like link (labelled as emulation)

    python benchmarks/bench_data_parallel.py [--size small] [--batch 64] [--steps 12] [--repeats 3]
"""
from __future__ import annotations

import argparse

from common import interleave, ratio, report
from gpututor import RunSpec, launch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="small")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    base = RunSpec(model_size=args.size, batch_size=args.batch, steps=args.steps,
                   options=(("bucket_cap_mb", 1.0),))
    one, two = base.replace(strategy="single", world_size=1, options=()), \
        base.replace(strategy="ddp", world_size=2)
    accum = dict(batch_size=4 * args.batch, grad_accum=4)
    link = (("link_gbps", 0.015), ("link_latency_us", 20.0))
    variants = {
        "single": one, "ddp": two,
        "dp-bucketed": two.replace(strategy="dp-bucketed"),
        "dp-naive": two.replace(strategy="dp-naive", options=()),
        "single_accum4": one.replace(**accum), "ddp_accum4": two.replace(**accum),
        "ddp_emulated_link": two.replace(options=link),
        "ddp_accum4_emulated_link": two.replace(options=link, **accum),
    }
    launch(one.replace(steps=1)).wait()
    step = interleave({k: (lambda s=s: launch(s).wait()["step_time_s"]) for k, s in variants.items()},
                      args.repeats)
    # same tokens per step in each pair compared, so tokens/s ratio = inverse step-time ratio
    throughput = lambda num, den: ratio(step, den, num)
    report("data_parallel", {
        "config": {"model_size": args.size, "batch_size": args.batch, "steps": args.steps,
                   "repeats": args.repeats, "bucket_cap_mb": 1.0,
                   "emulated_link": "15 MB/s, 20 us (EMULATED)"},
        "step_time_s": step,
        "dp_bucketed_vs_ddp_step_time": ratio(step, "dp-bucketed", "ddp"),
        "dp_naive_vs_dp_bucketed_step_time": ratio(step, "dp-naive", "dp-bucketed"),
        "ddp2_vs_1_tokens_per_s": throughput("ddp", "single"),
        "ddp2_vs_1_tokens_per_s_accum4": throughput("ddp_accum4", "single_accum4"),
        "ddp2_emulated_vs_1_tokens_per_s": throughput("ddp_emulated_link", "single"),
        "ddp2_accum4_emulated_vs_1_tokens_per_s": throughput("ddp_accum4_emulated_link",
                                                             "single_accum4"),
    })


if __name__ == "__main__":
    main()
