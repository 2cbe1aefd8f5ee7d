"""This machine measured for the planner: matmul rate per rank (alone and with every rank busy)
and each collective's latency α and bandwidth β, fitted to the ring formulas of ``gpututor.formulas``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from ...checks import InvalidValue
from ...formulas import collective_seconds, ring_steps
from ...measure.matmul import measure_matmul_flops
from ...runtime.bench import run_comm_benchmark
from ...runtime.launcher import launch

COMM_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


@dataclass
class Machine:
    """What this machine measured: matmul FLOP/s, and α (s), β (bytes/s) per collective."""

    matmul_flops: float          # one rank alone
    comm: dict                   # op -> (latency α in s, bandwidth β in bytes/s per rank)
    world_size: int
    device: str
    matmul_flops_shared: float | None = None   # per rank, with all world_size ranks busy
    efficiency: float | None = None   # fitted on the reference runs (None until calibrated)
    overhead_s: float = 0.0           # fitted: per-step time that does not scale with FLOPs
    comm_rows: list = field(default_factory=list)
    load_average: float | None = None

    @property
    def sharing_slowdown(self) -> float:
        """How much slower one rank computes when all ranks compute at once (>= 1 when they
        share cores or memory bandwidth, as processes on one CPU do; ~1 for separate GPUs)."""
        if not self.matmul_flops_shared:
            return 1.0
        return max(1.0, self.matmul_flops / self.matmul_flops_shared)

    def collective_seconds(self, op: str, nbytes: float) -> float:
        """Ring-model time of one ``op`` on a buffer of ``nbytes`` over this machine's ranks."""
        alpha, beta = self.comm[op]
        return collective_seconds(op, nbytes, self.world_size, beta, alpha)


def fit_alpha_beta(rows: list[dict], op: str, world_size: int) -> tuple[float, float]:
    """Least-squares α and β of ``t = k·(α + S/(n·β))`` (broadcast: ``α + S/β``) to rows.

    ``k`` is the number of ring steps. Each row is weighted by 1/t so that small and large
    messages count alike (a relative fit).
    """
    pts = [(r["bytes"], r["time_s"]) for r in rows if r["op"] == op and "time_s" in r]
    if len(pts) < 2:
        raise InvalidValue("op", op, "an op measured at 2 sizes or more",
                           f"for a fit: it needs at least 2 measured sizes, got {len(pts)}")
    n = world_size
    k, per = (1, 1) if op == "broadcast" else (ring_steps(op, n), n)
    # t/k = α + x·(1/β) with x = S/per; weighted least squares with weights 1/t²
    xs, ys, ws = [s / per for s, _ in pts], [t / k for _, t in pts], [1 / t ** 2 for _, t in pts]
    sw = sum(ws)
    mx, my = sum(w * x for w, x in zip(ws, xs)) / sw, sum(w * y for w, y in zip(ws, ys)) / sw
    sxx = sum(w * (x - mx) ** 2 for w, x in zip(ws, xs))
    slope = sum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys)) / sxx if sxx else 0.0
    slope = max(slope, 1e-15)                              # time never falls with size
    alpha = max(0.0, my - slope * mx)
    return alpha, 1.0 / slope


def matmul_task(spec, rank: int, world_size: int, device, emit) -> None:
    """Runs in every rank at once (``launch(task=...)``): the matmul rate of this rank's shapes."""
    mine = spec.replace(strategy="single", world_size=1,
                        batch_size=max(1, spec.batch_size // world_size))
    dist.barrier()                    # start together: the ranks share the machine while timing
    emit({"step": 0, "flops": measure_matmul_flops(mine, min_time_s=0.5)})


def measure_machine(spec, world_size: int = 2, sizes=(2 ** 12, 2 ** 16, 2 ** 20, 2 ** 22),
                    iters: int = 3) -> Machine:
    """Measure this machine for ``spec``'s model: the matmul rate of one rank alone, then per rank
    with ``world_size`` ranks computing at once, and collectives between ``world_size`` ranks."""
    alone = launch(spec.replace(strategy="single", world_size=1, options=()),
                   task=matmul_task).wait()[0]["flops"]
    shared, comm, rows = None, {}, []
    if ranks_available(spec) >= world_size > 1:   # else: one GPU, no collectives to measure
        ranks = spec.replace(strategy="ddp", world_size=world_size, options=())
        shared = min(r["flops"] for r in launch(ranks, task=matmul_task).wait())
        rows = run_comm_benchmark(world_size, spec.device, sizes, COMM_OPS, iters,
                                  spec.timeout)["rows"]
        comm = {op: fit_alpha_beta(rows, op, world_size) for op in COMM_OPS}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return Machine(alone, comm, world_size, spec.resolved_device(), shared, comm_rows=rows,
                   load_average=load)


def ranks_available(spec) -> int:
    """How many ranks this machine can run for ``spec``: on CUDA one per GPU from
    ``spec.first_gpu`` on (rank r takes GPU ``first_gpu + r``, and NCCL does not put two ranks
    on one GPU); on CPU each rank is a process, so as many as asked."""
    if spec.resolved_device() == "cuda":
        return max(0, torch.cuda.device_count() - spec.first_gpu)
    return 1 << 30
