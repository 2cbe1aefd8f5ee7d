"""Lesson 06's results as a learner reads them: numbers written readably, the rows of its tables,
and one verdict per result, its words chosen from the run's numbers.

Each ``*_verdict`` returns ``(headline, details, tone)`` for :func:`gpututor.i18n.show_verdict`:
one sentence that is true for the numbers given (on any machine), the figures behind it as
details, and "good", "bad" or "mixed".
"""
from __future__ import annotations

from typing import Optional

from ...catalog import get_gpu
from ...i18n import ntr, tr

# a speed ratio within this share of 1 reads as "about as fast" (a few % is what two runs made one
# after the other on a shared machine can differ by)
SPEED_BAND = 0.10
# parameters, gradients and optimizer state "unchanged" between two runs: within 1 %
SAME_BYTES = 0.01
SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def readable(x: float) -> str:
    """``x`` as a learner reads it: a whole number below ten million with thousands separators
    (``65,504``), anything else in three significant digits (``3.4e+38``, ``6.1e-05``)."""
    if x == int(x) and abs(x) < 1e7:
        return f"{int(x):,}"
    return f"{x:.3g}"


def power_of_two(x: float) -> str:
    """A power of two as ``2¹⁶ = 65,536`` (``1`` stays ``1``); other numbers :func:`readable`."""
    exponent = int(x).bit_length() - 1 if x >= 1 and x == int(x) else None
    if exponent is None or 2 ** exponent != x:
        return readable(x)
    return "1" if exponent == 0 else f"2{str(exponent).translate(SUPERSCRIPT)} = {int(x):,}"


def _speed(ratio: float) -> str:
    """How ``ratio`` (a speed over fp32's) reads: faster, about as fast, slower."""
    if ratio > 1 + SPEED_BAND:
        return "faster"
    return "slower" if ratio < 1 - SPEED_BAND else "same"


# ---- section 2: what fp16 loses, with and without a loss scale -----------------------------------

def scale_verdict(rows: list[dict]) -> tuple[str, str, str]:
    """Whether one of the scales tried keeps more of the gradient in fp16 without overflowing.
    ``rows``: ``{"scale", "lost_fp16", "overflow_fp16", ...}`` (fractions of the nonzero
    entries), the first unscaled (scale 1)."""
    unscaled, details = rows[0], ""   # the table beside the verdict shows every row
    safe = [r for r in rows[1:] if r["overflow_fp16"] == 0]
    best = min(safe, key=lambda r: r["lost_fp16"]) if safe else None
    if unscaled["lost_fp16"] == 0:
        return tr("Unscaled, fp16 keeps every one of these gradient entries: this model, at this "
                  "step, needs no loss scale"), details, "mixed"
    if best is not None and best["lost_fp16"] < unscaled["lost_fp16"]:
        return tr("Unscaled, fp16 would zero {lost:.4%} of these gradient entries; a scale of "
                  "{scale} leaves {left:.4%} zeroed, with none overflowing",
                  lost=unscaled["lost_fp16"], scale=power_of_two(best["scale"]),
                  left=best["lost_fp16"]), details, "good"
    return tr("Unscaled, fp16 would zero {lost:.4%} of these gradient entries, and no scale tried "
              "keeps more of them without overflowing others", lost=unscaled["lost_fp16"]), \
        details, "bad"


# ---- section 3: the from-scratch scaler against GradScaler ---------------------------------------

def replay_verdict(rows: list[dict]) -> tuple[str, str, str]:
    """Whether the from-scratch scaler and ``torch.amp.GradScaler`` chose the same scale and the
    same skip at every step of ``replay_scalers``'s rows."""
    differ = [i for i, r in enumerate(rows)
              if (r["scale"], r["skipped"]) != (r["grad_scaler_scale"], r["grad_scaler_skipped"])]
    if differ:
        return ntr("Ours and GradScaler decided differently at step {steps}",
                   "Ours and GradScaler decided differently at steps {steps}", len(differ),
                   steps=", ".join(map(str, differ))), "", "bad"
    return tr("Ours and GradScaler chose the same scale and the same skip at all {n} steps",
              n=len(rows)), "", "good"


# ---- section 4: the from-scratch trainers --------------------------------------------------------

def trainer_rows(runs: dict) -> list[list[str]]:
    """One row per ``train_master_weights`` run (name -> run, the first fp32): final loss, the
    largest gap to the first run's loss at any step, steps with inf/nan gradients, steps
    skipped, and the median step time after the first ("not measured" for a 1-step run)."""
    reference = next(iter(runs.values())).losses
    rows = []
    for name, run in runs.items():
        gap = max(abs(a - b) for a, b in zip(run.losses, reference))
        step = run.steady_step_s
        rows.append([tr(name), f"{run.losses[-1]:.4f}", f"{gap:.1e}",
                     str(sum(r.overflowed for r in run.results)),
                     str(sum(r.skipped for r in run.results)),
                     tr("not measured") if step is None else f"{step * 1e3:.0f}"])
    return rows


