"""Why an estimate is what it is, in words: what fills the memory and whether it fits, where a
step's time goes, the link it waits on, what it costs, and the assumptions it was made with.

:func:`gpututor.plan.recommend.estimate` makes the numbers and calls :func:`reasons`; the
sentences go through :func:`gpututor.i18n.tr`, so a Chinese notebook reads them in Chinese.
:func:`headline` says the answer in one sentence and :func:`breakdown` gives its numbers as a
table row, for a notebook (``Estimate.show``); the reasons are their details.
"""
from __future__ import annotations

from ..catalog import GB, money, price_text
from ..i18n import tr


def _gb(x: float) -> str:
    return f"{x / GB:,.1f} GB"


def waiting_seconds(step: dict) -> float:
    """The seconds of a step (``Estimate.step``) spent waiting on links: tensor and pipeline
    parallel's traffic and what backward does not hide of data parallel's."""
    return step["tp_comm_s"] + step["pp_comm_s"] + step["dp_exposed_s"]


def memory_line(est, gpu) -> str:
    """The first reason: the memory per GPU by category, against the usable memory of ``gpu``."""
    m, gb = est.memory, _gb
    memory = dict(params=gb(m["params"]), grads=gb(m["grads"]), optimizer=gb(m["optimizer"]),
                  activations=gb(m["activations"]), total=gb(m["total"]),
                  usable=gb(est.usable_bytes), memory=gb(gpu.memory_bytes),
                  share=f"{est.usable_bytes / gpu.memory_bytes:.0%}")
    return (tr("fits in memory: per GPU parameters {params}, gradients {grads}, optimizer "
               "{optimizer}, activations {activations}: {total} of {usable} usable ({memory} x "
               "{share})", **memory) if est.fits else
            tr("does not fit in memory: per GPU parameters {params}, gradients {grads}, "
               "optimizer {optimizer}, activations {activations}: {total} of {usable} usable "
               "({memory} x {share})", **memory))


def reasons(est, gpu, links: dict) -> list[str]:
    """Why ``est`` (a ``recommend.Estimate`` for ``gpu``) is what it is, in words, in the
    notebook's language; ``links``: the link each kind of traffic crosses ("tensor-parallel",
    "pipeline", "data-parallel")."""
    m, c, s = est.memory, est.config, est.step
    out = [memory_line(est, gpu)]
    if not est.fits:
        held = m["params"] + m["grads"] + m["optimizer"]
        states = _gb(held)
        if held > est.usable_bytes:
            out.append(tr("why it does not fit: the model states alone ({states}) exceed the GPU; "
                          "shard them (a higher ZeRO stage), add GPUs, or split the model "
                          "(tensor/pipeline parallel)", states=states) if c.zero_stage < 3 else
                       tr("why it does not fit: the model states alone ({states}) exceed the GPU; "
                          "add GPUs, or split the model (tensor/pipeline parallel)", states=states))
        else:
            out.append(tr("why it does not fit: activations ({activations}) push it over; use "
                          "recomputation, a smaller micro-batch, or tensor/pipeline parallel",
                          activations=_gb(m["activations"])))
    unfit = "" if est.fits else tr(" (if it fitted: it does not)")
    compute, comm = s["compute_s"], waiting_seconds(s)
    bubble = tr(", pipeline bubble {bubble:.3g} s", bubble=s["bubble_s"]) if s["bubble_s"] else ""
    out.append(tr("step: compute {compute:.3g} s, waiting on links {comm:.3g} s{bubble}; {steps:,} "
                  "steps = {days:,.1f} days{unfit}", compute=compute, comm=comm, bubble=bubble,
                  steps=est.steps, days=est.days, unfit=unfit))
    if est.link_bound:   # name the link of the largest part of the wait
        waits = {"tensor-parallel": s["tp_comm_s"], "pipeline": s["pp_comm_s"],
                 "data-parallel": s["dp_exposed_s"]}
        kind = max(waits, key=waits.get)
        out.append(tr("link-bound: {share:.0%} of each step waits on communication, most of it "
                      "{kind} traffic over {link}; more GPUs would not help much, a faster link "
                      "would", share=comm / s["step_s"], kind=tr(kind), link=links[kind].name))
    if est.cost is not None:
        out.append(tr("cost: {cost} at {price}/GPU-hour ({source}){unfit}", cost=money(est.cost),
                      price=price_text(est.price_per_hour), source=tr(est.price_source), unfit=unfit))
    else:
        src = est.price_source
        out.append(tr("cost: {source}", source=tr(src)) if src.startswith("not priced") else
                   tr("cost: not priced ({source})", source=tr(src)))
    a = est.assumptions
    parallel = tr("sequence parallel with tensor parallel (the layer norms' and dropouts' "
                  "activations split over the tensor-parallel GPUs), ") \
        if a["sequence_parallel"] else ""
    attention = tr("causal attention (half the s×s square)") if a["causal_attention"] else \
        tr("full s×s attention")
    out.append(tr("assumed: {hfu:.0%} of peak on all it computes (HFU; MFU of the step {mfu:.0%}), "
                  "{tokens:,.0f} tokens per step, links at {efficiency:.0%} of their rate, "
                  "{overlap:.0%} of backward hiding data-parallel traffic, {parallel}{attention}",
                  hfu=a["hfu"], mfu=s["mfu"], tokens=a["tokens_per_step"],
                  efficiency=a["comm_efficiency"], overlap=a["overlap"], parallel=parallel,
                  attention=attention))
    return out


