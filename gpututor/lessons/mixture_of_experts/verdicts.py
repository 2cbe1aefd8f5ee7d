"""What lesson 11's runs showed, in words chosen from their numbers: one verdict per result
(``(headline, details, tone)`` for ``show_verdict``) and the rows of its tables. Nothing here
launches or draws: the tests feed numbers (tests/lessons/mixture_of_experts/test_moe_verdicts.py).
The expert load's own verdict is :func:`.load.load_verdict`."""
from __future__ import annotations

import statistics

from ...i18n import not_measured, ntr, tr
from ...runtime.summary import current_records, steady_steps

def step_spread(times: list[float]) -> float:
    """How far a run's steady steps lie apart: the range of their middle half (75th minus 25th
    percentile), which one step slowed by the machine does not stretch; 0 for fewer than two."""
    if len(times) < 2:
        return 0.0
    low, _, high = statistics.quantiles(times, n=4, method="inclusive")
    return high - low


def routing_table(experts, gates) -> tuple[list[str], list[list]]:
    """Section 1: each token's experts and gates (``route``'s, tokens × top_k)."""
    return [tr("token"), tr("experts"), tr("gates")], [
        [t, ", ".join(map(str, e)), ", ".join(f"{g:.2f}" for g in gs)]
        for t, (e, gs) in enumerate(zip(experts.tolist(), gates.tolist()))]


def capacity_table(experts, places, capacity: int) -> tuple[list[str], list[list]]:
    """Section 2: each token's experts, its slots' places in their queues, and which are kept
    (a place below ``capacity``)."""
    fate = lambda p: tr("kept") if p < capacity else tr("DROPPED")
    return [tr("token"), tr("experts"), tr("places in their queues"), tr("slots")], [
        [t, ", ".join(map(str, e)), ", ".join(map(str, p)), ", ".join(fate(x) for x in p)]
        for t, (e, p) in enumerate(zip(experts.tolist(), places.tolist()))]


def capacity_verdict(places, capacity: int) -> tuple[str, str, str]:
    """Section 2: how many slots the capacity turned away, and whose."""
    rows = places.tolist()
    slots = sum(len(r) for r in rows)
    dropped = sum(p >= capacity for r in rows for p in r)
    tokens = [t for t, r in enumerate(rows) if any(p >= capacity for p in r)]
    details = tr("capacity = ceil(capacity factor × tokens × top_k / n_expert); a slot whose "
                 "place in its expert's queue is {capacity} or more is dropped",
                 capacity=capacity)
    if not dropped:
        return tr("With {capacity} slots per expert, all {slots} slots are kept",
                  capacity=capacity, slots=slots), details, "good"
    whose = ntr("token {tokens}", "tokens {tokens}", len(tokens),
                tokens=", ".join(map(str, tokens)))
    return tr("With {capacity} slots per expert, {dropped} of the {slots} slots are dropped, "
              "their experts' queues being full: {whose}", capacity=capacity, dropped=dropped,
              slots=slots, whose=whose), details, "mixed"


def capacity_factor_verdict(rows: list[dict]) -> tuple[str, str, str]:
    """Section 4: what raising the capacity factor did to the slots dropped at the last step
    (``rows``: ``capacity_factor``, ``dropped``, ``final_loss``, ``tokens_per_s``)."""
    rows = sorted(rows, key=lambda r: r["capacity_factor"])
    low, high = rows[0], rows[-1]
    details = "\n".join(tr("capacity factor {cf}: {dropped:.1%} of slots dropped at the last step, "
                           "final loss {loss:.4f}, {speed} tokens/s", cf=r["capacity_factor"],
                           dropped=r["dropped"], loss=r["final_loss"],
                           speed=tr("not measured") if r["tokens_per_s"] is None
                           else f"{r['tokens_per_s']:,.0f}") for r in rows)
    words = dict(low=low["capacity_factor"], high=high["capacity_factor"],
                 before=low["dropped"], after=high["dropped"])
    if high["dropped"] >= low["dropped"]:
        return tr("Raising the capacity factor from {low} to {high} did not lower the slots "
                  "dropped at the last step ({before:.1%}, then {after:.1%})", **words), \
            details, "bad"
    if high["dropped"] == 0:
        return tr("Raising the capacity factor from {low} to {high} took the slots dropped at the "
                  "last step from {before:.1%} to none", **words), details, "good"
    return tr("Raising the capacity factor from {low} to {high} took the slots dropped at the "
              "last step from {before:.1%} to {after:.1%}", **words), details, "good"


