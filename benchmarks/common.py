"""Helpers shared by the benchmark scripts: interleaved repeats and a JSON/Markdown report."""
from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    import os
    return {"cpus_usable": len(os.sched_getaffinity(0)), "torch": torch.__version__,
            "python": platform.python_version(), "cuda": torch.cuda.is_available(),
            "date": time.strftime("%Y-%m-%d %H:%M")}


def interleave(variants: dict, repeats: int) -> dict[str, list[float]]:
    """Run each variant ``repeats`` times, alternating (A B A B ...), so drift hits all alike."""
    results = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            results[name].append(fn())
    return results


def ratio(results: dict[str, list[float]], num: str, den: str) -> float:
    """Ratio of the medians of two variants measured side by side."""
    return statistics.median(results[num]) / statistics.median(results[den])


def report(name: str, payload: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    payload = {"machine": machine(), **payload}
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2))
    print(json.dumps(payload, indent=2))
