"""Section 5's ``ddp+tp`` step on one clock, read from its spans (``RunSpec(timeline=True)``):
which all-reduces were data parallel's and which tensor parallel's, how many bytes and how long
each kind took, and how much of data parallel's ran while backward was still running.

A span names its collective and its group's size, not the grid dim it ran on (in ``dp=2, tp=2``
both groups have 2 ranks), so data parallel's are found from DDP's own list of the buckets it
launched that step (the record's ``ddp_buckets``), by launch time: a bucket's launch mark is the
very mark its bar starts at (``parallel/data_parallel/ddp.py``). Its bytes are not compared: DDP
lists a bucket's gradient bytes, its bar carries the bytes sent, and a compressing comm hook
(fp16, bf16, PowerSGD) makes them differ. In this lesson's ``ddp+tp`` spec (DDP over ``dp``,
Megatron tensor parallel over ``tp``, nothing else communicating) every other collective is
tensor parallel's; a spec that adds collectives of its own would need its own split. Nothing
here launches or draws (:func:`.figures.composed_timeline_figure` draws).
"""
from __future__ import annotations

from statistics import median

from ...formulas import MB
from ...i18n import tr
from ...parallel.data_parallel.ddp import WAIT_SPAN
from ..common.devices import shares_cores
from ..common.timelines import last_timed_step
from .results import ran_on

Verdict = tuple[str, str, str]
MATCH_S = 1e-3   # the two marks agree to about a microsecond; this leaves room for rounding only
CALM = 0.2       # tone "good" when compute stood still for less than this share of the step
ALL_REDUCE_NAMES = {"dp": "all-reduce (data parallel)",   # the figure's names, by kind
                    "tp": "all-reduce (tensor parallel)"}


def _overlap(span: dict, start: float, end: float) -> float:
    """Seconds of ``span`` between ``start`` and ``end``."""
    return max(0.0, min(span["end"], end) - max(span["start"], start))


def split_collectives(record: dict) -> dict | None:
    """One rank's step record of a ``ddp+tp`` run: ``{"dp": [...], "tp": [...], "unmatched":
    [...]}``. Each bucket DDP listed takes the collective that started nearest its launch (the
    last gradient's time less ``before_last_grad_s``), within :data:`MATCH_S`; a bucket none
    started near goes to ``unmatched`` as ``(bytes, launch time)``; the rest are tensor
    parallel's. None when the step has no timeline, no DDP bucket or no wait span."""
    spans, buckets = record.get("timeline"), record.get("ddp_buckets")
    if not spans or not buckets:
        return None
    waits = [s for s in spans if s["kind"] == "compute" and s["name"] == WAIT_SPAN]
    if not waits:
        return None
    last_grad = waits[-1]["start"]
    free = [s for s in spans if s["kind"] == "collective"]
    dp, unmatched = [], []
    for bucket in buckets:
        launched = last_grad + bucket["launch_s"]
        match = min(free, key=lambda s: abs(s["start"] - launched), default=None)
        if match is None or abs(match["start"] - launched) > MATCH_S:
            unmatched.append((bucket["bytes"], launched))
            continue
        free.remove(match)
        dp.append(match)
    return {"dp": sorted(dp, key=lambda s: s["start"]), "tp": free, "unmatched": unmatched}


