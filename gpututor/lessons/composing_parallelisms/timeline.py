"""Section 5's ``ddp+tp`` step on one clock, read from its spans (``RunSpec(timeline=True)``):
which all-reduces were data parallel's and which tensor parallel's, how many bytes and how long
each kind took, and how much of data parallel's ran while backward was still running.

A span names its collective and its group's size, not the grid dim it ran on (in ``dp=2, tp=2``
both groups have 2 ranks), so data parallel's are found from DDP's own list of the buckets it
launched that step (the record's ``ddp_buckets``: each bucket's bytes and how long before the
last gradient it was launched); every other collective of a ``ddp+tp`` step is tensor
parallel's. Nothing here launches or draws.
"""
from __future__ import annotations

from ...formulas import MB
from ...i18n import tr
from ...parallel.data_parallel.ddp import WAIT_SPAN

Verdict = tuple[str, str, str]


def _overlap(span: dict, start: float, end: float) -> float:
    """Seconds of ``span`` between ``start`` and ``end``."""
    return max(0.0, min(span["end"], end) - max(span["start"], start))


def split_collectives(record: dict) -> dict[str, list[dict]] | None:
    """One rank's step record of a ``ddp+tp`` run: its collective spans as ``{"dp": [...],
    "tp": [...]}``. Each bucket DDP listed is matched to the collective of its bytes that
    started nearest to its launch (the last gradient's time less ``before_last_grad_s``); the
    rest are tensor parallel's. None when the step has no timeline, no DDP bucket, or a bucket
    no collective matches."""
    spans, buckets = record.get("timeline"), record.get("ddp_buckets")
    if not spans or not buckets:
        return None
    waits = [s for s in spans if s["kind"] == "compute" and s["name"] == WAIT_SPAN]
    if not waits:
        return None
    last_grad = waits[-1]["start"]
    free = [s for s in spans if s["kind"] == "collective"]
    dp = []
    for bucket in buckets:
        launched = last_grad - bucket["before_last_grad_s"]
        same = [s for s in free if s["bytes"] == bucket["bytes"]]
        if not same:
            return None
        match = min(same, key=lambda s: abs(s["start"] - launched))
        free.remove(match)
        dp.append(match)
    return {"dp": sorted(dp, key=lambda s: s["start"]), "tp": free}


def rank_summary(record: dict) -> dict | None:
    """One rank's step: its extent (first span's start to last span's end), backward's extent,
    and per kind (``"dp"``, ``"tp"``) the collectives' count, bytes, seconds and group size;
    for ``"dp"`` also the seconds under backward and the seconds compute then waited."""
    kinds = split_collectives(record)
    spans = record.get("timeline") or []
    backward = [s for s in spans if s["kind"] == "compute" and s["name"] == "backward"]
    if kinds is None or not backward:
        return None
    bw_start, bw_end = min(s["start"] for s in backward), max(s["end"] for s in backward)
    out = {"start": min(s["start"] for s in spans), "end": max(s["end"] for s in spans),
           "backward": (bw_start, bw_end)}
    for kind, chosen in kinds.items():
        out[kind] = {"n": len(chosen), "bytes": sum(s["bytes"] or 0 for s in chosen),
                     "busy": sum(s["end"] - s["start"] for s in chosen),
                     "group": max((s["group"] or 0 for s in chosen), default=0)}
    out["dp"]["under"] = sum(_overlap(s, bw_start, bw_end) for s in kinds["dp"])
    out["dp"]["waited"] = sum(s["end"] - s["start"] for s in spans if s["name"] == WAIT_SPAN)
    return out


def composed_timeline_verdict(records: list[dict], how_it_ran: str = "") -> Verdict:
    """The last step with a timeline of a ``ddp+tp`` run, every rank on one clock (ms from the
    first span of any rank, as ``step_timeline`` draws it). The headline reads the rank whose
    backward ended last (its data-parallel bars are the nearest to the link's own time, as in
    lesson 02); the details give every rank, after ``how_it_ran`` (:func:`.results.ran_on`). A
    bar includes the time its collective waited for the other ranks of its group."""
    timed = [r for r in records if r.get("timeline")]
    if not timed:
        return tr("this run recorded no timeline (RunSpec(timeline=True))"), "", "mixed"
    step = max(r["step"] for r in timed)
    ranks = {r["rank"]: rank_summary(r) for r in timed if r["step"] == step}
    if any(v is None for v in ranks.values()):
        return (tr("step {step} recorded no backward or no data-parallel bucket on some rank: "
                   "this verdict reads a ddp+tp run", step=step), "", "mixed")
    origin = min(o["start"] for o in ranks.values())
    ms = lambda t: f"{(t - origin) * 1e3:.1f}"   # noqa: E731
    details = [how_it_ran] if how_it_ran else []
    for rank, o in sorted(ranks.items()):
        tp, dp = o["tp"], o["dp"]
        details.append(tr("rank {rank}: step {a} to {b} ms, backward {c} to {d} ms", rank=rank,
                          a=ms(o["start"]), b=ms(o["end"]), c=ms(o["backward"][0]),
                          d=ms(o["backward"][1])))
        details.append(tr("  tensor parallel (groups of {g}): {n} all-reduces, {mb:.2f} MB of "
                          "messages in all, {busy:.1f} ms", g=tp["group"], n=tp["n"], mb=tp["bytes"] / MB,
                          busy=tp["busy"] * 1e3))
        details.append(tr("  data parallel (groups of {g}): {n} all-reduces, {mb:.2f} MB of "
                          "messages in all, {busy:.1f} ms, {under:.1f} ms of it while backward was still "
                          "running; then compute waited {waited:.1f} ms", g=dp["group"],
                          n=dp["n"], mb=dp["bytes"] / MB, busy=dp["busy"] * 1e3,
                          under=dp["under"] * 1e3, waited=dp["waited"] * 1e3))
    details.append(tr("ms from the start of the figure. Data parallel's all-reduces are the "
                      "buckets DDP listed that step (matched by bytes and launch time), every "
                      "other one is tensor parallel's. A bar includes the time the collective "
                      "waited for the other ranks of its group."))
    late = max(ranks, key=lambda r: ranks[r]["backward"][1])
    o = ranks[late]
    length = o["end"] - o["start"]
    stood = o["tp"]["busy"] + o["dp"]["waited"]   # compute needed these results to go on
    headline = tr(
        "In step {step}, on rank {rank}, whose backward ended last: {tp_n} tensor-parallel "
        "all-reduces ({tp_mb:.2f} MB of messages), whose results compute needed before it could go on, took {tp_ms:.1f} ms of its "
        "{step_ms:.1f} ms step ({tp_share:.0%}); {dp_n} data-parallel all-reduces of the gradients "
        "({dp_mb:.2f} MB of messages) took {dp_ms:.1f} ms, {under:.1f} ms of it while backward was still "
        "running, and compute then waited {waited:.1f} ms for them",
        step=step, rank=late, tp_n=o["tp"]["n"], tp_mb=o["tp"]["bytes"] / MB,
        tp_ms=o["tp"]["busy"] * 1e3, step_ms=length * 1e3,
        tp_share=o["tp"]["busy"] / length if length > 0 else 0.0, dp_n=o["dp"]["n"],
        dp_mb=o["dp"]["bytes"] / MB, dp_ms=o["dp"]["busy"] * 1e3, under=o["dp"]["under"] * 1e3,
        waited=o["dp"]["waited"] * 1e3)
    share = stood / length if length > 0 else 0.0
    return headline, "\n".join(details), "good" if share < 0.2 else "mixed" if share < 0.5 \
        else "bad"
