"""The contention ceiling: what two ranks on one machine could reach if they never talked.

Two CPU ranks share the cores, the caches and the memory bandwidth; that costs throughput even
without communication. :func:`independent_pair` measures it: two independent 1-rank runs, each
with half the global batch (a data-parallel rank's share), launched at the same moment on the
same cores. Their summed tokens/s is the ceiling a 2-rank data-parallel run can reach here; DDP's
tokens/s over that sum is the share left after communication and synchronisation.
"""
from __future__ import annotations

from ..runtime.launcher import launch


def independent_pair(spec) -> dict:
    """Run two 1-rank copies of ``spec`` (batch halved) at once; return their summaries and the
    summed tokens/s (None if either did not measure it)."""
    half = spec.replace(strategy="single", world_size=1, batch_size=spec.batch_size // 2,
                        mesh=None, options=())
    runs = [launch(half.replace(seed=spec.seed + k)) for k in range(2)]   # both start now
    summaries = [run.wait() for run in runs]
    speeds = [s["tokens_per_s"] for s in summaries]
    return {"summaries": summaries,
            "tokens_per_s": sum(speeds) if all(v is not None for v in speeds) else None}


def efficiency_against_pair(ddp_summary: dict, pair: dict) -> float | None:
    """DDP's tokens/s over the two independent runs' sum (1.0: communication cost nothing)."""
    if ddp_summary.get("tokens_per_s") is None or pair["tokens_per_s"] is None:
        return None
    return ddp_summary["tokens_per_s"] / pair["tokens_per_s"]
