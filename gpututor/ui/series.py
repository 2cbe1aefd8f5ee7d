"""Records and summaries turned into plot series and sentences: plain data in, plain data out.

The live widgets (:mod:`gpututor.ui.panel`, :mod:`gpututor.ui.comparison`) and the static
figures draw these; tests check them without a front end.
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from ..measure.memory import CATEGORIES as MEMORY_CATEGORIES

MAX_POINTS = 400             # per line; longer series are downsampled


def global_loss(records: list[dict], world_size: int) -> tuple[list[int], list[float]]:
    """Steps every rank has reported, and the loss averaged over the ranks at each one."""
    count, losses = defaultdict(int), defaultdict(list)
    for r in records:
        count[r["step"]] += 1
        if r.get("loss") is not None:
            losses[r["step"]].append(r["loss"])
    steps = sorted(s for s, n in count.items() if n == world_size and losses[s])
    return steps, [statistics.fmean(losses[s]) for s in steps]


def throughput_by_rank(records: list[dict], world_size: int) -> dict[int, tuple[list, list]]:
    """For each rank: the steps it reported and the tokens/s it measured at each."""
    series = {rank: ([], []) for rank in range(world_size)}
    for r in sorted(records, key=lambda r: (r["rank"], r["step"])):
        series[r["rank"]][0].append(r["step"])
        series[r["rank"]][1].append(r["tokens_per_s"])
    return series


def memory_by_rank(records: list[dict], world_size: int) -> dict[str, list[int]]:
    """Bytes per category for each rank, from the latest record that measured it (0 until then)."""
    memory = {c: [0] * world_size for c in MEMORY_CATEGORIES}
    for r in records:
        for c in MEMORY_CATEGORIES:
            if r.get("mem_" + c) is not None:
                memory[c][r["rank"]] = r["mem_" + c]
    return memory


def downsample(xs: list, ys: list, max_points: int = MAX_POINTS) -> tuple[list, list]:
    """At most ``max_points`` evenly spaced points of a series, first and last always kept."""
    n = len(xs)
    if n <= max_points:
        return list(xs), list(ys)
    keep = sorted({round(i * (n - 1) / (max_points - 1)) for i in range(max_points)})
    return [xs[i] for i in keep], [ys[i] for i in keep]


def comparison_key(summary: dict) -> tuple:
    """Runs with the same key train the same samples on the same kind of device."""
    return (summary["model"], summary["model_size"], summary["batch_size"], summary["seq_len"],
            summary["precision"], str(summary["device"]).split(":")[0])


def speedup_rows(summaries: list[dict]) -> list[dict]:
    """One row per run: tokens/s, and speedup over the latest 1-rank run with the same key."""
    baseline = {comparison_key(s): s["tokens_per_s"] for s in summaries
                if s["world_size"] == 1 and s["tokens_per_s"]}
    rows = []
    for s in summaries:
        base = baseline.get(comparison_key(s))
        speedup = s["tokens_per_s"] / base if base and s["tokens_per_s"] else None
        rows.append({"label": "{} {} batch {} {}".format(*comparison_key(s)[:3], s["precision"]),
                     "strategy": s["strategy"], "world_size": s["world_size"],
                     "tokens_per_s": s["tokens_per_s"], "baseline_tokens_per_s": base,
                     "speedup": speedup,
                     "efficiency": speedup / s["world_size"] if speedup else None,
                     "compute_s": s["compute_s"], "comm_s": s["comm_s"]})
    return rows


def summary_line(summary: dict) -> str:
    """One line a person can read: what ran, how fast, and where the loss ended."""
    fmt = lambda v, spec: "n/a" if v is None else format(v, spec)
    return (f"{summary['steps']} steps of {summary['strategy']} on {summary['world_size']} "
            f"rank(s): {fmt(summary['tokens_per_s'], ',.0f')} tokens/s (all ranks), "
            f"median step {fmt(summary['step_time_s'], '.3f')} s, "
            f"final loss {fmt(summary['final_loss'], '.3f')}")


def step_breakdown_by_rank(records: list[dict], world_size: int) -> dict[str, list[float]]:
    """Each rank's latest step split into compute and exposed communication, in ms."""
    latest = {}
    for r in records:
        if r.get("compute_s") is not None and r["step"] >= latest.get(r["rank"], {}).get("step", -1):
            latest[r["rank"]] = r
    pick = lambda key: [latest[k][key] * 1e3 if k in latest else 0.0 for k in range(world_size)]
    return {"compute": pick("compute_s"), "comm": pick("comm_s")}
