"""Lesson 10, section 5 at real scale: the planner's memory and step time for a few layouts of
one model, each with selective recomputation and, where that does not fit, with full
recomputation (the lever); the table and the verdicts chosen from them, and what a contiguous
split would cost instead of the zig-zag the table assumes. Formulas only: nothing here is
measured (``gpututor/plan/``)."""
from __future__ import annotations

from ... import formulas
from ...i18n import tr
from ...parallel.context_parallel import causal_work
from ...plan.memory import Transformer, per_device_memory
from ...plan.recommend import DEFAULT_COMM_EFFICIENCY, DEFAULT_HFU, usable_bytes
from ...plan.time import step_time, training_flops_per_token


def plan_layouts(model: Transformer, layouts: dict, gpus: int, gpu, link) -> list[dict]:
    """For each ``{name: degrees}`` of ``layouts`` (``tp``, ``cp``, ``zero_stage``,
    ``sequence_parallel``): bytes per GPU in all and of activations, the step time and its
    exposed communication with selective recomputation and a fused attention kernel, whether that
    fits the planner's share of ``gpu`` (:func:`usable_bytes`), and the same with full
    recomputation; ``attention_s``: the seconds of it a rank spends on attention's products.
    Attention is priced causal (half its ``s×s`` square computed), as :func:`block_verdict`
    prices it, at the same rates (the planner's HFU and link efficiency): less attention
    compute also hides less of the cp ring. The cp ranks are priced doing equal causal work,
    which takes section 3's zig-zag split; :func:`split_cost_verdict` prices a contiguous one."""
    rows = []
    for name, degrees in layouts.items():
        timed = {k: v for k, v in degrees.items() if k != "sequence_parallel"}
        plan = {}
        for recompute in ("selective", "full"):
            memory = per_device_memory(model, micro_batch=1, recompute=recompute,
                                       attention="fused", **degrees)
            time = step_time(model, model.seq_len, gpus, gpu.peak("bf16"), hfu=DEFAULT_HFU,
                             comm_efficiency=DEFAULT_COMM_EFFICIENCY, recompute=recompute,
                             tp_link=link, cp_link=link, dp_link=link, causal=True, **timed)
            every = training_flops_per_token(model, recompute, causal=True)
            products = every - formulas.training_flops_per_token(model.n_params,
                                                                 recompute=recompute)
            plan[recompute] = {"total": memory["total"], "activations": memory["activations"],
                               "step_s": time["step_s"],
                               "comm_s": time["tp_comm_s"] + time["cp_exposed_s"]
                               + time["dp_exposed_s"],
                               "attention_s": time["compute_s"] * products / every,
                               "fits": memory["total"] <= usable_bytes(gpu)}
        rows.append({"layout": name, "cp": degrees.get("cp", 1), **plan})
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


def _plans_that_fit(rows: list[dict]) -> list[tuple[float, str, str]]:
    """``(step_s, layout, recomputation)`` of every plan that fits: selective recomputation where
    it fits, full recomputation (the lever) where only that does."""
    return [(r["selective"]["step_s"], r["layout"], tr("selective")) for r in rows
            if r["selective"]["fits"]] + \
        [(r["full"]["step_s"], r["layout"], tr("full")) for r in rows
         if not r["selective"]["fits"] and r["full"]["fits"]]


def layouts_verdict(rows: list[dict], gpu) -> tuple[str, str, str]:
    """Which layouts fit ``gpu`` with selective recomputation (all, some, none), and the
    fastest plan that fits, full recomputation counted as the lever where selective does not."""
    usable = usable_bytes(gpu) / 1e9
    fitting = [r for r in rows if r["selective"]["fits"]]
    plans = _plans_that_fit(rows)
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


def contiguous_imbalance(seq_len: int, cp: int) -> float:
    """How many times the even share of causal attention's visible pairs the busiest of ``cp``
    ranks sees under a contiguous split (its last rank: ``2 − 1/cp``), counted by
    :func:`causal_work`; 1 under the zig-zag split the table assumes."""
    work = causal_work(seq_len, cp, "contiguous")
    return max(work) * cp / sum(work)


