"""Collectives: a benchmark task that times them over a sweep of sizes.

Bandwidths follow the definitions of NVIDIA's nccl-tests (doc/PERFORMANCE.md):
``algbw = S / t`` where S is the data size of the operation (the full buffer: for all-gather
the gathered output, for reduce-scatter the input), and ``busbw = algbw × factor``, the rate
each link must sustain with the best (ring) algorithm, comparable to the hardware's peak; the
factor is ``gpututor.formulas.bus_factor`` (all-reduce ``2(n-1)/n``, all-gather and
reduce-scatter ``(n-1)/n``, broadcast 1: Patarasuk & Yuan 2009 [ref: patarasuk2009-ring]).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..checks import InvalidValue
from ..formulas import bus_factor

# torch >= 2.12 renamed the tensor forms; keep working on the older releases users have.
all_gather_into_tensor = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
reduce_scatter_tensor = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
MESSAGE_SIZES = tuple(2 ** k for k in range(10, 25, 2))   # 1 KiB .. 16 MiB


def _collective(op: str, nbytes: int, world: int, device):
    """A zero-argument function doing one ``op`` on ``nbytes`` of float32 data."""
    numel = max(world, nbytes // 4 // world * world)
    full = torch.ones(numel, device=device)
    part = torch.ones(numel // world, device=device)
    if op == "all_reduce":
        return lambda: dist.all_reduce(full)
    if op == "all_gather":
        return lambda: all_gather_into_tensor(full, part)
    if op == "reduce_scatter":
        return lambda: reduce_scatter_tensor(part, full)
    return lambda: dist.broadcast(full, src=0)


@dataclass(frozen=True)
class CommBenchmark:
    """A task for ``launch(spec, task=CommBenchmark(...))``: in every rank, time each of ``ops``
    at each of ``sizes`` (bytes), ``iters`` times; emit one row per (op, size)."""

    sizes: tuple = MESSAGE_SIZES
    ops: tuple = OPS
    iters: int = 5

    def __post_init__(self):
        bad = [op for op in self.ops if op not in OPS]
        if bad:
            raise InvalidValue("ops", ",".join(bad), OPS)
        if not self.sizes or not all(isinstance(n, int) and n > 0 for n in self.sizes):
            raise InvalidValue("sizes", self.sizes, "a non-empty tuple of positive byte counts")
        if not isinstance(self.iters, int) or self.iters < 1:
            raise InvalidValue("iters", self.iters, "an integer >= 1")

    def __call__(self, spec, rank: int, world: int, device, emit) -> None:
        row = 0
        for op in self.ops:
            for nbytes in self.sizes:
                run = _collective(op, nbytes, world, device)
                try:
                    run()  # warm-up (and: is the op supported by this backend?)
                except RuntimeError as exc:
                    emit({"step": row, "op": op, "bytes": nbytes,
                          "error": str(exc).splitlines()[0]})
                    row += 1
                    break
                times = []
                for _ in range(self.iters):
                    dist.barrier()
                    start = time.perf_counter()
                    run()
                    if device.type == "cuda":
                        torch.cuda.synchronize(device)
                    times.append(time.perf_counter() - start)
                emit({"step": row, "op": op, "bytes": nbytes, "time_s": statistics.median(times)})
                row += 1

    def summarize(self, spec, records: list[dict], status: str = "finished") -> dict:
        """One row per (op, size): the slowest rank's median time, algbw and busbw in bytes/s."""
        world, rows = spec.world_size, []
        keys = sorted({(r["op"], r["bytes"]) for r in records},
                      key=lambda k: (OPS.index(k[0]), k[1]))
        for op, nbytes in keys:
            mine = [r for r in records if (r["op"], r["bytes"]) == (op, nbytes)]
            errors = [r["error"] for r in mine if "error" in r]
            if errors:
                rows.append({"op": op, "bytes": nbytes, "error": errors[0]})
                continue
            seconds = max(r["time_s"] for r in mine)
            algbw = nbytes / seconds
            rows.append({"op": op, "bytes": nbytes, "time_s": seconds, "algbw": algbw,
                         "busbw": algbw * bus_factor(op, world)})
        backend = "nccl" if spec.resolved_device() == "cuda" else "gloo"
        return {"status": status, "world_size": world, "backend": backend, "rows": rows}
