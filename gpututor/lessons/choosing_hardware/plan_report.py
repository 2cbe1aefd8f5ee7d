"""What sections 2 to 5 of lesson 08 show of the planner's answers: a table each, and a verdict
chosen from the numbers where a result has a headline (the least recomputation that fits, the
GPU type to pick, whether the link limits the step, how close the published runs come).

Each ``*_verdict`` returns ``(headline, details, tone)`` and only words what its numbers say;
each ``show_*`` shows the verdict first, then the table. The numbers come from ``gpututor.plan``
(formulas, not measurements).
"""
from __future__ import annotations

from ...catalog import CURRENCY_SYMBOLS, GB, currency, money
from ...i18n import show_table, show_verdict, tr
from ...i18n.shown import table_text
from ...plan.memory import model_state_bytes, per_device_memory
from ...plan.reasons import waiting_seconds
from ...plan.recommend import usable_bytes

STAGE_NAMES = ("data parallel", "ZeRO-1 (P_os)", "ZeRO-2 (P_os+g)", "ZeRO-3 (P_os+g+p)")
MEMORY_PARTS = ("params", "grads", "optimizer")
# torchtitan's benchmark file (benchmarks/llama3_h100_202412_torchtitan.md): its H100s had 96 GB
TORCHTITAN_GPU_GB = 96


def _gb(x: float, digits: int = 1) -> str:
    return f"{x / GB:,.{digits}f}"


def zero_stage_rows(n_params: float, dp: int) -> tuple[list[str], list[list[str]]]:
    """Model-state GB per GPU for each ZeRO stage (mixed-precision Adam, the ZeRO paper's
    convention) of ``n_params`` parameters over ``dp`` GPUs, by kind and in total."""
    columns = [tr("ZeRO stage"), tr("parameters GB"), tr("gradients GB"), tr("optimizer GB"),
               tr("total GB per GPU")]
    rows = []
    for stage, name in enumerate(STAGE_NAMES):
        state = model_state_bytes(n_params, "bf16", "adam", zero_stage=stage, dp=dp)
        rows.append([tr(name)] + [_gb(state[k], 2) for k in MEMORY_PARTS + ("total",)])
    return columns, rows


def show_zero_stages(n_params: float, dp: int) -> None:
    """:func:`zero_stage_rows` as a table."""
    show_table(*zero_stage_rows(n_params, dp))


# ---- section 2: recomputation -------------------------------------------------------------------

RECOMPUTE_PLANS = (("none", "eager"), ("selective", "eager"), ("full", "eager"), ("none", "fused"))


def recompute_memory(model, zero_stage: int, dp: int, micro_batch: int = 1) -> dict:
    """``(recompute, attention)`` -> ``per_device_memory`` for each of :data:`RECOMPUTE_PLANS`."""
    return {plan: per_device_memory(model, micro_batch=micro_batch, zero_stage=zero_stage, dp=dp,
                                    recompute=plan[0], attention=plan[1])
            for plan in RECOMPUTE_PLANS}


def _plan_label(plan: tuple[str, str]) -> str:
    recompute, attention = plan
    return recompute if attention == "eager" else f"{recompute}, attention='{attention}'"


