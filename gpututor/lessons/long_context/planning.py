"""Lesson 10, section 5 at real scale: the planner's memory and step time for a few layouts of
one model, each with selective recomputation and, where that does not fit, with full
recomputation (the lever); the table and the verdict chosen from them. Formulas only: nothing
here is measured (``gpututor/plan/``)."""
from __future__ import annotations

from ...i18n import tr
from ...plan.memory import Transformer, per_device_memory
from ...plan.recommend import usable_bytes
from ...plan.time import step_time


def plan_layouts(model: Transformer, layouts: dict, gpus: int, gpu, link) -> list[dict]:
    """For each ``{name: degrees}`` of ``layouts`` (``tp``, ``cp``, ``zero_stage``,
    ``sequence_parallel``): bytes per GPU in all and of activations, the step time and its
    exposed communication with selective recomputation and a fused attention kernel, whether that
    fits the planner's share of ``gpu`` (:func:`usable_bytes`), and the same with full
    recomputation. Attention is priced causal (half its ``s×s`` square computed), as
    :func:`block_verdict` prices it: less attention compute also hides less of the cp ring."""
    rows = []
    for name, degrees in layouts.items():
        timed = {k: v for k, v in degrees.items() if k != "sequence_parallel"}
        plan = {}
        for recompute in ("selective", "full"):
            memory = per_device_memory(model, micro_batch=1, recompute=recompute,
                                       attention="fused", **degrees)
            time = step_time(model, model.seq_len, gpus, gpu.peak("bf16"), recompute=recompute,
                             tp_link=link, cp_link=link, dp_link=link, causal=True, **timed)
            plan[recompute] = {"total": memory["total"], "activations": memory["activations"],
                               "step_s": time["step_s"],
                               "comm_s": time["tp_comm_s"] + time["cp_exposed_s"]
                               + time["dp_exposed_s"],
                               "fits": memory["total"] <= usable_bytes(gpu)}
        rows.append({"layout": name, **plan})
    return rows


def layouts_table(rows: list[dict]) -> tuple[list[str], list[list]]:
    """``(columns, rows)`` of :func:`plan_layouts` for ``show_table``; the full-recomputation
    columns only where selective recomputation does not fit."""
    columns = [tr("layout"), tr("per GPU (GB)"), tr("activations (GB)"), tr("step time (seconds)"),
               tr("exposed communication (seconds)"), tr("fits?"),
               tr("full recomputation: per GPU (GB)"), tr("full recomputation: step (seconds)")]
    yes_no = lambda fits: tr("yes") if fits else tr("no")
    table = []
    for r in rows:
        s, f = r["selective"], r["full"]
        full = f"{f['total'] / 1e9:.1f}" + ("" if f["fits"] else "*")
        lever = ["-", "-"] if s["fits"] else [full, f"{f['step_s']:.2f}"]
        table.append([tr(r["layout"]), f"{s['total'] / 1e9:.1f}", f"{s['activations'] / 1e9:.1f}",
                      f"{s['step_s']:.2f}", f"{s['comm_s']:.2f}", yes_no(s["fits"]), *lever])
    return columns, table


def layouts_verdict(rows: list[dict], gpu) -> tuple[str, str, str]:
    """Which layouts fit ``gpu`` with selective recomputation (all, some, none), and the
    fastest plan that fits, full recomputation counted as the lever where selective does not."""
    usable = usable_bytes(gpu) / 1e9
    fitting = [r for r in rows if r["selective"]["fits"]]
    plans = [(r["selective"]["step_s"], r["layout"], tr("selective")) for r in fitting] + \
        [(r["full"]["step_s"], r["layout"], tr("full")) for r in rows
         if not r["selective"]["fits"] and r["full"]["fits"]]
    details = tr("fits: at most {usable:.0f} GB, the {share:.0%} of an {gpu}'s memory a plan may "
                 "fill; a * marks a full-recomputation plan that does not fit either",
                 usable=usable, share=usable * 1e9 / gpu.memory_bytes, gpu=gpu.name)
    if not plans:
        return tr("No layout fits in {usable:.0f} GB per GPU, even with full recomputation",
                  usable=usable), details, "bad"
    step, name, recompute = min(plans)
    best = dict(layout=tr(name), recompute=recompute, step=step, usable=usable,
                fitting=len(fitting), total=len(rows))
    if len(fitting) == len(rows):
        return tr("Every layout fits in {usable:.0f} GB per GPU with selective recomputation; "
                  "the fastest is {layout}, {step:.2f} s a step", **best), details, "good"
    if not fitting:
        return tr("No layout fits in {usable:.0f} GB per GPU with selective recomputation; "
                  "with full recomputation the fastest that fits is {layout}, {step:.2f} s a "
                  "step", **best), details, "mixed"
    return tr("{fitting} of {total} layouts fit in {usable:.0f} GB per GPU with selective "
              "recomputation; the fastest plan that fits is {layout} with {recompute} "
              "recomputation, {step:.2f} s a step", **best), details, "good"


def block_verdict(seq_len: int, cp: int, gpu, link,
                  precision: str = "bf16") -> tuple[str, str, str]:
    """Section 2's bound at real scale: whether a cp rank's block of ``seq_len / cp`` tokens
    is long enough for computing on it to hide receiving the next, ``F/B`` tokens (``F`` the
    GPU's FLOP/s, ``B`` the link's bytes/s), twice that with causal masking (half of each block
    computed)."""
    block, needed = seq_len // cp, gpu.peak(precision) / link.bandwidth
    words = dict(block=block, cp=cp, needed=needed, causal=2 * needed, gpu=gpu.name,
                 link=link.name, precision=precision)
    details = tr("F/B for an {gpu} ({precision}) on {link}: {needed:,.0f} tokens; with causal "
                 "masking half of each block is computed, so {causal:,.0f}", **words)
    if block >= 2 * needed:
        return tr("A cp={cp} rank's block of {block:,} tokens is long enough to hide the ring's "
                  "transfers: it needs {causal:,.0f} with causal masking", **words), details, "good"
    return tr("A cp={cp} rank's block of {block:,} tokens is too short to hide the ring's "
              "transfers: it needs {causal:,.0f} with causal masking", **words), details, "bad"
