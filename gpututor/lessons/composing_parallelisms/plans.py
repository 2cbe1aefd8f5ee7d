"""Lesson 09's planner, read against the runs and priced: how far the planner's predicted bytes
per rank were from the measured peaks, and what became of its pick (section 8); what a 70B model's
layout needs per GPU and how long its step takes with tensor parallel inside a node or across
nodes (section 9, the planner's formulas). Tables are ``(columns, rows)`` for ``show_table``,
verdicts ``(headline, details, tone)`` for ``show_verdict``, their words chosen from the numbers.
"""
from __future__ import annotations

from ...catalog import GB
from ...formulas import MB
from ...i18n import tr
from ...plan.layouts import HEADROOM
from .results import failure_words, grid_name, largest, names_of

# a measured peak within this share of its prediction: the formula predicted it closely
PEAK_CLOSE = 0.10
# a step this much longer (or shorter) than another reads as longer (shorter); between: the same
STEP_BAND = 0.05


def prediction_verdict(rows: list[dict], measured: dict) -> tuple[str, str, str]:
    """How far each run layout's largest measured peak was from the planner's prediction
    (``rows``: ``plan.layouts.predict_layouts``; ``measured``: layout -> summary or None): within
    :data:`PEAK_CLOSE`, within the room the planner's limit leaves (1/HEADROOM - 1), or beyond it."""
    miss = {}
    for row in rows:
        run = measured.get(row["layout"])
        peak = largest(run["peak_mem_bytes"]) if run else None
        if peak is not None:
            miss[row["layout"]] = peak / row["total"] - 1
    if not miss:
        return tr("No layout the planner predicts was run: nothing to compare."), "", "mixed"
    above = [n for n, m in miss.items() if m > 0]
    below = [n for n, m in miss.items() if m <= 0]
    lines = []
    if above:
        lines.append(tr("Above the prediction ({names}): the formulas leave out the temporaries "
                        "of single operations and, in the layouts that have them, DDP's gradient "
                        "buckets and the layer norms and embeddings that tensor parallel leaves "
                        "whole on every rank (exercise 3 works that part out from a measured run).",
                        names=names_of(above)))
    if below:
        lines.append(tr("At or below the prediction ({names}): the formula counted something "
                        "this implementation does not keep at that moment.",
                        names=names_of(below)))
    room = 1 / HEADROOM - 1
    lines.append(tr("The planner fills only {share:.0%} of the capacity, which leaves room for a "
                    "peak up to {room:.0%} above its prediction.", share=HEADROOM, room=room))
    worst = max(miss, key=lambda n: abs(miss[n]))
    words = dict(name=worst, miss=miss[worst], close=PEAK_CLOSE, room=room)
    if abs(miss[worst]) <= PEAK_CLOSE:
        return (tr("The formula predicted every measured peak within {close:.0%}: the largest "
                   "miss, {name}, {miss:+.0%}", **words), "\n".join(lines), "good")
    if max(miss.values()) <= room:
        return (tr("The formula's largest miss was {name}'s peak, {miss:+.0%}; none was over by "
                   "more than the {room:.0%} the planner's limit leaves", **words),
                "\n".join(lines), "mixed")
    over = max(miss, key=miss.get)
    return (tr("{name}'s measured peak was {miss:+.0%} over its prediction: more than the "
               "{room:.0%} the planner's limit leaves", name=over, miss=miss[over], room=room),
            "\n".join(lines), "bad")