def drift_verdict(same: list[bool], rel: list[float]) -> tuple[str, str, str]:
    """Section 5: for how many steps expert parallel routed every token as one rank did
    (``same``: per step, equal tokens per expert), and how far the losses (``rel``: relative
    difference per step) lay apart before and after."""
    steps = len(same)
    identical = same.index(False) if False in same else steps
    details = tr("relative loss difference per step: {differences}",
                 differences=", ".join(f"{d:.0e}" for d in rel))
    if identical == steps:
        return tr("Expert parallel routed every token as one rank did at all {steps} steps; the "
                  "losses agree within a relative {worst:.0e}", steps=steps,
                  worst=max(rel)), details, "good"
    if identical == 0:
        return tr("Expert parallel routed tokens differently from one rank from the first step"), \
            details, "bad"
    words = dict(identical=identical, steps=steps, before=max(rel[:identical]),
                 after=max(rel[identical:]))
    if words["after"] > words["before"]:
        return tr("Expert parallel routed every token as one rank did for the first {identical} "
                  "of {steps} steps; after that the relative loss difference grew from at most "
                  "{before:.0e} to {after:.0e}", **words), details, "mixed"
    return tr("Expert parallel routed every token as one rank did for the first {identical} of "
              "{steps} steps; after that the losses still agreed within a relative {before:.0e}",
              **words), details, "mixed"


def steady_step_times(spec, records: list[dict]) -> list[float]:
    """Each steady step's time in seconds, timed by its slowest rank: what the summary's median
    ``step_time_s`` is taken over (``runtime.summary.steady_steps``)."""
    records = current_records(records)
    return [max(r["step_time_s"] for r in records if r["step"] == step)
            for step in steady_steps(spec, records)]


