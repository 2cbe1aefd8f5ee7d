"""Lesson 08, section 4, "Which link between the GPUs?": one data-parallel plan priced on every
link of the catalogue with each lever that cuts its communication: gradients in fewer bytes, and
synchronising every H steps (local SGD, DiLoCo; lesson 13 measures them). The slowest link on
which what compute does not hide stays within a share of the step is that plan's requirement.

Every number is the planner's (``gpututor.plan.links_needed``: formulas, not measurements); the
words are chosen from them. The figure: ``link_choice_figures.link_choice_figure``.
"""
from __future__ import annotations

from ... import catalog
from ...catalog import GB
from ...i18n import tr
from ...plan.links_needed import exposed_by_link

MAX_SHARE = 0.10   # the share of a step this section lets data parallel's waiting take
# lever -> plan.time.step_time keywords; DiLoCo's headline result synchronises 500 times less
# often than every step [ref: douillard2023-abstract]
LEVERS = {
    "every step, fp32 gradients": {"grad_bytes": 4},
    "every step, bf16 gradients": {"grad_bytes": 2},
    "every 10 steps (local SGD, DiLoCo)": {"sync_every": 10},
    "every 100 steps": {"sync_every": 100},
    "every 500 steps (DiLoCo's paper)": {"sync_every": 500},
}


def link_choice(model, tokens_per_step: float, gpu: str, count: int, levers=None,
                **plan) -> dict:
    """``lever -> rows`` of :func:`~gpututor.plan.links_needed.exposed_by_link` (slowest link
    first) for ``count`` data-parallel replicas of ``model`` on ``gpu`` at its bf16 peak;
    ``plan``: more ``step_time`` keywords (``micro_batch``, ``hfu``, ...)."""
    peak = catalog.get_gpu(gpu).peak("bf16")
    return {lever: exposed_by_link(model, tokens_per_step, count, peak, dp=count, **plan, **kw)
            for lever, kw in (levers or LEVERS).items()}


def slowest_fitting(rows: list[dict], max_share: float = MAX_SHARE) -> dict | None:
    """The first (slowest) row whose exposed share is at most ``max_share``, else None."""
    return next((r for r in rows if r["exposed_share"] <= max_share), None)


def link_choice_verdict(choice: dict, max_share: float = MAX_SHARE) -> tuple[str, str, str]:
    """Which link each lever needs; the headline compares every step (bf16 gradients) with the
    rarest synchronisation."""
    needed = {lever: slowest_fitting(rows, max_share) for lever, rows in choice.items()}
    details = []
    for lever, row in needed.items():
        details.append(tr("{lever}: {link} ({gbs:g} GB/s), {share:.1%} of the step exposed",
                          lever=tr(lever), link=row["link"], gbs=row["bandwidth"] / GB,
                          share=row["exposed_share"]) if row else
                       tr("{lever}: no link of the catalogue keeps it within {max:.0%}",
                          lever=tr(lever), max=max_share))
    every, rarest = list(choice)[1], list(choice)[-1]
    for lever in list(choice)[2:]:   # a sync lever that needs more than every step's overlap
        if needed[lever] and needed[every] and \
                needed[lever]["bandwidth"] > needed[every]["bandwidth"]:
            details.append(tr("{lever} needs a faster link than every step here: its sync sends "
                              "float32 values, twice bf16 gradients' bytes, between steps where "
                              "nothing hides it, while every step's all-reduce hides behind the "
                              "backward", lever=tr(lever)))
    if needed[every] is None or needed[rarest] is None:
        return tr("No link of the catalogue keeps data parallel within {max:.0%} of the step for "
                  "every lever", max=max_share), "\n".join(details), "mixed"
    return tr("Synchronising every step with bf16 gradients needs {fast} ({fast_gbs:g} GB/s) or "
              "faster to keep data parallel within {max:.0%} of the step; synchronising "
              "{rarest} needs only {slow} ({slow_gbs:g} GB/s)", fast=needed[every]["link"],
              fast_gbs=needed[every]["bandwidth"] / GB, max=max_share, rarest=tr(rarest),
              slow=needed[rarest]["link"], slow_gbs=needed[rarest]["bandwidth"] / GB), \
        "\n".join(details), "good"