def recompute_verdict(memory: dict, usable: float, gpu: str) -> tuple[str, str, str]:
    """Whether the plan fits ``usable`` bytes without recomputation; if not, the least
    recomputation (selective, then full) that makes it fit, or that none does. Details: what
    the fused-attention row counts."""
    gb = lambda plan: memory[plan]["total"] / GB
    where = dict(usable=usable / GB, gpu=gpu, none=gb(("none", "eager")))
    fused, selective = memory[("none", "fused")], memory[("selective", "eager")]
    details = tr("attention='fused' (no recomputation): activations {activations:.1f} GB, "
                 "selective's less one layer's s × s matrices ({layer:.1f} GB)",
                 activations=fused["activations"] / GB,
                 layer=(selective["activations"] - fused["activations"]) / GB)
    if memory[("none", "eager")]["total"] <= usable:
        return tr("Fits without recomputation: {none:.1f} GB per GPU of the {usable:.0f} GB "
                  "usable on an {gpu}", **where), details, "good"
    for recompute, words in (("selective", tr("selective recomputation")),
                             ("full", tr("full recomputation"))):
        if memory[(recompute, "eager")]["total"] <= usable:
            return tr("Without recomputation it does not fit: {none:.1f} GB per GPU, over the "
                      "{usable:.0f} GB usable on an {gpu}; {how} brings it to {total:.1f} GB",
                      how=words, total=gb((recompute, "eager")), **where), details, "mixed"
    return tr("Does not fit even with full recomputation: {full:.1f} GB per GPU, over the "
              "{usable:.0f} GB usable on an {gpu}", full=gb(("full", "eager")), **where), \
        details, "bad"


def recompute_rows(memory: dict, usable: float) -> tuple[list[str], list[list[str]]]:
    """One row per plan of ``memory`` (:func:`recompute_memory`): GB per GPU by kind, total,
    and whether it fits ``usable`` bytes."""
    columns = [tr("recompute, attention"), tr("parameters GB"), tr("gradients GB"),
               tr("optimizer GB"), tr("activations GB"), tr("total GB"),
               tr("fits in {usable:.0f} GB", usable=usable / GB)]
    rows = [[_plan_label(plan)] + [_gb(m[k]) for k in MEMORY_PARTS + ("activations", "total")]
            + [tr("yes") if m["total"] <= usable else tr("no")] for plan, m in memory.items()]
    return columns, rows


def show_recompute(model, gpu: str, zero_stage: int, dp: int) -> None:
    """The verdict on recomputation for ``model`` with ZeRO ``zero_stage`` over ``dp`` GPUs of
    type ``gpu``, then the table of every plan."""
    memory, usable = recompute_memory(model, zero_stage, dp), usable_bytes(gpu)
    show_verdict(*recompute_verdict(memory, usable, gpu))
    show_table(*recompute_rows(memory, usable))


# ---- section 4: which GPU type ------------------------------------------------------------------

def _cost(e) -> str:
    return money(e.cost) if e.cost is not None else tr("not priced")


def gpu_choice_verdict(rec) -> tuple[str, str, str]:
    """``rec``'s first-ranked configuration (the ranking: meeting the deadline and budget first,
    then cost, then time), if it meets them; else that none does, and the first ranked; else
    ``rec``'s own headline (nothing fits). Details: ``rec``'s notes."""
    details = "\n".join(rec.notes)
    if not rec.ranked:
        return rec.headline, details, "bad"
    best = rec.ranked[0]
    values = dict(label=best.config.shown, days=best.days, cost=_cost(best))
    if best.meets and best.cost is not None:
        return tr("Cheapest (then fastest) that meets the deadline and budget: {label} "
                  "({days:,.1f} days, {cost})", **values), details, "good"
    if best.meets:   # no price for it: ranked by time
        return tr("The fastest that meets the deadline: {label} ({days:,.1f} days, {cost})",
                  **values), details, "good"
    return tr("No configuration meets the deadline and budget; the first ranked: {label} "
              "({days:,.1f} days, {cost})", **values), details, "bad"


def gpu_choice_rows(rec) -> tuple[list[str], list[list[str]]]:
    """One row per GPU type of ``rec``: the fewest GPUs that fit, its best configuration, days,
    cost and whether that meets the deadline and budget."""
    columns = [tr("GPU"), tr("fewest that fit"), tr("best configuration"), tr("days"),
               tr("cost {symbol}", symbol=CURRENCY_SYMBOLS[currency()]),
               tr("meets deadline and budget")]
    rows = []
    for gpu, best in rec.best_per_gpu().items():
        fewest = min(e.config.count for e in rec.ranked if e.config.gpu == gpu)
        cost = f"{best.cost:,.0f}" if best.cost is not None else tr("not priced")
        rows.append([gpu, str(fewest), best.config.shown, f"{best.days:,.1f}", cost,
                     tr("yes") if best.meets else tr("no")])
    return columns, rows