def busier_shares(records: list[dict], n_expert: int, ranks: int) -> list[float]:
    """Per step (``records``: rank 0's of an ep run, which count every expert's slots), the
    share of the experts' kept slots, over all layers, that the busier ep rank ran (rank k holds
    experts ``k·E/n … (k+1)·E/n − 1``)."""
    shares = []
    for r in records:
        kept = [sum(layer[e] for layer in r["expert_tokens"]
                    for e in range(k * n_expert // ranks, (k + 1) * n_expert // ranks))
                for k in range(ranks)]
        shares.append(max(kept) / sum(kept))
    return shares


def _mb(value) -> str:
    return not_measured(value, ".2f", 1e6)


def ep_table(runs: dict) -> tuple[list[str], list[list]]:
    """Section 5: per run (``{name: summary}``), its median step, the MB a rank sends per step,
    and the parameter bytes each rank holds ("-" for a rank the run does not have)."""
    ranks = max(s["world_size"] for s in runs.values())
    columns = [tr("run"), tr("median step (ms)"), tr("sent per step (MB)")] + [
        tr("parameters, rank {rank} (MB)", rank=r) for r in range(ranks)]
    rows = []
    for name, s in runs.items():
        held = s["mem_by_category"]["params"]
        rows.append([tr(name), tr("not measured") if s["step_time_s"] is None
                     else f"{s['step_time_s'] * 1e3:.0f}", _mb(s["comm_wire_bytes_per_step"])]
                    + [_mb(held[r]) if r < len(held) else "-" for r in range(ranks)])
    return columns, rows


def ep_verdict(single: dict, ep: dict, single_times: list, ep_times: list, cores: int,
               busier: list[float], tolerance: float = 0.05) -> tuple[str, str, str]:
    """Section 5: ep=2's median step against the one rank's, weighed against the noise (a
    difference within the larger of the runs' step-to-step spreads (:func:`step_spread`) and
    ``tolerance`` of the shorter step reads as "about as long"), and per core used (each CPU
    rank computes on one thread).
    ``busier``: per step, the busier ep rank's share of the experts' kept slots."""
    one, two = single["step_time_s"], ep["step_time_s"]
    used = min(ep["world_size"], cores)
    details = [tr("the busier rank's share of the experts' kept slots, step by step (50% is an "
                  "even split): {shares}", shares=", ".join(f"{s:.0%}" for s in busier)),
               tr("the two runs were not made side by side: a change in the machine's load is "
                  "in the ratio too")]
    if one is None or two is None or not single_times or not ep_times:
        return tr("A run had no steady step: no step times to compare"), "\n".join(details), \
            "mixed"
    spread = max(step_spread(t) for t in (single_times, ep_times))
    band = max(spread, tolerance * min(one, two))
    ratio = two / one
    details.insert(0, tr("median steady step: one rank {one:.0f} ms, ep=2 {two:.0f} ms; "
                         "step-to-step spread (the range of the middle half of the steady steps) "
                         "up to {spread:.0f} ms; a difference within that and {tol:.0%} reads as "
                         "about as long",
                         one=one * 1e3, two=two * 1e3, spread=spread * 1e3, tol=tolerance))
    if used > 1:
        cores_words = tr("ep=2 had {used} cores to compute on, the one rank one: per core, "
                         "{per_core:.2f}x the one rank's time", used=used, per_core=ratio * used)
    else:
        cores_words = tr("both ranks shared this machine's one usable core")
    words = dict(ratio=ratio, band=band * 1e3, cores=cores_words)
    if abs(two - one) <= band:
        return tr("ep=2's median step took about as long as the one rank's ({ratio:.2f}x, "
                  "within these runs' noise of {band:.0f} ms); {cores}", **words), \
            "\n".join(details), "mixed"
    if two < one:
        return tr("ep=2's median step was faster than the one rank's, {ratio:.2f}x its time; "
                  "{cores}", **words), "\n".join(details), "good"
    return tr("ep=2's median step was slower than the one rank's, {ratio:.2f}x its time; "
              "{cores}", **words), "\n".join(details), "bad"


def mixtral_table(rows: list[dict], gpu) -> tuple[list[str], list[list]]:
    """Section 5 at scale: per layout (``gpus``, ``ep``, ``total``: model-state bytes per GPU),
    whether it fits ``gpu`` before any activation and what it leaves for them."""
    columns = [tr("GPUs"), tr("ep"), tr("model state per GPU (GB)"),
               tr("fits an {gpu}?", gpu=gpu.name), tr("left for activations (GB)")]
    return columns, [[r["gpus"], r["ep"], f"{r['total'] / 1e9:.1f}",
                      tr("yes") if r["total"] <= gpu.memory_bytes else tr("no"),
                      f"{(gpu.memory_bytes - r['total']) / 1e9:.0f}"
                      if r["total"] <= gpu.memory_bytes else "-"] for r in rows]


def mixtral_verdict(rows: list[dict], gpu, model: str = "Mixtral 8x7B") -> tuple[str, str, str]:
    """Section 5 at scale: the fewest GPUs (then the smallest ep) whose model state fits
    ``gpu``, or that none does."""
    fitting = sorted((r for r in rows if r["total"] <= gpu.memory_bytes),
                     key=lambda r: (r["gpus"], r["ep"]))
    details = tr("model state: bf16 weights and gradients and Adam's fp32 state, 16 bytes per "
                 "parameter, ZeRO-1 over the data-parallel ranks; activations come on top")
    if not fitting:
        return tr("None of these layouts fits {model}'s model state in an {gpu}", model=model,
                  gpu=gpu.name), details, "bad"
    best = fitting[0]
    return tr("The fewest GPUs here that fit {model}'s model state in an {gpu}: {gpus} with "
              "ep={ep}, {gb:.1f} GB each, {left:.0f} GB left for activations", model=model,
              gpu=gpu.name, gpus=best["gpus"], ep=best["ep"], gb=best["total"] / 1e9,
              left=(gpu.memory_bytes - best["total"]) / 1e9), details, "good"