def trainer_verdict(runs: dict, unscaled: str = "fp16, no scaling",
                    scaled: str = "fp16 + loss scaling") -> tuple[str, str, str]:
    """How far fp16 without a loss scale drifted from fp32's losses against fp16 with one: further
    (by more than 2x), less far, or about as far; inf/nan gradients taken unscaled first."""
    reference = next(iter(runs.values())).losses
    gap = {name: max(abs(a - b) for a, b in zip(run.losses, reference))
           for name, run in runs.items()}
    overflowed = sum(r.overflowed for r in runs[unscaled].results)
    details = "\n".join(tr("{name}: largest gap to fp32's loss {gap:.1e}", name=tr(name), gap=g)
                        for name, g in gap.items())
    values = dict(unscaled=gap[unscaled], scaled=gap[scaled], steps=len(reference))
    if overflowed:
        return tr("Without a loss scale, fp16 met inf/nan gradients in {n} of {steps} steps and "
                  "stepped on them anyway (only a scaler skips)", n=overflowed,
                  steps=len(reference)), details, "bad"
    if gap[unscaled] > 2 * gap[scaled]:
        return tr("Without a loss scale, fp16 drifted further from fp32's loss than with one: "
                  "largest gaps {unscaled:.1e} against {scaled:.1e} over {steps} steps",
                  **values), details, "good"
    if gap[scaled] > 2 * gap[unscaled]:
        return tr("With a loss scale, fp16 drifted further from fp32's loss than without one "
                  "({scaled:.1e} against {unscaled:.1e} over {steps} steps): in this short run "
                  "scaling bought nothing measurable", **values), details, "mixed"
    return tr("With and without a loss scale, fp16 stayed about as close to fp32's loss (largest "
              "gaps {scaled:.1e} and {unscaled:.1e} over {steps} steps): in this short run the "
              "entries fp16 zeroes unscaled did not show in the loss", **values), details, "mixed"


def held_rows(memory: dict, n_params: int) -> list[list[str]]:
    """What a master-weights trainer holds between steps (``MasterWeightsTrainer.memory()``):
    per kind MB and bytes per parameter, and their total."""
    names = {"master_weights": "master weights (fp32)", "compute_copy": "compute copy (16-bit)",
             "optimizer": "AdamW state (fp32)"}
    rows = [[tr(names.get(k, k)), f"{v / 1e6:.3f}", f"{v / n_params:.2f}"]
            for k, v in memory.items()]
    total = sum(memory.values())
    return rows + [[tr("total"), f"{total / 1e6:.3f}", f"{total / n_params:.2f}"]]


# ---- section 5: autocast against fp32, launched ---------------------------------------------------

def _where(device: str) -> str:
    return tr("on this GPU") if device.startswith("cuda") else tr("on this CPU")


def autocast_verdict(fp32: dict, bf16: dict) -> tuple[str, str, str]:
    """bf16 autocast's tokens/s against fp32's (two launched runs' summaries): faster, about as
    fast (within :data:`SPEED_BAND`) or slower, on the runs' device."""
    ratio = step_ratio(fp32, bf16)
    if ratio is None:
        return tr("A run measured no steady tokens/s: no speed to compare"), "", "mixed"
    gap = max(abs(a - b) for a, b in zip(fp32["losses"], bf16["losses"]))
    details = tr("tokens/s over the steady steps: fp32 {fp32:,.0f}, bf16 {bf16:,.0f}; largest "
                 "loss gap over {steps} steps {gap:.1e}", fp32=fp32["tokens_per_s"],
                 bf16=bf16["tokens_per_s"], steps=len(fp32["losses"]), gap=gap)
    values = dict(ratio=ratio, where=_where(bf16["device"]))
    speed = _speed(ratio)
    if speed == "faster":
        return tr("bf16 autocast trained {ratio:.2f}× as fast as fp32 {where}", **values), \
            details, "good"
    if speed == "slower":
        return tr("bf16 autocast trained slower than fp32 {where}: {ratio:.2f}× its tokens/s",
                  **values), details, "bad"
    return tr("bf16 autocast trained about as fast as fp32 {where} ({ratio:.2f}× its tokens/s)",
              **values), details, "mixed"


def autocast_rows(runs: dict) -> list[list[str]]:
    """Per launched run (precision -> summary): tokens/s over the steady steps, rank 0's peak
    memory and the last step's loss ("not measured" where a run has no figure)."""
    fmt = lambda v, f: tr("not measured") if v is None else format(v, f)
    return [[name, fmt(s.get("tokens_per_s"), ",.0f"),
             fmt(None if not s.get("peak_mem_bytes") or s["peak_mem_bytes"][0] is None
                 else s["peak_mem_bytes"][0] / 1e6, ".1f"), fmt(s.get("final_loss"), ".4f")]
            for name, s in runs.items()]


def step_ratio(fp32: dict, bf16: dict) -> Optional[float]:
    """bf16's tokens/s over fp32's in two launched runs; None where either measured none."""
    a, b = fp32.get("tokens_per_s"), bf16.get("tokens_per_s")
    return b / a if a and b else None


