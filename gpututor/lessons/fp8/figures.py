"""Lesson 06b's figures, tables and verdicts, from the records of ``training.train_all``: the
loss curves, where one layer's operands land against each format's range (histograms), the
scales over steps, the overflow and flush counts, and the bytes of FP8 weights. Every sentence
is chosen from the numbers.
"""
from __future__ import annotations

import statistics

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr
from ...precision.fp8_casts import fp8_format_facts
from ...ui.style import LAYOUT, MARGIN, TEMPLATE, colours_for
from .training import FROM_SCRATCH, OPERANDS, TORCHAO, format_edges, run_totals, scaled_log2, weight_bytes

Verdict = tuple[str, str, str]
TAIL = 5      # the final loss: the mean of the last TAIL steps (one batch's loss is noisy)


def format_rows() -> tuple[list[str], list[list[str]]]:
    """E4M3 and E5M2 as their bit patterns say (``fp8_format_facts``): largest value, smallest
    normal and subnormal, mantissa bits, and how many patterns are NaN or infinity."""
    columns = [tr("format"), tr("largest"), tr("smallest normal"), tr("smallest subnormal"),
               tr("mantissa bits"), tr("NaN patterns"), tr("inf patterns")]
    rows = []
    for name in ("e4m3", "e5m2"):
        f = fp8_format_facts(name)
        rows.append([f["format"], f"{f['max']:g}", f"{f['smallest_normal']:.3g}",
                     f"{f['smallest_subnormal']:.3g}", str(f["mantissa_bits"]), str(f["nan"]),
                     str(f["inf"])])
    return columns, rows


def final_loss(record: dict) -> float:
    """The mean loss of a run's last :data:`TAIL` steps."""
    return statistics.fmean(record["losses"][-TAIL:])


def loss_figure(runs: dict) -> go.Figure:
    """Each run's loss per step, one colour per run."""
    colours = colours_for(list(runs))
    fig = go.Figure()
    for name, record in runs.items():
        fig.add_scatter(y=record["losses"], mode="lines", name=name,
                        line=dict(color=colours[name]))
    fig.update_layout(**LAYOUT, title=tr("Training loss per step: the same model, seed and "
                                         "batches in each precision"),
                      xaxis_title=tr("step"), yaxis_title=tr("loss"))
    return fig


def loss_verdict(runs: dict) -> Verdict:
    """How far each FP8 run's final loss lies from fp32's (their baseline: outside the Linear
    layers' matmuls they compute in float32, with no autocast), signed, against how far bf16's
    lies from fp32's; and whether the from-scratch tensorwise run and torchao's agree step by
    step."""
    fp32 = final_loss(runs["fp32"])
    base = final_loss(runs["bf16"]) - fp32
    fp8 = {n: final_loss(r) - fp32 for n, r in runs.items() if n not in ("fp32", "bf16")}
    worst = max(fp8, key=lambda n: abs(fp8[n]))
    values = dict(worst=worst, gap=fp8[worst], dist=abs(fp8[worst]), fp32=fp32, base=base,
                  tail=TAIL)
    if abs(fp8[worst]) <= abs(base):
        headline = tr("Every FP8 run ends within {dist:.4f} of fp32's loss {fp32:.4f}, their "
                      "baseline (mean of the last {tail} steps; the farthest: {worst}, "
                      "{gap:+.4f}), no "
                      "farther than bf16 ends from fp32 ({base:+.4f})", **values)
    else:
        headline = tr("The FP8 runs end up to {dist:.4f} from fp32's loss {fp32:.4f}, their "
                      "baseline (mean of the last {tail} steps; the farthest: {worst}, "
                      "{gap:+.4f}), farther "
                      "than bf16 ends from fp32 ({base:+.4f})", **values)
    details = [tr("fp32: {loss:.4f}", loss=fp32),
               tr("bf16 (autocast): {loss:.4f} ({gap:+.4f} from fp32)",
                  loss=final_loss(runs["bf16"]), gap=base)]
    details += [tr("{run}: {loss:.4f} ({gap:+.4f} from fp32)", run=n, loss=final_loss(runs[n]),
                   gap=fp8[n]) for n in fp8]
    if "tensorwise" in runs and TORCHAO in runs:
        diff = max(abs(a - b) for a, b in zip(runs["tensorwise"]["losses"], runs[TORCHAO]["losses"]))
        details.append(tr("from-scratch tensorwise against torchao's: the losses differ by at "
                          "most {diff:.2g} over {steps} steps", diff=diff,
                          steps=len(runs[TORCHAO]["losses"])) if diff else
                       tr("from-scratch tensorwise against torchao's: the same loss at every one "
                          "of {steps} steps", steps=len(runs[TORCHAO]["losses"])))
    elif TORCHAO not in runs:
        details.append(tr("torchao's run: not measured (torchao is not installed here, or does "
                          'not load with this torch: pip install "gpututor[compress]")'))
    return headline, "\n".join(details), "good" if abs(fp8[worst]) <= abs(base) else "mixed"


