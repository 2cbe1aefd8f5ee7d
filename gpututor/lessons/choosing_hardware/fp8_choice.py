"""Lesson 08, section 4, "With FP8": the A100 (no FP8 units), the H100 and the H200, each
planned in bf16 and in FP8 for one model, token budget, deadline and budget.

Every number is the planner's (``gpututor.plan.recommend``, formulas, not measurements): the
best plan per GPU type and precision, its days and cost; the words are chosen from them. The
one measured figure beside them is published, and cited as such: torchtitan's Llama 3.1 8B on
8 H100s with torch.compile, without and with Float8 [ref: torchtitan2024-float8].
"""
from __future__ import annotations

from ... import catalog
from ...catalog import CURRENCY_SYMBOLS, currency, money
from ...checks import InvalidValue
from ...i18n import show_table, show_verdict, tr
from ...plan.recommend import estimate, planned_precision, recommend

FP8_GPUS = ("A100-80GB", "H100-80GB", "H200-141GB")
# tokens/s per GPU, Llama 3.1 8B, FSDP on 8 H100s, selective activation checkpointing:
# torch.compile alone, and torch.compile + Float8 (torchtitan 2024, Table 1)
# [ref: torchtitan2024-float8]
TORCHTITAN_COMPILE_TPS, TORCHTITAN_FLOAT8_TPS = 6667, 8532


def fp8_plans(model, tokens: float, gpus=FP8_GPUS, **constraints) -> dict:
    """``(gpu, precision) -> Estimate`` for precision "bf16" and "fp8": the best-ranked plan
    that fits (``recommend``'s ranking), or None where the planner refuses the precision on that
    GPU (no FP8 units) or nothing fits. ``constraints``: ``max_gpus``, ``deadline_days``,
    ``budget`` and any other ``recommend`` argument."""
    plans = {}
    for precision in ("bf16", "fp8"):
        usable = []
        for gpu in gpus:
            try:
                planned_precision(catalog.get_gpu(gpu), precision)
                usable.append(gpu)
            except InvalidValue:
                plans[gpu, precision] = None          # refused: the GPU has no such units
        rec = recommend(model, tokens, gpus=tuple(usable), precision=precision, **constraints)
        best = rec.best_per_gpu()
        plans.update({(gpu, precision): best.get(gpu) for gpu in usable})
    return {(gpu, precision): plans[gpu, precision] for gpu in gpus for precision in ("bf16", "fp8")}


def refused(gpu: str, precision: str) -> bool:
    """Whether the planner refuses ``precision`` on ``gpu`` (it has no units for it)."""
    try:
        planned_precision(catalog.get_gpu(gpu), precision)
        return False
    except InvalidValue:
        return True


def fp8_rows(plans: dict) -> tuple[list[str], list[list[str]]]:
    """One row per GPU type and precision: the dense peak the plan's matmuls use, the best plan,
    its days and cost, and whether it meets the deadline and budget."""
    columns = [tr("GPU"), tr("precision"), tr("dense peak TFLOP/s"), tr("best configuration"),
               tr("days"), tr("cost {symbol}", symbol=CURRENCY_SYMBOLS[currency()]),
               tr("meets deadline and budget")]
    rows = []
    for (gpu, precision), e in plans.items():
        peak = catalog.get_gpu(gpu).peak_flops.get(precision)
        if e is None:
            why = tr("refused: no FP8 units") if refused(gpu, precision) else tr("none fits")
            rows.append([gpu, precision, "-", why, "-", "-", "-"])
            continue
        cost = f"{e.cost:,.0f}" if e.cost is not None else tr("not priced")
        rows.append([gpu, precision, f"{peak / 1e12:,.0f}", e.config.shown, f"{e.days:,.1f}",
                     cost, tr("yes") if e.meets else tr("no")])
    return columns, rows


def fp8_step_speedup(model, tokens: float, e) -> float:
    """How many times faster the FP8 plan ``e``'s step is than the same configuration's in bf16
    (the planner's figure, at the same assumptions)."""
    bf16 = estimate(model, tokens, e.config, "bf16", **{k: v for k, v in e.assumptions.items()
                                                        if k in ("tokens_per_step", "hfu",
                                                                 "comm_efficiency", "overlap")})
    return bf16.step["step_s"] / e.step["step_s"]


def fp8_verdict(plans: dict, model, tokens: float) -> tuple[str, str, str]:
    """For each GPU planned in both precisions: its best plan's days and cost in bf16 and in
    FP8; the GPUs refused; in the details, the planner's FP8 step gain beside torchtitan's
    measured one, with words chosen from the two."""
    gpus = dict.fromkeys(g for g, _ in plans)
    both = [g for g in gpus if plans[g, "bf16"] is not None and plans[g, "fp8"] is not None]
    parts = [tr("{gpu}: {count16} GPUs for {days16:,.1f} days and {cost16} in bf16, {count8} for "
                "{days8:,.1f} days and {cost8} in FP8", gpu=g,
                count16=plans[g, "bf16"].config.count, count8=plans[g, "fp8"].config.count,
                days16=plans[g, "bf16"].days, days8=plans[g, "fp8"].days,
                cost16=money(plans[g, "bf16"].cost) if plans[g, "bf16"].cost is not None
                else tr("not priced"),
                cost8=money(plans[g, "fp8"].cost) if plans[g, "fp8"].cost is not None
                else tr("not priced")) for g in both]
    without = [g for g in gpus if refused(g, "fp8")]
    if without:
        parts.append(tr("{gpus}: no FP8 units, so the planner refuses fp8 there",
                        gpus=", ".join(without)))
    headline = tr("The cheapest plan that meets the deadline and budget (the ranking's first), "
                  "bf16 against FP8: {parts}", parts="; ".join(parts))
    if not both:
        return headline, "", "mixed"
    gains = {g: fp8_step_speedup(model, tokens, plans[g, "fp8"]) for g in both}
    measured = TORCHTITAN_FLOAT8_TPS / TORCHTITAN_COMPILE_TPS
    top = max(gains.values())
    compare = (tr("above the gain torchtitan measured, so read the FP8 days as a lower bound "
                  "until a run of your own gives its HFU in FP8") if top > measured else
               tr("no more than the gain torchtitan measured"))
    details = tr("The planner gives FP8 matmuls the same share of their peak (HFU) as bf16's, so "
                 "the same layout's step runs {gains} faster in FP8; torchtitan measured "
                 "{fp8:,} against {bf16:,} tokens/s per H100 with torch.compile, with and "
                 "without Float8 (Llama 3.1 8B, 8 GPUs): {measured:.2f}x. The planner's gain is "
                 "{compare}.", gains=", ".join(f"{gains[g]:.2f}x ({g})" for g in both),
                 fp8=TORCHTITAN_FLOAT8_TPS, bf16=TORCHTITAN_COMPILE_TPS, measured=measured,
                 compare=compare)
    return headline, details, "good"


def show_fp8_choice(model, tokens: float, gpus=FP8_GPUS, **constraints) -> dict:
    """:func:`fp8_verdict`, then :func:`fp8_rows` as a table; returns the plans."""
    plans = fp8_plans(model, tokens, gpus, **constraints)
    show_verdict(*fp8_verdict(plans, model, tokens))
    show_table(*fp8_rows(plans))
    return plans