def _split_contiguously(row: dict, seq_len: int) -> dict:
    """``row`` of :func:`plan_layouts` with its sequences split contiguously: each plan's step
    takes :func:`contiguous_imbalance` - 1 more of its ``attention_s`` (the busiest rank's)."""
    extra = contiguous_imbalance(seq_len, row["cp"]) - 1
    return {**row, **{kind: {**row[kind], "step_s": row[kind]["step_s"]
                             + extra * row[kind]["attention_s"]}
                      for kind in ("selective", "full")}}


def split_cost_verdict(rows: list[dict], model: Transformer) -> tuple[str, str, str]:
    """The table's plans with the cp layouts' sequences split contiguously instead of zig-zag
    (the ring's exposed transfers counted as in the zig-zag plan): the first cp layout's step
    then, and whether the fastest plan that fits changes."""
    split = [r for r in rows if r["cp"] > 1]
    if not split:
        return tr("No layout here splits the sequence over ranks"), "", "good"
    row = split[0]
    kind = "selective" if row["selective"]["fits"] or not row["full"]["fits"] else "full"
    contiguous = [_split_contiguously(r, model.seq_len) for r in rows]
    before, after = min(_plans_that_fit(rows), default=None), \
        min(_plans_that_fit(contiguous), default=None)
    words = dict(layout=tr(row["layout"]), cp=row["cp"], recompute=tr(kind),
                 factor=contiguous_imbalance(model.seq_len, row["cp"]), bound=2 - 1 / row["cp"],
                 zigzag=row[kind]["step_s"], contiguous=contiguous[rows.index(row)][kind]["step_s"])
    details = tr("causal_work({seq_len}, {cp}, 'contiguous'): the last rank sees {factor:.3f} "
                 "times the mean rank's query-key pairs (2 − 1/{cp} = {bound:.3f}); its extra "
                 "attention is priced at the table's rate, with {recompute} recomputation",
                 seq_len=model.seq_len, **words)
    headline = tr("The table splits each sequence zig-zag (section 3): with a contiguous split "
                  "the busiest of the {cp} ranks does {factor:.2f} times the even share of "
                  "causal attention, and {layout} would take about {contiguous:.2f} s a step "
                  "instead of {zigzag:.2f} s", **words)
    if before is None or after is None or after[1] == before[1]:
        return headline, details, "mixed"
    return tr("{headline}; the fastest plan that fits would then be {best} ({step:.2f} s), not "
              "{layout}", headline=headline, best=tr(after[1]), step=after[0],
              layout=tr(before[1])), details, "bad"


def block_verdict(seq_len: int, cp: int, gpu, link, precision: str = "bf16",
                  hfu: float = DEFAULT_HFU,
                  comm_efficiency: float = DEFAULT_COMM_EFFICIENCY) -> tuple[str, str, str]:
    """Section 2's bound at real scale: whether a cp rank's block of ``seq_len / cp`` tokens
    is long enough for computing on it to hide receiving the next, ``F/B`` tokens, twice that
    with causal masking (half of each block computed). ``F`` and ``B`` are the rates the
    table's step times assume: ``hfu`` x the GPU's peak FLOP/s, ``comm_efficiency`` x the
    link's bytes/s (the bound at peak and full bandwidth is in the details)."""
    block = seq_len // cp
    at_peak = gpu.peak(precision) / link.bandwidth
    needed = at_peak * hfu / comm_efficiency
    words = dict(block=block, cp=cp, needed=needed, causal=2 * needed, gpu=gpu.name,
                 link=link.name, precision=precision, hfu=hfu, efficiency=comm_efficiency,
                 at_peak=at_peak)
    details = tr("F/B for an {gpu} ({precision}) on {link}, at the table's rates ({hfu:.0%} of "
                 "the GPU's peak, {efficiency:.0%} of the link's bandwidth): {needed:,.0f} "
                 "tokens ({at_peak:,.0f} at peak and full bandwidth); with causal masking half "
                 "of each block is computed, so {causal:,.0f}", **words)
    if block >= 2 * needed:
        return tr("A cp={cp} rank's block of {block:,} tokens is long enough to hide the ring's "
                  "transfers: it needs {causal:,.0f} with causal masking", **words), details, "good"
    return tr("A cp={cp} rank's block of {block:,} tokens is too short to hide the ring's "
              "transfers: it needs {causal:,.0f} with causal masking", **words), details, "bad"