def show_gpu_choice(rec) -> None:
    """:func:`gpu_choice_verdict`, then :func:`gpu_choice_rows` as a table."""
    show_verdict(*gpu_choice_verdict(rec))
    show_table(*gpu_choice_rows(rec))


# ---- section 4: the link inside a node ----------------------------------------------------------

def link_verdict(estimates: dict) -> tuple[str, str, str]:
    """For one layout's estimates over several links (``link -> Estimate``): on which links
    communication is half the step or more (link-bound), and how much longer the slowest
    link's step is than the fastest's. Details: each estimate's reasons on time."""
    by_step = sorted(estimates, key=lambda link: estimates[link].step["step_s"])
    fast, slow = by_step[0], by_step[-1]
    values = dict(fast=fast, slow=slow, ratio=estimates[slow].step["step_s"]
                  / estimates[fast].step["step_s"])
    bound = [link for link in by_step if estimates[link].link_bound]
    details = tr("link-bound: communication (here tensor parallel's all-reduces, on the critical "
                 "path) is half the step or more; a faster link would then speed the step up more "
                 "than more GPUs")
    if not bound:
        return tr("Communication stays under half the step on every link; a step over {slow} "
                  "takes {ratio:.2f}x as long as over {fast}", **values), details, "good"
    if len(bound) == len(by_step):
        return tr("Every link here is the limit: communication is half the step or more even "
                  "over {fast}; a step over {slow} takes {ratio:.2f}x as long", **values), \
            details, "bad"
    share = waiting_seconds(estimates[bound[-1]].step) / estimates[bound[-1]].step["step_s"]
    return tr("Over {bound} the link is the limit: communication is {share:.0%} of the step, "
              "which takes {ratio:.2f}x as long as over {fast}", bound=", ".join(bound),
              share=share, **values), details, "mixed"


def link_rows(estimates: dict) -> tuple[list[str], list[list[str]]]:
    """One row per link: GB per GPU and whether it fits, the step and its parts, and days."""
    columns = [tr("link in a node"), tr("GB per GPU"), tr("fits"), tr("compute s"),
               tr("waiting on links s"), tr("step s"), tr("days")]
    rows = [[link, f"{e.memory['total'] / GB:.0f}", tr("yes") if e.fits else tr("no"),
             f"{e.step['compute_s']:.2f}", f"{waiting_seconds(e.step):.2f}", f"{e.step['step_s']:.2f}",
             f"{e.days:,.0f}"] for link, e in estimates.items()]
    return columns, rows


def show_links(estimates: dict) -> None:
    """:func:`link_verdict`, then :func:`link_rows` as a table."""
    show_verdict(*link_verdict(estimates))
    show_table(*link_rows(estimates))


# ---- section 5: published runs ----------------------------------------------------------------

