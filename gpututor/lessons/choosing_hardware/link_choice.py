"""Lesson 08, section 4, "Which network between the servers?": one data-parallel plan priced on
each network link of the catalogue (the ring of a many-server job crosses servers, so its
slowest hop is each GPU's network port) with each lever that cuts its communication: gradients
in fewer bytes, and synchronising every H steps (local SGD, DiLoCo; lesson 13 measures them).
The slowest link on which what compute does not hide stays within a share of the step is that
plan's requirement.

Every number is the planner's (``gpututor.plan.links_needed``: formulas, not measurements); the
words are chosen from them. The figure: ``link_choice_figures.link_choice_figure``.
"""
from __future__ import annotations

from ... import catalog
from ...catalog import GB
from ...i18n import tr
from ...plan.links_needed import exposed_by_link
from ...plan.recommend import (DEFAULT_COMM_EFFICIENCY, DEFAULT_HFU, DEFAULT_OVERLAP,
                               USABLE_FRACTION)

MAX_SHARE = 0.10   # the share of a step this section lets data parallel's waiting take
# the links between servers: one network port per GPU (PCIe and NVLink stay inside a server)
NETWORK_LINKS = ("eth-10g", "eth-25g", "eth-100g", "ib-hdr", "ib-ndr")
EVERY_STEP, RAREST = "every step, bf16 gradients (a compression hook)", \
    "every 500 steps (DiLoCo's paper)"
# lever -> plan.time.step_time keywords. DDP under autocast keeps float32 gradients and sends
# them so, 2 bytes only with a bf16 compression hook (lesson 13); the syncs every H steps send
# float32 values (sync_bytes 4, the master copy's precision: the planner's assumption). DiLoCo's
# headline result synchronises 500 times less often than every step [ref: douillard2023-abstract]
LEVERS = {
    "every step, fp32 gradients (DDP's default)": {"grad_bytes": 4},
    EVERY_STEP: {"grad_bytes": 2},
    "every 10 steps (local SGD or DiLoCo, H = 10)": {"sync_every": 10},
    "every 100 steps": {"sync_every": 100},
    RAREST: {"sync_every": 500},
}
PLAN = {"hfu": DEFAULT_HFU, "comm_efficiency": DEFAULT_COMM_EFFICIENCY, "overlap": DEFAULT_OVERLAP}


def link_choice(model, tokens_per_step: float, gpu: str, count: int, levers=None,
                links=NETWORK_LINKS, **plan) -> dict:
    """``lever -> rows`` of :func:`~gpututor.plan.links_needed.exposed_by_link` (slowest link
    first) for ``count`` one-GPU data-parallel replicas of ``model`` on ``gpu`` at its bf16 peak,
    at the planner's defaults (:data:`PLAN`); ``plan``: more ``step_time`` keywords
    (``micro_batch``, ...) or other values of those."""
    peak = catalog.get_gpu(gpu).peak("bf16")
    plan = {**PLAN, **plan}
    return {lever: exposed_by_link(model, tokens_per_step, count, peak, links=links, dp=count,
                                   **plan, **kw)
            for lever, kw in (levers or LEVERS).items()}


def plan_words(model, gpu: str, memory_bytes: float, choice: dict) -> str:
    """What the plan assumes and holds, from the numbers: its memory against the GPU's usable
    bytes, the micro-batches and the compute that can hide the all-reduce, the assumptions."""
    g = catalog.get_gpu(gpu)
    usable = USABLE_FRACTION * g.memory_bytes
    row = next(iter(choice.values()))[0]
    values = dict(name=model.name, gb=memory_bytes / GB, usable=usable / GB, gpu=gpu,
                  frac=USABLE_FRACTION, total=g.memory_bytes / GB)
    memory = (tr("{name}: {gb:.0f} GB per GPU, within the {usable:.0f} GB the planner lets each "
                 "{gpu} use ({frac:.0%} of {total:.0f})", **values)
              if memory_bytes <= usable else
              tr("{name}: {gb:.0f} GB per GPU, over the {usable:.0f} GB the planner lets each "
                 "{gpu} use ({frac:.0%} of {total:.0f})", **values))
    return memory + tr("; {m} micro-batches per GPU, so {window:.0f} ms of a {compute:.0f} ms "
                       "step's backward can hide the every-step all-reduce. The planner's "
                       "assumptions: HFU {hfu:.0%}, collectives at {eff:.0%} of a link's rate, "
                       "overlap {overlap:.0%} of that backward; the limit: {max:.0%} of the step",
                       m=row["microbatches"], window=1e3 * row["dp_window_s"],
                       compute=1e3 * row["compute_s"], hfu=PLAN["hfu"],
                       eff=PLAN["comm_efficiency"], overlap=PLAN["overlap"], max=MAX_SHARE)


def slowest_fitting(rows: list[dict], max_share: float = MAX_SHARE) -> dict | None:
    """The first (slowest) row whose exposed share is at most ``max_share``, else None."""
    return next((r for r in rows if r["exposed_share"] <= max_share), None)


def _link_words(row: dict) -> str:
    return f"{row['link']} ({row['bandwidth'] / GB:g} GB/s)"


def link_choice_verdict(choice: dict, max_share: float = MAX_SHARE) -> tuple[str, str, str]:
    """Which link each lever needs; the headline compares every step (bf16 gradients) with the
    rarest synchronisation; a sync every H steps that saves less than H times the bandwidth is
    said, with why."""
    needed = {lever: slowest_fitting(rows, max_share) for lever, rows in choice.items()}
    details = []
    for lever, row in needed.items():
        details.append(tr("{lever}: {link}, {share:.1%} of the step exposed", lever=tr(lever),
                          link=_link_words(row), share=row["exposed_share"]) if row else
                       tr("{lever}: no link here keeps it within {max:.0%}",
                          lever=tr(lever), max=max_share))
    every = needed.get(EVERY_STEP)
    for lever, kw in LEVERS.items():
        h, row = kw.get("sync_every", 1), needed.get(lever)
        slowest = row is not None and row is choice[lever][0]   # nothing slower to pick
        if h > 1 and row and every and not slowest and every["bandwidth"] / row["bandwidth"] < h:
            x = every["bandwidth"] / row["bandwidth"]
            why = tr("its sync is exposed and in float32, while every step's all-reduce hides "
                     "{window:.0f} ms behind the backward", window=1e3 * every["dp_window_s"])
            details.append(tr("{lever}: {h} times fewer syncs lower the bandwidth needed only "
                              "{x:.1f} times: {why}", lever=tr(lever), h=h, x=x, why=why)
                           if x > 1 else
                           tr("{lever}: {h} times fewer syncs need as fast a link as every "
                              "step: {why}", lever=tr(lever), h=h, why=why))
    rare = needed.get(RAREST)
    if every is None or rare is None or rare["bandwidth"] >= every["bandwidth"]:
        return tr("Syncing rarely does not lower the link this plan needs to keep data parallel "
                  "within {max:.0%} of the step", max=max_share), "\n".join(details), "mixed"
    slowest = choice[RAREST][0]
    rare_words = (tr("even the slowest link here, {link}, keeps it at {share:.1%}",
                     link=_link_words(rare), share=rare["exposed_share"])
                  if rare is slowest else tr("it needs only {link}", link=_link_words(rare)))
    return tr("Synchronising every step with bf16 gradients needs {link} or faster to keep data "
              "parallel within {max:.0%} of the step; synchronising {rarest}: {rare}",
              link=_link_words(every), max=max_share, rarest=tr(RAREST), rare=rare_words), \
        "\n".join(details), "good"