def histogram_figure(record: dict, layer: str) -> go.Figure:
    """Where ``layer``'s input, weight and output gradient land at the last step, scaled as
    tensorwise scaling scales them: a histogram of log2|value| per operand, with the format's
    largest value and the flush edge (half its smallest subnormal) drawn as lines."""
    names = list(OPERANDS)
    fig = make_subplots(rows=1, cols=3, subplot_titles=[
        f"{op} ({OPERANDS[op].upper()})" for op in names])
    colours = colours_for(names)
    for i, op in enumerate(names, 1):
        logs, _zeros = scaled_log2(record["kept"][f"{layer}.{op}"], op)
        fig.add_histogram(x=logs.numpy(), nbinsx=60, name=op, marker_color=colours[op],
                          row=1, col=i, showlegend=False)
        edges = format_edges(OPERANDS[op])
        fig.add_vline(x=edges["max"], line=dict(color="#888", dash="dash"), row=1, col=i)
        fig.add_vline(x=edges["flush"], line=dict(color="#888", dash="dot"), row=1, col=i)
    fig.update_layout(template=TEMPLATE, height=380, margin=MARGIN,
                      title=tr("{layer}, last step: log2 |value x scale| (dashed: the format's "
                               "largest value; dotted: below it, a value flushes to 0)",
                               layer=layer))
    fig.update_xaxes(title_text="log2")
    return fig


def flush_sentence(record: dict, layer: str) -> str:
    """How many of ``layer``'s operands flushed to 0 at the last step, per operand, counted."""
    parts = []
    for op in OPERANDS:
        t = record["kept"][f"{layer}.{op}"]
        logs, zeros = scaled_log2(t, op)
        flushed = int((logs <= format_edges(OPERANDS[op])["flush"]).sum())
        parts.append(tr("{op}: {flushed:,} of {n:,} nonzero values below the flush edge",
                        op=op, flushed=flushed, n=logs.numel()))
    return "; ".join(parts)


def cast_rows(record: dict) -> tuple[list[str], list[list[str]]]:
    """A from-scratch run's casts over all steps and layers, per operand: values cast, how many
    overflowed (clamped to ±max) and how many nonzero values flushed to 0."""
    columns = [tr("operand"), tr("values cast"), tr("overflowed"), tr("flushed to 0"),
               tr("flushed share")]
    rows = [[op, f"{t['values']:,}", f"{t['overflow']:,}", f"{t['flushed']:,}",
             f"{t['flushed'] / t['values']:.2e}"] for op, t in run_totals(record).items()]
    return columns, rows


def recipe_flush_sentence(runs: dict) -> str:
    """The share of nonzero values each from-scratch recipe flushed to 0 over its whole run,
    all operands together, which flushed the fewest, and how many values each clamped
    (overflowed)."""
    shares, over = {}, {}
    for recipe in FROM_SCRATCH:
        if recipe in runs:
            totals = run_totals(runs[recipe]).values()
            shares[recipe] = sum(t["flushed"] for t in totals) / sum(t["values"] for t in totals)
            over[recipe] = sum(t["overflow"] for t in totals)
    fewest = min(shares, key=shares.get)
    return tr("Values flushed to 0 over the whole run, all operands: {parts}; the fewest: "
              "{fewest}. Values overflowed (clamped to the format's largest value): {over}",
              parts=", ".join(f"{r} {s:.2e}" for r, s in shares.items()), fewest=fewest,
              over=", ".join(f"{r} {n:,}" for r, n in over.items()))


def scales_figure(record: dict, layer: str) -> go.Figure:
    """``layer``'s tensorwise scales (``max / amax``) per step, per operand, on a log axis."""
    colours = colours_for(list(OPERANDS))
    fig = go.Figure()
    for op in OPERANDS:
        fig.add_scatter(y=record["scales"][f"{layer}.{op}"], mode="lines+markers", name=op,
                        line=dict(color=colours[op]))
    fig.update_layout(**LAYOUT, title=tr("{layer}: each operand's scale per step (max / amax)",
                                         layer=layer),
                      xaxis_title=tr("step"), yaxis=dict(title=tr("scale"), type="log"))
    return fig


def scales_sentence(record: dict, layer: str) -> str:
    """How much each operand's scale moved over the run: largest over smallest, per operand."""
    parts = [tr("{op}: x{ratio:,.1f}", op=op, ratio=max(s) / min(s))
             for op in OPERANDS for s in [record["scales"][f"{layer}.{op}"]]]
    return tr("Largest scale over smallest, per operand: {parts}", parts=", ".join(parts))


def weight_bytes_per_step(record: dict) -> str:
    """The weight values a from-scratch run's matmuls cast per step (forward and grad_input each
    cast the weight), as bytes in FP8 and in bf16, from the run's own cast counts."""
    totals, steps = run_totals(record), len(record["counts"])
    values = (totals["weight"]["values"] + totals["weight_for_dx"]["values"]) / steps
    return tr("Per step the converted layers' weights are cast twice (forward, and the gradient of "
              "the input): {values:,.0f} values, {fp8:,.0f} bytes in FP8 against {bf16:,.0f} in "
              "bf16, scales not counted", values=values, fp8=values, bf16=2 * values)


def bytes_rows(runs: dict) -> tuple[list[str], list[list[str]]]:
    """For each from-scratch recipe: the converted layers' weights in bf16 and in FP8 with the
    recipe's scales, in bytes counted from the tensors, and FP8's share of bf16's."""
    columns = [tr("recipe"), tr("weights"), tr("bf16 bytes"), tr("FP8 bytes"),
               tr("scale bytes"), tr("FP8 + scales / bf16")]
    rows = []
    for recipe in FROM_SCRATCH:
        if recipe not in runs:
            continue
        b = weight_bytes(runs[recipe]["model"], recipe)
        rows.append([recipe, f"{b['values']:,}", f"{b['bf16']:,}", f"{b['fp8']:,}",
                     f"{b['scales']:,}", f"{(b['fp8'] + b['scales']) / b['bf16']:.3f}"])
    return columns, rows
