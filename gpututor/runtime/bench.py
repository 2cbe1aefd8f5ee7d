"""Benchmarks that launch ranks: the collectives' times and bandwidths over message sizes."""
from __future__ import annotations

from ..config import RunSpec
from ..measure.collectives import MESSAGE_SIZES, OPS, CommBenchmark
from .launcher import launch


def run_comm_benchmark(world_size: int = 2, device: str = "auto", sizes=MESSAGE_SIZES,
                       ops=OPS, iters: int = 5, timeout: float = 60.0) -> dict:
    """Launch ``world_size`` ranks, time every op at every size, return the summary
    (``rows`` of op, bytes, time_s, algbw, busbw; nccl-tests' definitions)."""
    task = CommBenchmark(tuple(sizes), tuple(ops), iters)
    spec = RunSpec(world_size=world_size, device=device, timeout=timeout)
    return launch(spec, task=task).wait()
