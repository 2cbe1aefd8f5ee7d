"""How fast plain matmuls run here: the yardstick for achieved FLOP/s where no datasheet peak
is known (a CPU), and the rate of each number format.

Timed like a benchmark (nanoGPT's ``bench.py``): a warm-up call, then the best of 3 rounds of
repeated calls (other processes can only slow a round down), synchronising the device only
between batches of calls, whose size doubles (``measure.timing.seconds_per_call``). Runs in the
calling process, on ``threads`` CPU threads.
"""
from __future__ import annotations

from typing import Iterable

import torch

from ..config import PRECISIONS, torch_dtype
from ..models import build_model
from .timing import seconds_per_call


def seconds_per_matmul(a: torch.Tensor, b: torch.Tensor, budget_s: float) -> float:
    """Mean seconds of ``a @ b`` over as many repetitions as fit in ``budget_s``."""
    return seconds_per_call(lambda: a @ b, a.device, budget_s)


def matmul_flops(shapes: Iterable[tuple[int, int, int]], dtype: torch.dtype,
                 device: torch.device, threads: int = 1, min_time_s: float = 0.3) -> float:
    """FLOP/s over one matmul of each ``(m, k, n)`` in ``shapes``, best of 3 rounds each."""
    shapes = list(shapes)
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        flops = seconds = 0.0
        for m, k, n in shapes:
            a = torch.randn(m, k, device=device, dtype=dtype)
            b = torch.randn(k, n, device=device, dtype=dtype)
            a @ b  # warm-up: the first call picks kernels and allocates
            budget = min_time_s / (3 * len(shapes))
            flops += 2 * m * k * n
            seconds += min(seconds_per_matmul(a, b, budget) for _ in range(3))
        return flops / seconds
    finally:
        torch.set_num_threads(saved)


def measure_matmul_flops(spec, data_parallel_size: int = 1, min_time_s: float = 0.3) -> float:
    """FLOP/s that matmuls of ``spec``'s linear-layer shapes reach here, on one rank's threads.

    The shapes are the forward matmuls of one rank's micro-batch (the global batch split over
    ``data_parallel_size`` ranks and ``spec.grad_accum`` micro-batches), in the run's precision.
    Report a run as "fraction of this machine's measured matmul rate": that is not MFU.
    """
    rows = spec.batch_size // (data_parallel_size * spec.grad_accum) * spec.seq_len
    shapes = sorted({(rows, m.in_features, m.out_features)
                     for m in build_model(spec).modules() if isinstance(m, torch.nn.Linear)})
    return matmul_flops(shapes, torch_dtype(spec.precision), torch.device(spec.resolved_device()),
                        spec.threads_per_rank, min_time_s)


def matmul_flops_by_dtype(size: int = 256, dtypes: Iterable[str] = PRECISIONS,
                          device: str = "cpu", threads: int = 1, min_time_s: float = 0.1
                          ) -> dict[str, float]:
    """FLOP/s of a ``size``×``size`` matmul in each format here.

    On a CPU without low-precision matrix units, bf16 and fp16 are converted on the fly and can
    be slower than fp32; a GPU's tensor cores make them many times faster. Measure, don't assume.
    """
    return {name: matmul_flops([(size, size, size)], torch_dtype(name), torch.device(device),
                               threads, min_time_s)
            for name in dtypes}

