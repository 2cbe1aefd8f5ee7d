"""Lesson 03b's figures and verdicts, from the records of ``training.run_wrapped`` and the
one-process reference (``training.one_process``): the losses per rank and per wrapper, the
bytes each rank holds and sends, and what an unused parameter did to each wrapper. Every sentence
is chosen from the numbers; a byte count torch's wrappers leave uncounted reads "not measured".
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr

Verdict = tuple[str, str, str]
HELD_KINDS = ("params", "grads", "optimizer")
WRAPPER_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f")   # one per wrapper, the same in every panel


def _global_losses(records: list[dict]) -> list[float]:
    """The loss of the whole global batch: the mean of the ranks' (equal shares)."""
    return list(np.mean([r["losses"] for r in records], axis=0))


def parameter_gap(records: list[dict], one: dict) -> float:
    """The largest difference of any final parameter from one process's. A wrapping that did
    not train (its ranks recorded an error) is named with each rank's error."""
    mine = next((r["params"] for r in records if r and r.get("params") is not None), None)
    if mine is None:
        errors = "; ".join(f"rank {r['rank']}: {r['error']}" for r in records
                           if r and r.get("error"))
        raise RuntimeError(tr("{wrapper} did not train in its ranks: {errors}",
                              wrapper=next((r["wrapper"] for r in records if r), "?"),
                              errors=errors or tr("no rank reported")))
    return max(float(np.abs(np.asarray(mine[n]) - np.asarray(v)).max())
               for n, v in one["params"].items())


ZERO_DRAWN_AT = 1e-12   # a gap of exactly 0 has no place on a log axis: drawn here, labelled "0"


def loss_gaps(runs: dict[str, list[dict]], one: dict) -> dict[str, list[float]]:
    """Each wrapper's |mean of the ranks' losses − one process's loss|, per step."""
    return {name: [abs(a - b) for a, b in zip(_global_losses(records), one["losses"])]
            for name, records in runs.items()}


def gap_note(gaps: dict[str, list[float]]) -> str:
    """What the gap panel cannot show by itself: zeros drawn at ZERO_DRAWN_AT, and wrappers
    whose gaps are equal at every step (their lines coincide: only the last drawn shows)."""
    notes = []
    if any(g == 0 for values in gaps.values() for g in values):
        notes.append(tr("a gap of exactly 0 is drawn at {at:g}, labelled 0", at=ZERO_DRAWN_AT))
    groups: dict[tuple, list[str]] = {}
    for name, values in gaps.items():
        groups.setdefault(tuple(values), []).append(name)
    for names in groups.values():
        if len(names) > 1:
            notes.append(tr("{names}: equal gaps at every step, their lines coincide (the last "
                            "drawn shows)", names=", ".join(names)))
    return "; ".join(notes)


