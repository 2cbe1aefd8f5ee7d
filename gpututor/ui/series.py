"""Records and summaries turned into plot series and sentences: plain data in, plain data out.

The live widgets (:mod:`gpututor.ui.panel`, :mod:`gpututor.ui.comparison`) and the static
figures draw these; tests check them without a front end.
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from ..i18n import ntr, tr
from ..measure.memory import CATEGORIES as MEMORY_CATEGORIES
from ..runtime.summary import current_records, failure_note

MAX_POINTS = 400             # per line; longer series are downsampled


def global_loss(records: list[dict], world_size: int) -> tuple[list[int], list[float]]:
    """Steps every rank has reported, and the loss averaged over the ranks at each one (after a
    restart, a step run again counts once: the latest attempt's record)."""
    count, losses = defaultdict(int), defaultdict(list)
    for r in current_records(records):
        count[r["step"]] += 1
        if r.get("loss") is not None:
            losses[r["step"]].append(r["loss"])
    steps = sorted(s for s, n in count.items() if n == world_size and losses[s])
    return steps, [statistics.fmean(losses[s]) for s in steps]


def throughput_by_rank(records: list[dict], world_size: int) -> dict[int, tuple[list, list]]:
    """For each rank: the steps it reported and the tokens/s it measured at each."""
    series = {rank: ([], []) for rank in range(world_size)}
    for r in sorted(current_records(records), key=lambda r: (r["rank"], r["step"])):
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


def failure_marks(failures: list[dict], steps: list[int], losses: list[float],
                  attempts: int) -> list[dict]:
    """A vertical line at the step where each failure happened, over the loss curve's range,
    named with what happened (:func:`~gpututor.runtime.summary.failure_note`)."""
    low, high = (min(losses), max(losses)) if losses else (None, None)
    return [{"x": [f["step"], f["step"]], "y": [low, high],
             "name": failure_note(f, attempts)} for f in failures if f.get("step") is not None]


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
                     "key": comparison_key(s), "device": str(s["device"]),
                     "strategy": s["strategy"], "world_size": s["world_size"],
                     "tokens_per_s": s["tokens_per_s"], "baseline_tokens_per_s": base,
                     "speedup": speedup,
                     "efficiency": speedup / s["world_size"] if speedup else None,
                     "compute_s": s["compute_s"], "comm_s": s["comm_s"]})
    return rows


def weak_scaling(run: dict, one_rank: dict) -> dict:
    """Weak scaling of a data-parallel ``run`` on N ranks against ``one_rank``, a 1-rank run with
    the same batch *per rank* (and the same model, sequence, precision and device kind).
    Efficiency = tokens/s on N ranks / (N × tokens/s on one): 1.0 when every rank keeps its
    single-rank speed, i.e. communication and sharing the machine cost nothing."""
    n = run["world_size"]
    if one_rank["world_size"] != 1:
        raise ValueError(f"one_rank has world_size={one_rank['world_size']}: allowed is 1")
    if run["batch_size"] % n or run["batch_size"] // n != one_rank["batch_size"]:
        raise ValueError(f"run has {run['batch_size']} sequences on {n} ranks and one_rank "
                         f"{one_rank['batch_size']}: weak scaling needs the same batch per rank")
    same = comparison_key(run)[:2] + comparison_key(run)[3:]
    if same != comparison_key(one_rank)[:2] + comparison_key(one_rank)[3:]:
        raise ValueError("run and one_rank differ in model, sequence length, precision or device")
    ratio = run["tokens_per_s"] / one_rank["tokens_per_s"] \
        if run["tokens_per_s"] and one_rank["tokens_per_s"] else None
    return {"world_size": n, "per_rank_batch": one_rank["batch_size"], "throughput_ratio": ratio,
            "efficiency": ratio / n if ratio is not None else None,
            "step_ratio": run["step_time_s"] / one_rank["step_time_s"]
            if run["step_time_s"] and one_rank["step_time_s"] else None}


def explain_weak_scaling(run: dict, one_rank: dict) -> str:
    """:func:`weak_scaling` in words, read from the two runs' numbers."""
    w = weak_scaling(run, one_rank)
    if w["efficiency"] is None:
        return tr("Weak scaling: one of the two runs has no measured throughput.")
    waited = run.get("comm_s")
    if w["efficiency"] >= 0.95:
        verdict = tr("every rank kept its single-rank speed")
    else:
        cause = tr("communication was not measured") if waited is None else \
            tr("waiting for communication took {waited:.0f} ms of each {step:.0f} ms step",
               waited=waited * 1e3, step=run["step_time_s"] * 1e3)
        verdict = tr("{lost:.0%} of the ideal throughput was lost: {cause}; the rest is other "
                     "overhead, such as ranks sharing this machine",
                     lost=1 - w["efficiency"], cause=cause)
    return tr("Weak scaling, {batch} sequences per rank: {n} ranks processed {ratio:.2f}x the "
              "tokens/s of one rank (ideal {n}x), an efficiency of {efficiency:.0%}; a step "
              "took {step_ratio:.2f}x as long as one rank's. So {verdict}.",
              batch=w["per_rank_batch"], n=w["world_size"], ratio=w["throughput_ratio"],
              efficiency=w["efficiency"], step_ratio=w["step_ratio"], verdict=verdict)


def summary_line(summary: dict) -> str:
    """One line a person can read: what ran, how fast, and where the loss ended."""
    fmt = lambda v, spec: tr("n/a") if v is None else format(v, spec)
    return ntr("{steps} steps of {strategy} on {n} rank: {tokens} tokens/s (all ranks), "
               "median step {step_s} s, loss {first} at the first step, {last} at the last",
               "{steps} steps of {strategy} on {n} ranks: {tokens} tokens/s (all ranks), "
               "median step {step_s} s, loss {first} at the first step, {last} at the last",
               summary["world_size"], steps=summary["steps"], strategy=summary["strategy"],
               tokens=fmt(summary["tokens_per_s"], ",.0f"),
               step_s=fmt(summary["step_time_s"], ".3f"),
               first=fmt((summary.get("losses") or [None])[0], ".3f"),
               last=fmt(summary["final_loss"], ".3f"))


def step_breakdown_by_rank(records: list[dict], world_size: int) -> dict[str, list[float]]:
    """Each rank's latest step split into compute and exposed communication, in ms."""
    latest = {}
    for r in records:
        if r.get("compute_s") is not None and r["step"] >= latest.get(r["rank"], {}).get("step", -1):
            latest[r["rank"]] = r
    pick = lambda key: [latest[k][key] * 1e3 if k in latest else 0.0 for k in range(world_size)]
    return {"compute": pick("compute_s"), "comm": pick("comm_s")}