def rank_summary(record: dict) -> dict | None:
    """One rank's step: its extent (first span's start to last span's end), backward's extent,
    the buckets no collective matched, and per kind (``"dp"``, ``"tp"``) the collectives'
    count, bytes, seconds, shortest and median bar and group size; for ``"dp"`` also the
    seconds under backward and the seconds compute then waited."""
    kinds = split_collectives(record)
    spans = record.get("timeline") or []
    backward = [s for s in spans if s["kind"] == "compute" and s["name"] == "backward"]
    if kinds is None or not backward:
        return None
    bw_start, bw_end = min(s["start"] for s in backward), max(s["end"] for s in backward)
    out = {"start": min(s["start"] for s in spans), "end": max(s["end"] for s in spans),
           "backward": (bw_start, bw_end), "unmatched": kinds["unmatched"]}
    for kind in ("dp", "tp"):
        bars = [s["end"] - s["start"] for s in kinds[kind]]
        out[kind] = {"n": len(bars), "bytes": sum(s["bytes"] or 0 for s in kinds[kind]),
                     "busy": sum(bars), "shortest": min(bars, default=0.0),
                     "median": median(bars) if bars else 0.0,
                     "group": max((s["group"] or 0 for s in kinds[kind]), default=0)}
    out["dp"]["under"] = sum(_overlap(s, bw_start, bw_end) for s in kinds["dp"])
    out["dp"]["waited"] = sum(s["end"] - s["start"] for s in spans if s["name"] == WAIT_SPAN)
    return out


def labelled_records(records: list[dict], step: int) -> list[dict]:
    """Copies of ``step``'s records whose collective spans are named by kind
    (:data:`ALL_REDUCE_NAMES`, by the split :func:`split_collectives` makes), for the figure; a
    rank whose split fails keeps its names. The records themselves are left as they were."""
    out = []
    for record in records:
        if record.get("step") != step or not record.get("timeline"):
            continue
        record = {**record, "timeline": [dict(span) for span in record["timeline"]]}
        kinds = split_collectives(record)
        for kind in ("dp", "tp") if kinds else ():
            for span in kinds[kind]:
                span["name"] = ALL_REDUCE_NAMES[kind]
        out.append(record)
    return out


def _kind_line(kind: str, o: dict) -> str:
    k = o[kind]
    words = dict(g=k["group"], n=k["n"], mb=k["bytes"] / MB, busy=k["busy"] * 1e3,
                 low=k["shortest"] * 1e3, mid=k["median"] * 1e3)
    if kind == "tp":
        return tr("  tensor parallel (groups of {g}): {n} all-reduces, {mb:.2f} MB of messages "
                  "in all, {busy:.1f} ms (bars: shortest {low:.2f} ms, median {mid:.2f} ms)",
                  **words)
    return tr("  data parallel (groups of {g}): {n} all-reduces, {mb:.2f} MB of messages in all, "
              "{busy:.1f} ms (bars: shortest {low:.2f} ms, median {mid:.2f} ms), {under:.1f} ms "
              "of it while backward was still running; then compute waited {waited:.1f} ms",
              under=k["under"] * 1e3, waited=k["waited"] * 1e3, **words)


