"""DDP on 2 ranks against its contention ceiling, measured side by side (interleaved) in one run:
two independent 1-rank runs with half the batch each, started at the same moment on the same
cores (gpututor.lessons.start_here.contention). Efficiency = DDP tokens/s / the pair's summed tokens/s;
the goal is >= 0.95. Also the 2-rank / 1-rank speedup at the same global batch, for reference,
and DDP with its buffers broadcast at every forward (torch's default, which gpututor turns off
for models whose buffers are all constant: parallel/data_parallel/ddp.py), to measure what that
costs. ``comm_share`` is DDP's exposed communication per step over its step time.

    python benchmarks/bench_efficiency.py [--size small] [--batch 64] [--steps 16] [--repeats 5]
"""
from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass

from common import report
from gpututor import RunSpec, launch
from gpututor.lessons.start_here.contention import efficiency_against_pair, independent_pair


@dataclass
class BuffersSyncedDDP:
    """A launch task: gpututor's DDP training, with DDP's per-forward buffer broadcast on."""

    def __call__(self, spec, rank, world_size, device, emit):
        from gpututor.parallel.data_parallel import ddp
        from gpututor.runtime.worker import train
        ddp.sync_buffers_kwargs = lambda model: {}   # torch's defaults: sync every forward
        train(spec, rank, world_size, device, emit)

    def summarize(self, spec, records, status):
        from gpututor.runtime.summary import summarize
        return summarize(spec, records, status)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="small")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    ddp = RunSpec(model_size=args.size, batch_size=args.batch, steps=args.steps, strategy="ddp",
                  world_size=2, device="cpu")
    launch(ddp.replace(steps=2)).wait()   # warm the forkserver
    rows = []
    for _ in range(args.repeats):
        d = launch(ddp).wait()
        synced = launch(ddp, task=BuffersSyncedDDP()).wait()
        pair = independent_pair(ddp)
        one = launch(ddp.replace(strategy="single", world_size=1)).wait()
        rows.append({"ddp_tokens_per_s": d["tokens_per_s"], "pair_tokens_per_s": pair["tokens_per_s"],
                     "one_rank_tokens_per_s": one["tokens_per_s"],
                     "efficiency": efficiency_against_pair(d, pair),
                     "efficiency_buffers_synced": efficiency_against_pair(synced, pair),
                     "comm_share": d["comm_s"] / d["step_time_s"],
                     "speedup_2_over_1": d["tokens_per_s"] / one["tokens_per_s"],
                     "ddp_comm_s": d["comm_s"], "ddp_step_s": d["step_time_s"]})
        print(rows[-1], flush=True)
    med = lambda k: statistics.median(r[k] for r in rows)
    report("efficiency", {"spec": {"size": args.size, "batch": args.batch, "steps": args.steps},
                          "repeats": rows, "median_efficiency": med("efficiency"),
                          "min_efficiency": min(r["efficiency"] for r in rows),
                          "max_efficiency": max(r["efficiency"] for r in rows),
                          "median_efficiency_buffers_synced": med("efficiency_buffers_synced"),
                          "median_comm_share": med("comm_share"),
                          "median_speedup_2_over_1": med("speedup_2_over_1")})


if __name__ == "__main__":
    main()
