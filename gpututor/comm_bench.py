"""Measure collectives: time, algorithm bandwidth and bus bandwidth over a sweep of sizes.

Bandwidths follow the definitions of NVIDIA's nccl-tests (doc/PERFORMANCE.md):
``algbw = S / t`` where S is the data size of the operation (the full buffer: for all-gather
the gathered output, for reduce-scatter the input), and ``busbw = algbw × factor``, the rate
each link must sustain with the best (ring) algorithm, comparable to the hardware's peak:

    all_reduce      2(n-1)/n        reduce_scatter   (n-1)/n
    all_gather      (n-1)/n         broadcast        1

The ring lower bound on time for an all-reduce of S bytes over links of bandwidth B is
``2(n-1)/n · S / B`` (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms").
"""
from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

# torch >= 2.12 renamed the tensor forms; keep working on the older releases users have.
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
DEFAULT_SIZES = tuple(2 ** k for k in range(10, 25, 2))   # 1 KiB .. 16 MiB


def bus_factor(op: str, world_size: int) -> float:
    n = world_size
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n,
            "reduce_scatter": (n - 1) / n, "broadcast": 1.0,
            "send": 1.0}[op]  # point to point: the data crosses one link once


def _collective(op: str, nbytes: int, world: int, device):
    """A zero-argument function doing one ``op`` on ``nbytes`` of float32 data."""
    numel = max(world, nbytes // 4 // world * world)
    full = torch.ones(numel, device=device)
    part = torch.ones(numel // world, device=device)
    if op == "all_reduce":
        return lambda: dist.all_reduce(full)
    if op == "all_gather":
        return lambda: _all_gather(full, part)
    if op == "reduce_scatter":
        return lambda: _reduce_scatter(part, full)
    return lambda: dist.broadcast(full, src=0)


def comm_task(spec, rank: int, world: int, device, emit) -> None:
    """Runs in every rank (via ``launch(spec, task=comm_task)``); emits one row per (op, size)."""
    sizes = spec.option("sizes", DEFAULT_SIZES)
    ops = spec.option("ops", OPS)
    iters = int(spec.option("iters", 5))
    row = 0
    for op in ops:
        for nbytes in sizes:
            run = _collective(op, nbytes, world, device)
            try:
                run()  # warm-up (and: is the op supported by this backend?)
            except RuntimeError as exc:
                emit({"step": row, "op": op, "bytes": nbytes, "error": str(exc).splitlines()[0]})
                row += 1
                break
            times = []
            for _ in range(iters):
                dist.barrier()
                start = time.perf_counter()
                run()
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                times.append(time.perf_counter() - start)
            emit({"step": row, "op": op, "bytes": nbytes, "time_s": statistics.median(times)})
            row += 1


def summarize_comm(spec, records: list[dict], status: str = "finished") -> dict:
    """One row per (op, size): the slowest rank's median time, algbw and busbw in bytes/s."""
    world, rows = spec.world_size, []
    keys = sorted({(r["op"], r["bytes"]) for r in records}, key=lambda k: (OPS.index(k[0]), k[1]))
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
    return {"status": status, "world_size": world, "backend": _backend_name(spec), "rows": rows}


def _backend_name(spec) -> str:
    return "nccl" if spec.resolved_device() == "cuda" else "gloo"


def run_comm_benchmark(world_size: int = 2, device: str = "auto", sizes=DEFAULT_SIZES,
                       ops=OPS, iters: int = 5, timeout: float = 60.0) -> dict:
    """Launch ``world_size`` ranks, measure every op at every size, return the summary."""
    from .launcher import launch
    from .spec import RunSpec
    strategy = "single" if world_size == 1 else "ddp"
    spec = RunSpec(strategy=strategy, world_size=world_size, device=device, timeout=timeout,
                   batch_size=world_size, options=(("sizes", tuple(sizes)), ("ops", tuple(ops)),
                                                   ("iters", iters)))
    return launch(spec, task=comm_task, summarize_fn=summarize_comm).wait()
