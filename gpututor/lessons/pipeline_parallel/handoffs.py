"""Lesson 05's general-timeline verdict: what a pp step's spans say about its hand-offs, per rank."""
from __future__ import annotations

from typing import Optional

import torch

from ...i18n import ntr, tr
from ...parallel.pipeline.timeline import BUBBLE_GATHER
from ..common.devices import shares_cores

PASSES = ("forward", "backward")


def span_time(seconds: float) -> str:
    """A span's length as a learner reads it: µs under a millisecond (a GPU's hand-offs take tens
    of µs), else ms with two decimals."""
    us = round(seconds * 1e6)
    return f"{us} µs" if us < 1000 else f"{seconds * 1e3:.2f} ms"


def _stood_still(spans: list[dict]) -> dict:
    """One rank's step from its spans (``RunSpec(timeline=True)``): its hand-offs (``send_recv``:
    sends and receives posted together and the wait for the bytes waited for), any end-of-step
    wait for posted sends (``send_wait``, the posted sends' bytes), the bubble measure's gather,
    its passes, phases, and the step from first to last span."""
    took = lambda s: s["end"] - s["start"]   # noqa: E731
    named = lambda name: [s for s in spans if s["kind"] == "collective" and s["name"] == name]  # noqa: E731
    hands, waits = named("send_recv"), named("send_wait")
    phase = lambda name: sum(took(s) for s in spans if s["kind"] == "compute" and s["name"] == name)  # noqa: E731
    sizes: dict[int, list[float]] = {}
    for s in hands:
        if s["bytes"]:   # a posted send's exchange waited for no byte: its bytes are send_wait's
            sizes.setdefault(s["bytes"], []).append(took(s))
    return {"start": min(s["start"] for s in spans), "end": max(s["end"] for s in spans),
            "n": sum(1 for s in hands if s["bytes"]), "waits": len(waits), "wait_time": sum(map(took, waits)),
            # disjoint: with sends="post" an exchange's span holds only what it waited for
            "bytes": sum(s["bytes"] or 0 for s in hands + waits), "time": sum(map(took, hands)),
            "sizes": sizes, "gather": sum(map(took, named(BUBBLE_GATHER))),
            "passes": sum(phase(p) for p in PASSES), "sync": phase("sync"),
            "optimizer": phase("optimizer"), "covered": _covered(spans)}


def _covered(spans: list[dict]) -> float:
    """Seconds that at least one of ``spans`` covers (spans inside others count once)."""
    total, reach = 0.0, float("-inf")
    for s in sorted(spans, key=lambda s: s["start"]):
        total += max(0.0, s["end"] - max(s["start"], reach))
        reach = max(reach, s["end"])
    return total


def _what_a_handoff_holds(device: str, ranks: int, cores: int) -> str:
    """What a hand-off's time holds on ``device``: on CPU also the wait for a core (the ranks
    share the ``cores`` when they outnumber them; else other programs may take them)."""
    if torch.device(device).type == "cuda":
        return tr("the transfer and the wait for the neighbour together")
    if shares_cores(device, ranks, cores):
        return tr("the transfer, waiting for the neighbour and, with ranks sharing cores, "
                  "waiting for a core")
    return tr("the transfer, waiting for the neighbour and, on a busy machine, waiting for a "
              "core")