def composed_timeline_verdict(records: list[dict], step: int | None = None,
                              run: dict | None = None, cores: int | None = None) -> Verdict:
    """``step`` (default: the last with a timeline) of a ``ddp+tp`` run, every rank on one clock
    (ms from the first span of any rank, as the figure draws it). The headline reads the rank
    with the least time in tensor-parallel all-reduces (each bar also holds its rank's wait for a
    later partner, and, where ranks share cores, for a core: this rank had the least of it; which
    rank arrives first changes from one all-reduce to the next); the details give every rank, after how ``run``'s ranks ran on
    ``cores`` (:func:`.results.ran_on`). Tone: "good" when compute stood still (tensor
    parallel's all-reduces plus the wait for DDP) under :data:`CALM` of the step, else "mixed";
    "mixed" whenever ranks share cores."""
    last = last_timed_step(records, step)
    if last is None:
        return tr("this run recorded no timeline (RunSpec(timeline=True))"), "", "mixed"
    step, timed = last
    ranks = {r["rank"]: rank_summary(r) for r in timed}
    if not ranks or any(v is None for v in ranks.values()):
        return (tr("step {step} recorded no backward or no data-parallel bucket on some rank: "
                   "this verdict reads a ddp+tp run", step=step), "", "mixed")
    origin = min(o["start"] for o in ranks.values())
    ms = lambda t: f"{(t - origin) * 1e3:.1f}"   # noqa: E731
    lost = [(rank, *u) for rank, o in sorted(ranks.items()) for u in o["unmatched"]]
    if lost:
        rank, nbytes, launched = lost[0]
        return (tr("In step {step}, on rank {rank}, a bucket of {nbytes} bytes launched at {t} ms "
                   "matched no all-reduce (none started within {tol:.0f} ms of it): the two kinds "
                   "of all-reduce cannot be told apart in this step", step=step, rank=rank,
                   nbytes=nbytes, t=ms(launched), tol=MATCH_S * 1e3), "", "mixed")
    shared = run is not None and cores is not None and shares_cores(run["device"], run["world_size"], cores)
    details = [ran_on(run, cores)] if run is not None and cores is not None else []
    for rank, o in sorted(ranks.items()):
        details.append(tr("rank {rank}: step {a} to {b} ms, backward {c} to {d} ms", rank=rank,
                          a=ms(o["start"]), b=ms(o["end"]), c=ms(o["backward"][0]),
                          d=ms(o["backward"][1])))
        details += [_kind_line("tp", o), _kind_line("dp", o)]
    details.append(tr(
        "ms from the start of the figure. Data parallel's all-reduces are the buckets DDP listed "
        "that step, matched by launch time; in this lesson's ddp+tp run every other one is "
        "tensor parallel's. A bar includes the time the collective waited for the other ranks "
        "of its group (and, where ranks share cores, for a core); which rank arrives first "
        "changes from one all-reduce to the next, so the headline reads the rank with the least "
        "time in tensor-parallel all-reduces: the least of that waiting. The verdict is "
        "green when compute stood still (tensor parallel's all-reduces plus the wait for DDP) "
        "for less than {calm:.0%} of the step, amber otherwise, and amber wherever ranks share "
        "cores. One step of one run: rerun and it moves.", calm=CALM))
    late = min(ranks, key=lambda r: ranks[r]["tp"]["busy"])   # the least waiting in its bars
    o = ranks[late]
    length = o["end"] - o["start"]
    share = (o["tp"]["busy"] + o["dp"]["waited"]) / length if length > 0 else 0.0
    headline = tr(
        "In step {step}, on rank {rank}, the rank with the least time in tensor-parallel "
        "all-reduces (each bar also holds waiting for a later rank; this rank had the least of "
        "it): {tp_n} tensor-parallel all-reduces "
        "({tp_mb:.2f} MB of messages), whose results compute needed before it could go on, took "
        "{tp_ms:.1f} ms of its {step_ms:.1f} ms step; {dp_n} data-parallel all-reduces of the "
        "gradients ({dp_mb:.2f} MB of messages) took {dp_ms:.1f} ms, {under:.1f} ms of it while "
        "backward was still running; from the last gradient until backward() returned (DDP's "
        "last bucket reduced and copied back into the gradients) compute waited {waited:.1f} ms. "
        "Compute stood still for {share:.0%} of the step",
        step=step, rank=late, tp_n=o["tp"]["n"], tp_mb=o["tp"]["bytes"] / MB,
        tp_ms=o["tp"]["busy"] * 1e3, step_ms=length * 1e3, dp_n=o["dp"]["n"],
        dp_mb=o["dp"]["bytes"] / MB, dp_ms=o["dp"]["busy"] * 1e3, under=o["dp"]["under"] * 1e3,
        waited=o["dp"]["waited"] * 1e3, share=share)
    if shared:
        headline += tr(
            "; on shared cores these bars also hold the ranks taking turns on the cores: the "
            "shortest tensor-parallel bar, {low:.2f} ms, is the closest to the transfer itself",
            low=o["tp"]["shortest"] * 1e3)
    return headline, "\n".join(details), "good" if share < CALM and not shared else "mixed"