def headline(est) -> tuple[str, str]:
    """``(sentence, tone)``: whether ``est`` fits and, if not, what pushes it over (the model
    states alone, or the activations); if it fits, its days and cost, and whether the link
    limits it. Tone "good" (fits), "mixed" (fits, link-bound), "bad" (does not fit)."""
    m = est.memory
    sizes = dict(total=_gb(m["total"]), usable=_gb(est.usable_bytes))
    held = m["params"] + m["grads"] + m["optimizer"]
    if not est.fits and held > est.usable_bytes:
        return tr("Does not fit: {total} per GPU of {usable} usable; the model states alone "
                  "({states}) exceed it", states=_gb(held), **sizes), "bad"
    if not est.fits:
        return tr("Does not fit: {total} per GPU of {usable} usable; the activations "
                  "({activations}) push it over", activations=_gb(m["activations"]),
                  **sizes), "bad"
    when = dict(days=est.days, cost=money(est.cost) if est.cost is not None else tr("not priced"))
    if est.link_bound:
        return tr("Fits: {total} per GPU of {usable} usable; {days:,.1f} days, {cost}; "
                  "link-bound, {share:.0%} of each step waits on links",
                  share=waiting_seconds(est.step) / est.step["step_s"], **sizes, **when), "mixed"
    return tr("Fits: {total} per GPU of {usable} usable; {days:,.1f} days, {cost}",
              **sizes, **when), "good"


def breakdown(est) -> tuple[list[str], list[list[str]]]:
    """``est``'s numbers as a table of one row: memory per GPU by category and the usable
    memory (GB), and a step's time: compute, waiting on links, the pipeline bubble (where there
    is one) and the whole step (seconds)."""
    m, s = est.memory, est.step
    columns = [tr("parameters GB"), tr("gradients GB"), tr("optimizer GB"), tr("activations GB"),
               tr("total GB"), tr("usable GB"), tr("compute s"), tr("waiting on links s")]
    row = [f"{m[k] / GB:,.1f}" for k in ("params", "grads", "optimizer", "activations", "total")]
    row += [f"{est.usable_bytes / GB:,.1f}", f"{s['compute_s']:.3g}",
            f"{waiting_seconds(s):.3g}"]
    if s["bubble_s"]:
        columns.append(tr("pipeline bubble s"))
        row.append(f"{s['bubble_s']:.3g}")
    return columns + [tr("step s")], [row + [f"{s['step_s']:.3g}"]]