def handoffs_verdict(records: list[dict], step: int, shortest_s: Optional[float], device: str,
                     cores: int) -> tuple[str, str, str]:
    """Step ``step`` of a ``pp`` run with ``RunSpec(timeline=True)``, per rank: its hand-offs
    and end-of-step waits for posted sends, their bytes and time, the bubble measure's
    all_gather (on the last stage, the wait for the drain), and their share of the rank's step
    (first to last span). A hand-off's time is never called transfer time: the spans hold the
    waiting too; ``shortest_s`` (``handoff_s``, None if none was timed) bounds the transfer.
    ``device`` and usable CPU ``cores`` choose the words."""
    ranks = {r["rank"]: _stood_still(r["timeline"]) for r in records
             if r["step"] == step and r.get("timeline")}
    if not ranks:
        return tr("Step {step} recorded no timeline (RunSpec(timeline=True))", step=step), "", \
            "mixed"
    if not any(o["n"] for o in ranks.values()):
        return tr("In step {step} no rank recorded a hand-off (a pp-torch run's are not "
                  "metered)", step=step), "", "mixed"
    each = tr("; ").join(
        tr("rank {rank} in {handoffs}{waits} ({mb:.2f} MB sent and received) for {time}, and "
           "{gather} in all_gather (bubble measure): {share:.0%} of its step (first span to "
           "last, {step_time})", rank=rank, handoffs=ntr("{n} hand-off", "{n} hand-offs", o["n"]),
           waits=ntr(" and {n} end-of-step wait for posted sends",
                     " and {n} end-of-step waits for posted sends", o["waits"]) if o["waits"] else "",
           mb=o["bytes"] / 1e6, time=span_time(o["time"] + o["wait_time"]), gather=span_time(o["gather"]),
           share=(o["time"] + o["wait_time"] + o["gather"]) / (o["end"] - o["start"]),
           step_time=span_time(o["end"] - o["start"])) for rank, o in sorted(ranks.items()))
    said = tr("In step {step} the stages stood still: {each}. A hand-off's time is {holds}, "
              "which the spans do not tell apart", step=step, each=each,
              holds=_what_a_handoff_holds(device, len(ranks), cores))
    said += tr("; the shortest hand-off above ({shortest}) bounds the transfer",
               shortest=span_time(shortest_s)) if shortest_s is not None else \
        tr("; no hand-off was timed above to bound the transfer")
    sizes = {b for o in ranks.values() for b in o["sizes"]}
    size = max(sizes, key=lambda b: sum(len(o["sizes"].get(b, ())) for o in ranks.values()),
               default=None)
    same = [t for o in ranks.values() for t in o["sizes"].get(size, ())]
    if len(same) > 1:
        said += tr("; the {n} hand-offs of {mb:.2f} MB each took from {low} to {high}",
                   n=len(same), mb=size / 1e6, low=span_time(min(same)), high=span_time(max(same)))
    if len(ranks) > 1:
        said += tr(". On rank {rank}, the last stage, all_gather (bubble measure) is the wait for "
                   "the drain: it ends when stage 0's last backward does", rank=max(ranks))
    details = [tr("rank {rank}: step {step_time} (first span to last); forwards and backwards "
                  "{passes}, hand-offs {handoffs}{waits}, all_gather (bubble measure) "
                  "{gather}, sync {sync}, optimizer step {optimizer}; in no span {rest}",
                  rank=rank, step_time=span_time(o["end"] - o["start"]), passes=span_time(o["passes"]),
                  handoffs=span_time(o["time"]), waits=tr(", end-of-step waits for posted sends "
                                                      "{time}", time=span_time(o["wait_time"]))
                  if o["waits"] else "", gather=span_time(o["gather"]), sync=span_time(o["sync"]),
                  optimizer=span_time(o["optimizer"]),
                  rest=span_time(o["end"] - o["start"] - o["covered"]))
               for rank, o in sorted(ranks.items())]
    details.append(tr("A hand-off's bytes are those it waited for: its sends and receives, or "
                      "with sends=\"post\" on gloo its receives only (the posted sends' bytes are on the "
                      "end-of-step send_wait), so no byte is counted twice. all_gather (bubble "
                      "measure) is the stages exchanging their busy times to measure the "
                      "bubble (24 bytes, not a hand-off). The sync phase holds the step's "
                      "gradient all-reduces (in this lesson's pp runs, the tied embedding's, "
                      "between the first and the last stage), not hand-offs. One step of one "
                      "run: rerun and it moves."))
    return said, "\n".join(details), "mixed"
