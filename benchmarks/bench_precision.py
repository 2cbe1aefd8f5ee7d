"""Mixed precision on this machine, each comparison measured side by side in one run.

1. bf16 autocast vs fp32 runs (gpututor single rank, small GPT): tokens/s, peak memory,
   activation memory, largest loss gap; interleaved repeats.
2. One 256x256 / 512x512 matmul per dtype (fp32, bf16, fp16) on one thread: FLOP/s.
3. fp16 autocast on CPU (which runs refuse): the in-process step time against fp32 and bf16,
   to show what was measured rather than only saying "fp16 is slow on CPU".
4. From-scratch master weights (tiny GPT): ms/step and loss gap to fp32 for bf16 and fp16+scaler.

    python benchmarks/bench_precision.py [--size small] [--batch 64] [--steps 12] [--repeats 3]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from common import interleave, ratio, report
from gpututor import RunSpec, batches, build_model, launch
from gpututor import precision as mp
from gpututor.measure.matmul import matmul_flops_by_dtype


def run_summary(spec: RunSpec) -> dict:
    return launch(spec).wait()


def autocast_step_seconds(spec: RunSpec, dtype, steps: int = 6) -> float:
    """Median in-process seconds per training step under CPU autocast to ``dtype`` (None: fp32)."""
    torch.set_num_threads(1)
    model = build_model(spec)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    times = []
    for inputs, targets in batches(spec.replace(steps=steps)):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            loss = F.cross_entropy(model(inputs).flatten(0, 1).float(), targets.flatten())
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="small")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    base = RunSpec(model_size=args.size, strategy="single", world_size=1,
                   batch_size=args.batch, steps=args.steps)
    launch(base.replace(steps=1)).wait()  # start the forkserver before timing anything

    # 1. runs
    summaries = {"fp32": [], "bf16": []}
    for _ in range(args.repeats):
        for precision in summaries:
            summaries[precision].append(run_summary(base.replace(precision=precision)))
    tokens = {p: [s["tokens_per_s"] for s in runs] for p, runs in summaries.items()}
    peak = {p: statistics.median(s["peak_mem_bytes"][0] for s in runs) for p, runs in summaries.items()}
    acts = {p: statistics.median(s["mem_by_category"]["activations"][0] for s in runs)
            for p, runs in summaries.items()}
    gap = max(abs(a - b) for a, b in zip(summaries["fp32"][0]["losses"], summaries["bf16"][0]["losses"]))

    # 2. matmuls
    matmul = {size: matmul_flops_by_dtype(size=size, min_time_s=0.3) for size in (256, 512)}

    # 3. in-process autocast steps, fp16 included (interleaved)
    small = base.replace(batch_size=16, seq_len=64)
    steps = interleave({"fp32": lambda: autocast_step_seconds(small, None),
                        "bf16": lambda: autocast_step_seconds(small, torch.bfloat16),
                        "fp16": lambda: autocast_step_seconds(small, torch.float16)}, 2)

    # 4. from-scratch master weights
    tiny = base.replace(model_size="tiny", batch_size=16, seq_len=32, steps=15)
    master = {"fp32": mp.train_master_weights(tiny, "fp32"),
              "bf16": mp.train_master_weights(tiny, "bf16"),
              "fp16+scaler": mp.train_master_weights(tiny, "fp16", mp.DynamicLossScaler())}

    report("precision", {
        "config": {"model_size": args.size, "batch_size": args.batch, "seq_len": base.seq_len,
                   "steps": args.steps, "repeats": args.repeats},
        "cpu_matrix_features": mp.cpu_matrix_features(),
        "runs": {"tokens_per_s": tokens,
                 "bf16_vs_fp32_tokens_per_s": ratio(tokens, "bf16", "fp32"),
                 "peak_mem_bytes": peak,
                 "bf16_vs_fp32_peak_mem": peak["bf16"] / peak["fp32"],
                 "activation_bytes": acts,
                 "largest_loss_gap_bf16_vs_fp32": gap},
        "matmul_flops": matmul,
        "autocast_step_s": steps,
        "autocast_step_ratio_vs_fp32": {p: ratio(steps, p, "fp32") for p in steps},
        "master_weights": {name: {"ms_per_step": 1e3 * run.seconds / len(run.results),
                                  "largest_loss_gap_vs_fp32": max(
                                      abs(a - b) for a, b in zip(run.losses, master["fp32"].losses))}
                           for name, run in master.items()},
    })


if __name__ == "__main__":
    main()