def pick_verdict(pick: dict | None, outcome, capacity: float, world_size: int
                 ) -> tuple[str, str, str]:
    """What became of the planner's pick (``pick``: a row of ``predict_layouts`` or None) run
    under ``capacity``: ``outcome`` its summary, or the ``RunFailed`` it raised."""
    if pick is None:
        return (tr("The planner finds no layout on {n} ranks that fits this capacity",
                   n=world_size), "", "bad")
    words = dict(layout=pick["layout"], grid=grid_name(pick["mesh"]))
    details = tr("predicted {predicted:.1f} MB per rank; the planner's limit {limit:.1f} MB "
                 "({share:.0%} of the capacity)", predicted=pick["total"] / MB,
                 limit=HEADROOM * capacity / MB, share=HEADROOM)
    if isinstance(outcome, dict):
        peak = largest(outcome["peak_mem_bytes"])
        if peak is not None and peak <= capacity:
            return (tr("The planner picked {layout} on {grid}, and the run fit: largest peak "
                       "per rank {peak:.1f} MB of {capacity:.1f} MB", peak=peak / MB,
                       capacity=capacity / MB, **words), details, "good")
        return (tr("The planner picked {layout} on {grid}; the run finished, its peak not "
                   "measured", **words), details, "mixed")
    return (tr("The planner picked {layout} on {grid}, and the run did not fit", **words),
            failure_words(outcome) + "\n" + details, "bad")


# ---- section 9: a 70B model's layout, priced by the planner's formulas ---------------------------

def memory_table(memory: dict, usable: float) -> tuple[list, list]:
    """Bytes per GPU of each named variant of a layout (``memory``: name -> bytes), and whether
    each fits ``usable`` bytes."""
    return ([tr("70B, tp=8 × dp=8"), tr("GB per GPU"), tr("fits in {gb:.0f} GB", gb=usable / GB)],
            [[tr(name), f"{b / GB:.0f}", tr("yes") if b <= usable else tr("no")]
             for name, b in memory.items()])


def placement_table(times: dict) -> tuple[list, list]:
    """The step of each placement of the tensor-parallel groups (``times``: name ->
    ``plan.time.step_time``), by part, in seconds."""
    return ([tr("tensor-parallel groups"), tr("step (seconds)"), tr("compute (seconds)"),
             tr("tensor-parallel all-reduces (seconds)"), tr("data-parallel sync (seconds)"),
             tr("of it not hidden (seconds)")],
            [[tr(name), f"{t['step_s']:.1f}", f"{t['compute_s']:.1f}", f"{t['tp_comm_s']:.1f}",
              f"{t['dp_comm_s']:.1f}", f"{t['dp_exposed_s']:.1f}"] for name, t in times.items()])


def placement_verdict(inside: dict, across: dict) -> tuple[str, str, str]:
    """How much longer (or not) the step is with the tensor-parallel groups across nodes
    (``across``) than inside one (``inside``), both ``plan.time.step_time`` results."""
    ratio = across["step_s"] / inside["step_s"]
    words = dict(ratio=ratio, across=across["step_s"], inside=inside["step_s"])
    details = "\n".join([
        tr("Tensor parallel's all-reduces take {inside:.1f} s a step inside a node and {across:.1f} "
           "s across nodes; the formula puts them on the critical path, so all of it adds to the "
           "step.", inside=inside["tp_comm_s"], across=across["tp_comm_s"]),
        tr("Data parallel's gradient sync takes {inside:.1f} s on the links between nodes "
           "({inside_hidden:.1f} s of it not hidden behind backward) and {across:.1f} s inside a "
           "node ({across_hidden:.1f} s not hidden). The formula overlaps it with backward "
           "perfectly, so the figures not hidden are lower bounds.",
           inside=inside["dp_comm_s"], inside_hidden=inside["dp_exposed_s"],
           across=across["dp_comm_s"], across_hidden=across["dp_exposed_s"])])
    if ratio > 1 + STEP_BAND:
        return (tr("Tensor parallel across nodes makes the step {ratio:.1f}× as long: {across:.0f} "
                   "s against {inside:.0f} s inside a node", **words), details, "good")
    if ratio < 1 - STEP_BAND:
        return (tr("The formula finds tensor parallel across nodes faster: {across:.0f} s a step "
                   "against {inside:.0f} s inside a node", **words), details, "bad")
    return (tr("The formula finds about the same step either way: {across:.0f} s across nodes, "
               "{inside:.0f} s inside a node", **words), details, "mixed")