def loss_figure(runs: dict[str, list[dict]], one: dict) -> go.Figure:
    """Left: each wrapper's loss on each rank's share, and one process's on the whole batch.
    Right: each wrapper's mean over the ranks less one process's, per step (log scale), with a
    note saying which lines coincide and where a zero is drawn (:func:`gap_note`)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(
        tr("loss per rank (lines) and one process (black)"),
        tr("|mean over the ranks − one process|")))
    steps = list(range(1, len(one["losses"]) + 1))
    gaps = loss_gaps(runs, one)
    for (name, records), colour in zip(runs.items(), WRAPPER_COLOURS):
        for r in records:
            fig.add_trace(go.Scatter(x=steps, y=r["losses"], mode="lines",
                                     name=f"{name}, {tr('rank')} {r['rank']}",
                                     line={"dash": "dot" if r["rank"] else "solid",
                                           "color": colour}, legendgroup=name), row=1, col=1)
        fig.add_trace(go.Scatter(x=steps, y=[g or ZERO_DRAWN_AT for g in gaps[name]],
                                 text=["0" if g == 0 else "" for g in gaps[name]],
                                 mode="markers+lines+text", textposition="top center", name=name,
                                 line={"color": colour}, legendgroup=name, showlegend=False),
                      row=1, col=2)
    note = gap_note(gaps)
    if note:
        fig.add_annotation(text=note, xref="paper", yref="paper", x=1, y=-0.22, showarrow=False,
                           xanchor="right", font={"size": 11})
    fig.add_trace(go.Scatter(x=steps, y=one["losses"], mode="lines+markers",
                             name=tr("one process"), line={"color": "black", "width": 3}),
                  row=1, col=1)
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_xaxes(title_text=tr("step"))
    fig.update_layout(height=460, margin={"b": 110},
                      title=tr("The same training, wrapped {n} ways", n=len(runs)))
    return fig


def training_verdict(runs: dict[str, list[dict]], one: dict, tolerance: float) -> Verdict:
    """Whether every wrapper's final parameters are within ``tolerance`` of one process's."""
    gaps = {name: parameter_gap(records, one) for name, records in runs.items()}
    details = "\n".join(tr("{name}: largest parameter difference from one process after {steps} "
                           "steps: {gap:.1e}", name=name, gap=gap, steps=len(one["losses"]))
                        for name, gap in gaps.items())
    worst = max(gaps, key=gaps.get)
    if gaps[worst] <= tolerance:
        return (tr("All {n} wrappers trained your model as one process does: every parameter "
                   "within {gap:.1e} of it (at most {tolerance:g} allowed)", n=len(gaps),
                   gap=gaps[worst], tolerance=tolerance), details, "good")
    return (tr("{name} ended {gap:.1e} away from one process, more than {tolerance:g}",
               name=worst, gap=gaps[worst], tolerance=tolerance), details, "bad")


def bytes_figure(runs: dict[str, list[dict]], one: dict) -> go.Figure:
    """Left: bytes each rank holds after the last step, by kind, one bar per wrapper and rank,
    with one process's total as a line. Right: bytes each rank sent in the last step."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], subplot_titles=(
        tr("bytes held per rank: parameters + gradients + optimizer state"),
        tr("bytes each rank sends in one step, by the ring formula")))
    labels = [f"{name} · r{r['rank']}" for name, records in runs.items() for r in records]
    for kind, colour in zip(HELD_KINDS, WRAPPER_COLOURS):
        fig.add_trace(go.Bar(x=labels, y=[r["held"][kind] for rs in runs.values() for r in rs],
                             name=tr(kind), marker_color=colour), row=1, col=1)
    fig.add_hline(y=sum(one["held"].values()), line_dash="dash", row=1, col=1,
                  annotation_text=tr("one process"))
    sent = [r["sent"]["wire"] if r["sent"] else 0 for rs in runs.values() for r in rs]
    text = ["" if r["sent"] else tr("not measured") for rs in runs.values() for r in rs]
    fig.add_trace(go.Bar(x=labels, y=sent, text=text, name=tr("sent"), showlegend=False,
                         marker_color="grey"), row=1, col=2)
    fig.update_layout(barmode="stack", height=460)
    fig.update_yaxes(title_text=tr("bytes"))
    return fig


def _sent(records: list[dict]) -> float | None:
    """The most any rank sent in the last step (ring formula), None where nothing counted it."""
    return max(r["sent"]["wire"] for r in records) if records[0]["sent"] else None


def sent_words(sent: float | None, reference: str | None, reference_sent: float | None) -> str:
    """Bytes sent, and their ratio to the first measured wrapper's, in words chosen from it."""
    if sent is None:
        return tr("not measured")
    words = tr("{sent:,.0f} bytes", sent=sent)
    if reference is None or reference_sent is None or not reference_sent:
        return words
    ratio = sent / reference_sent
    if abs(ratio - 1) < 0.005:
        return tr("{words}, the same as {reference}'s", words=words, reference=reference)
    return tr("{words}, {ratio:.2f}× {reference}'s", words=words, ratio=ratio,
              reference=reference)


def bytes_lines(runs: dict[str, list[dict]], one: dict) -> list[str]:
    """One line per wrapper: what its ranks hold against one process, and what each sent, as a
    ratio of the first wrapper whose bytes were counted (the lesson's DataParallel)."""
    whole = sum(one["held"].values())
    measured = [(name, _sent(records)) for name, records in runs.items()
                if _sent(records) is not None]
    reference, reference_sent = measured[0] if measured else (None, None)
    lines = []
    for name, records in runs.items():
        held = [sum(r["held"].values()) for r in records]
        sent = _sent(records)
        lines.append(tr("{name}: ranks hold {held} bytes ({share} of one process's {whole:,}); "
                        "sent by each rank in the last step: {sent}", name=name,
                        held=" / ".join(f"{h:,}" for h in held),
                        share=" / ".join(f"{h / whole:.0%}" for h in held), whole=whole,
                        sent=sent_words(sent, None if name == reference else reference,
                                        reference_sent)))
    return lines


def unused_lines(runs: dict[str, list[dict]]) -> list[str]:
    """One line per wrapper: the error its ranks raised, or that it trained."""
    out = []
    for name, records in runs.items():
        error = records[0].get("error")
        out.append(tr("{name}: {outcome}", name=name, outcome=error[:400] if error else tr(
            "trained {steps} steps, final loss {loss:.4f}", steps=len(records[0]["losses"]),
            loss=float(np.mean([r["losses"][-1] for r in records])))))
    return out