def published_rows(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """:func:`gpututor.plan.published.published_table`'s rows as table rows: run, what is
    compared, published, predicted, predicted / published, implied MFU (causal count;
    whole-square count in brackets, as PaLM and torchtitan count), and whether the predicted
    plan fits its GPUs' usable memory."""
    columns = [tr("run"), tr("figure"), tr("published"), tr("predicted"), tr("ratio"),
               tr("implied MFU"), tr("fits")]
    table = []
    for r in rows:
        predicted = f"{r['predicted']:,.0f}" if r["predicted"] is not None else tr("none fits")
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        fits = "-" if r["fits"] is None else tr("yes") if r["fits"] else tr("no")
        mfu = f"{r['implied_mfu']:.1%} ({r['implied_mfu_full_square']:.1%})"
        table.append([r["run"], tr(r["measure"]), f"{r['published']:,.0f}", predicted, ratio,
                      mfu, fits])
    return columns, table


def published_table_text(rows: list[dict]) -> str:
    """:func:`published_rows` as a narrow text table."""
    return table_text(*published_rows(rows))


def published_verdict(rows: list[dict], low: float, high: float) -> tuple[str, str, str]:
    """Whether every GPU-hours prediction (the Llama 2 runs) lies in ``[low, high]``, the
    range the lesson states for predicted / published; a run with no prediction (nothing fits)
    counts as outside. Details: each run's ratio."""
    hours = [r for r in rows if r["measure"] == "GPU-hours"]
    outside = [r for r in hours if r["ratio"] is None or not low <= r["ratio"] <= high]
    ratio = lambda r: f"{r['ratio']:.2f}" if r["ratio"] is not None else tr("none fits")
    details = "\n".join(tr("{run}: predicted / published {what} = {ratio}", run=r["run"],
                           what=tr(r["measure"]), ratio=ratio(r)) for r in rows)
    if not outside:
        return tr("All {n} GPU-hours predictions are within the range this lesson states "
                  "({low} to {high} times the published)", n=len(hours), low=low, high=high), \
            details, "good"
    return tr("{k} of the {n} GPU-hours predictions fall outside the range this lesson states "
              "({low} to {high} times the published): {runs}", k=len(outside), n=len(hours),
              low=low, high=high, runs=", ".join(f"{r['run']} {ratio(r)}" for r in outside)), \
        details, "bad"


def show_published(rows: list[dict], low: float, high: float) -> None:
    """:func:`published_verdict`, then :func:`published_rows` as a table."""
    show_verdict(*published_verdict(rows, low, high))
    show_table(*published_rows(rows))


def torchtitan_memory_verdict(predicted: float, published: float, usable: float,
                              gpu: str) -> tuple[str, str]:
    """``(headline, tone)``: the predicted against the published GB per GPU of torchtitan's
    run, and which of them fit ``usable`` GB of ``gpu`` (torchtitan's own GPUs had
    :data:`TORCHTITAN_GPU_GB`)."""
    values = dict(predicted=predicted, published=published, off=predicted / published - 1,
                  usable=usable, gpu=gpu, had=TORCHTITAN_GPU_GB)
    start = tr("Predicted {predicted:.0f} GB per GPU against {published:.0f} GB published "
               "({off:+.0%}); ", **values)
    if predicted <= usable and published <= usable:
        return start + tr("both fit the {usable:.0f} GB usable of an {gpu}", **values), "good"
    if published <= usable:
        return start + tr("the published fits the {usable:.0f} GB usable of an {gpu}, the "
                          "prediction does not", **values), "bad"
    if predicted <= usable:
        return start + tr("the prediction fits the {usable:.0f} GB usable of an {gpu}, the "
                          "published does not: torchtitan's GPUs had {had} GB", **values), "mixed"
    return start + tr("neither fits the {usable:.0f} GB usable of an {gpu}: torchtitan's GPUs "
                      "had {had} GB", **values), "mixed"


def show_torchtitan_memory(row: dict, eager_bytes: float, gpu: str = "H100-80GB") -> None:
    """The verdict on torchtitan's memory per GPU (``row``: its :func:`published_table` row),
    then a table: published, predicted with its attention kernel, and predicted with attention
    that stores the ``s × s`` scores (``eager_bytes``), each against ``gpu``'s usable memory."""
    usable = usable_bytes(gpu) / GB
    predicted, published = row["predicted_memory_gb"], row["published_memory_gb"]
    headline, tone = torchtitan_memory_verdict(predicted, published, usable, gpu)
    show_verdict(headline, tone=tone)
    sizes = ((tr("published (torchtitan)"), published),
             (tr("predicted, its attention (fused: no s × s scores)"), predicted),
             (tr("predicted, attention that stores the s × s scores"), eager_bytes / GB))
    show_table([tr("memory"), tr("GB per GPU"), tr("fits in {usable:.0f} GB", usable=usable)],
               [[name, f"{gb:.0f}", tr("yes") if gb <= usable else tr("no")] for name, gb in sizes])