AUTOCAST_CATEGORIES = {"params": "parameters", "grads": "gradients", "optimizer": "optimizer state",
              "activations": "activations"}


def _bytes(summary: dict, category: str) -> Optional[float]:
    held = (summary.get("mem_by_category") or {}).get(category)
    return None if not held or held[0] is None else held[0]


def memory_rows(fp32: dict, bf16: dict) -> list[list[str]]:
    """Rank 0's bytes by category in both runs, MB, and bf16 over fp32 ("not measured" where a
    run has no figure)."""
    rows = []
    for key, label in AUTOCAST_CATEGORIES.items():
        a, b = _bytes(fp32, key), _bytes(bf16, key)
        mb = lambda v: tr("not measured") if v is None else f"{v / 1e6:.2f}"
        rows.append([tr(label), mb(a), mb(b),
                     tr("not measured") if a is None or b is None else f"{b / a:.2f}"])
    return rows


def memory_verdict(fp32: dict, bf16: dict) -> tuple[str, str, str]:
    """Whether autocast left parameters, gradients and optimizer state at fp32's bytes (it should:
    it casts per operation), and what it did to activations."""
    ratio = {k: (None if _bytes(fp32, k) is None or _bytes(bf16, k) is None
                 else _bytes(bf16, k) / _bytes(fp32, k)) for k in AUTOCAST_CATEGORIES}
    if any(v is None for v in ratio.values()):
        return tr("Memory by category was not measured in both runs: nothing to compare"), "", \
            "mixed"
    changed = [tr(AUTOCAST_CATEGORIES[k]) for k in ("params", "grads", "optimizer")
               if abs(ratio[k] - 1) > SAME_BYTES]
    if changed:
        return tr("bf16 autocast changed what should stay in fp32: {what} (autocast casts per "
                  "operation and leaves the weights, their gradients and AdamW's state alone)",
                  what=", ".join(changed)), "", "bad"
    if ratio["activations"] < 1 - SPEED_BAND:
        return tr("Parameters, gradients and optimizer state took fp32's bytes in both runs; "
                  "bf16 autocast cut the activations to {ratio:.2f}× (0.50 if all that backward "
                  "keeps were bf16)", ratio=ratio["activations"]), "", "good"
    return tr("Parameters, gradients and optimizer state took fp32's bytes in both runs, and the "
              "activations about as much too ({ratio:.2f}×)", ratio=ratio["activations"]), "", \
        "mixed"


# ---- section 5: one matmul in each format, and what a GPU's catalogue peaks say ------------------

def catalogue_ratios(gpu: str = "H100-80GB") -> dict[str, Optional[float]]:
    """``gpu``'s dense peak in bf16 and fp16 over its fp32 peak, from ``gpututor.catalog``
    (datasheet figures, not measured); None for a format it has no units for."""
    entry = get_gpu(gpu)
    fp32 = entry.peak_flops["fp32"]
    return {p: (entry.peak_flops[p] / fp32 if entry.peak_flops[p] else None)
            for p in ("bf16", "fp16")}


def matmul_verdict(rates: dict[str, float], features: Optional[list[str]],
                   gpu: str = "H100-80GB") -> tuple[str, str, str]:
    """A bf16 matmul's rate over fp32's on this CPU (``matmul_flops_by_dtype``), read with the
    bf16 instructions it lists (``cpu_matrix_features``: None where it lists none at all), beside
    ``gpu``'s catalogue ratio (not measured)."""
    ratio = rates["bf16"] / rates["fp32"]
    expected = catalogue_ratios(gpu)["bf16"]
    details = "\n".join([
        " | ".join(f"{name} {rate / 1e9:.1f} GFLOP/s" for name, rate in rates.items()),
        tr("CPU bf16/fp16 instructions: this machine does not list its CPU's instructions")
        if features is None else
        tr("CPU bf16/fp16 instructions found: {features}", features=", ".join(features) or
           tr("none")),
        tr("{gpu}: {bf16:.1f}× fp32's dense peak in bf16 (gpututor.catalog, from the datasheet; "
           "not measured)", gpu=gpu, bf16=expected)])
    listed = None if features is None else any("bf16" in f.lower() for f in features)
    why = {None: tr("this machine does not list its CPU's instructions"),
           True: tr("it lists bf16 instructions"),
           False: tr("it lists no bf16 instructions")}[listed]
    values = dict(ratio=ratio, why=why, gpu=gpu, expected=expected)
    speed = _speed(ratio)
    if speed == "faster":
        return tr("On this CPU a bf16 matmul ran {ratio:.2f}× as fast as fp32 ({why}); {gpu}'s "
                  "catalogue peaks give {expected:.1f}×", **values), details, "good"
    if speed == "slower":
        return tr("On this CPU a bf16 matmul ran slower than fp32, {ratio:.2f}× its rate ({why}): "
                  "the reverse of {gpu}'s catalogue peaks, {expected:.1f}×", **values), details, \
            "bad"
    return tr("On this CPU a bf16 matmul ran about as fast as fp32 ({ratio:.2f}×; {why}); "
              "{gpu}'s catalogue peaks give {expected:.1f}×", **values), details, "mixed"
