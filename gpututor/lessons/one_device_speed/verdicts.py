"""Lesson 01c's verdicts: what each result cell measured, one sentence chosen from the numbers,
with the figures behind it as details, and the rows of the tables beside them. Each verdict
returns ``(headline, details, tone)`` for ``gpututor.i18n.show_verdict``; none measures anything
(``tests/lessons/one_device_speed`` feeds them numbers).

Beside this run's compile speedup stands one published figure, labelled as such: PyTorch's own
benchmark of ``torch.compile`` on an A100 (:data:`PUBLISHED_COMPILE_A100`), the GPU result a CPU
run can reverse.
"""
from __future__ import annotations

from ...i18n import tr

# PyTorch 2.0's announcement: over 163 open-source models, compiled training on an NVIDIA A100
# ran 21 % faster on average in float32 and 51 % faster with AMP [ref: pytorch2022-compile-a100].
# Published, not measured here.
PUBLISHED_COMPILE_A100 = {"models": 163, "float32": 1.21, "amp": 1.51}
# float rounding: a lever whose losses stay this close to the row above's changed nothing learned
ROUNDING = 1e-4


def compiler_missing_verdict(missing) -> tuple[str, str, str]:
    """What a :class:`~.compiled.CompilerMissing` means for this lesson, in the notebook's
    language (the error's own message stays English, as the package's errors do)."""
    details = tr("torch.compile on {device} needs a {kind} compiler and none is on PATH (looked "
                 "for {names}). Install one (Debian/Ubuntu: `apt install g++`; conda: `conda "
                 "install -c conda-forge cxx-compiler`) and restart the kernel.",
                 device=missing.device_type, kind=missing.kind,
                 names=", ".join(missing.looked_for))
    return tr("No {kind} compiler here: torch.compile cannot build its kernels, so section 1 shows "
              "nothing more and section 4 leaves out the compiled row; the rest of the lesson runs",
              kind=missing.kind), details, "bad"


def compile_verdict(comp: dict) -> tuple[str, str, str]:
    """Whether compiled was faster than eager in every interleaved pair (then how many steps
    repay the first compile), slower in every one, or on both sides of 1 (``compile_costs``)."""
    low, high = comp["speedup_range"]
    words = dict(n=len(comp["pairs"]), speedup=comp["speedup"], low=low, high=high)
    details = "\n".join([
        tr("first compiled step {compile_s:.1f} s (start-up and compile, caches empty); again after "
           "a reset {recompile_s:.1f} s (caches filled)", compile_s=comp["compile_s"],
           recompile_s=comp["recompile_s"]),
        tr("steady forward + backward: eager {eager_ms:.0f} ms, compiled {compiled_ms:.0f} ms "
           "(medians, x{speedup:.2f}; the {n} interleaved pairs give x{low:.2f} to x{high:.2f}); "
           "losses {eager_loss:.6f} and {compiled_loss:.6f}, gradients within {grad_diff:.1e}",
           eager_ms=comp["eager_s"] * 1e3, compiled_ms=comp["compiled_s"] * 1e3,
           eager_loss=comp["loss"]["eager"], compiled_loss=comp["loss"]["compiled"],
           grad_diff=comp["max_grad_diff"], **words)])
    if low > 1:   # faster in every pair: the median difference repays start-up and compile
        # the first compiled step is one compiled step plus the one-time cost
        steps = (comp["compile_s"] - comp["compiled_s"]) / max(comp["eager_s"] - comp["compiled_s"], 1e-9)
        return tr("Compiled was faster than eager in all {n} pairs (×{speedup:.2f}, medians): its "
                  "start-up and compile are repaid after about {steps:,.0f} steps", steps=steps,
                  **words), details, "good"
    if high < 1:
        return tr("Compiled was slower than eager in all {n} pairs (×{speedup:.2f}, medians): on "
                  "this machine the compile is not repaid", **words), details, "bad"
    return tr("Compiled and eager cannot be told apart here: the {n} pairs fall on both sides of ×1 "
              "(×{low:.2f} to ×{high:.2f}), so no repayment is counted", **words), details, "mixed"


def kernel_rows(comp: dict, top: int = 5) -> list[list[str]]:
    """The ``top`` generated kernels that fuse the most operators: their operators."""
    fused = [k for k in comp["kernels"] if len(k["computing_ops"]) > 1]
    return [[", ".join(k["computing_ops"])]
            for k in sorted(fused, key=lambda k: -len(k["computing_ops"]))[:top]]


def profile_verdict(parts: dict, optimizer_share: float, outside_share: float) -> tuple[str, str, str]:
    """Where the profiled steps' time went (``Profile.breakdown()``): mostly matmul-like compute
    (half or more; only a faster matmul shrinks it), or mostly outside it. ``outside_share``:
    forward + backward's time outside the matmuls over its own time, at most what compilation
    can save there."""
    share = {k: parts[f"{k}_s"] / parts["wall_s"] for k in ("compute", "copy", "other", "idle")}
    details = tr("compute {compute:.0%}, copy {copy:.0%}, other {other:.0%}, idle {idle:.0%} of "
                 "{wall_ms:.0f} ms; the optimizer's phase {optimizer:.0%} of the wall time",
                 wall_ms=parts["wall_s"] * 1e3, optimizer=optimizer_share, **share)
    words = dict(compute=share["compute"], outside=outside_share)
    if share["compute"] >= 0.5:
        return tr("Compute (matmuls and attention) took {compute:.0%} of the profiled steps: only "
                  "faster matmul and attention kernels shrink that; outside the matmuls, forward + backward spent "
                  "{outside:.0%} of their time, at most what compilation can save there",
                  **words), details, "mixed"
    return tr("Compute (matmuls and attention) took only {compute:.0%} of the profiled steps; outside the "
              "matmuls, forward + backward spent {outside:.0%} of their time, at most what "
              "compilation can save there", **words), details, "mixed"


def roofline_verdict(n_ops: int, here: list[str], gpu: list[str], gpu_name: str) -> tuple[str, str, str]:
    """How many of the model's ``n_ops`` operators are compute-bound here (``here``) and would
    be on ``gpu_name`` in bf16 (``gpu``): fewer there means its matrices are too small for it."""
    words = dict(n_here=len(here), n_gpu=len(gpu), n_ops=n_ops, gpu=gpu_name)
    details = "\n".join([
        tr("compute-bound here (fp32): {ops}", ops=", ".join(tr(o) for o in here) or "—"),
        tr("compute-bound on the {gpu} in bf16: {ops}", gpu=gpu_name,
           ops=", ".join(tr(o) for o in gpu) or "—")])
    if len(gpu) < len(here):
        return tr("{n_here} of {n_ops} operators are compute-bound here, {n_gpu} would be on the "
                  "{gpu} in bf16: this model's matrices are too small to keep that GPU's arithmetic "
                  "busy; larger ones (batch, width) move the points right", **words), details, "bad"
    return tr("{n_gpu} of {n_ops} operators would be compute-bound on the {gpu} in bf16, {n_here} "
              "are here", **words), details, "good"


def lever_rows(levers: list[dict], gaps: dict[str, float]) -> list[list[str]]:
    """One row per ``before_and_after`` row: tokens/s, its ratio to the first row's, the peak
    ("not measured" where the probe could not see), the last loss and the largest loss gap to the
    row above (``loss_gaps``; none for the first row)."""
    first = levers[0]["tokens_per_s"]
    return [[tr(r["name"]), f"{r['tokens_per_s']:,.0f}", f"{r['tokens_per_s'] / first:.2f}×",
             tr("not measured") if r["peak_bytes"] is None else f"{r['peak_bytes'] / 1e6:.1f}",
             f"{r['losses'][-1]:.4f}", f"{gaps[r['name']]:.1e}" if r["name"] in gaps else "-"]
            for r in levers]


def levers_verdict(levers: list[dict], gaps: dict[str, float]) -> tuple[str, str, str]:
    """All the levers together against the first row, and per lever what it did against the row
    above it: faster or slower (SDPA and the 8-bit state trade time for memory; compilation is
    there for time alone), and whether it moved the losses beyond float rounding."""
    ratio = levers[-1]["tokens_per_s"] / levers[0]["tokens_per_s"]
    lines = []
    for above, row in zip(levers, levers[1:]):
        step = row["tokens_per_s"] / above["tokens_per_s"]
        words = dict(name=tr(row["name"]), step=step, gap=gaps[row["name"]])
        if step > 1:
            lines.append(tr("{name}: ×{step:.2f} the row above's tokens/s, faster", **words))
        elif row["name"] == "+ torch.compile":
            lines.append(tr("{name}: ×{step:.2f} the row above's tokens/s: its kernels did not beat "
                            "eager's here", **words))
        elif None not in (row["peak_bytes"], above["peak_bytes"]) and \
                row["peak_bytes"] < above["peak_bytes"]:
            lines.append(tr("{name}: ×{step:.2f} the row above's tokens/s: time traded for memory "
                            "(peak {before:.1f} → {after:.1f} MB)", before=above["peak_bytes"] / 1e6,
                            after=row["peak_bytes"] / 1e6, **words))
        else:
            lines.append(tr("{name}: ×{step:.2f} the row above's tokens/s, slower, and its peak "
                            "not measured lower", **words))
        lines.append(tr("{name}: losses within {gap:.1e} of the row above: float rounding", **words)
                     if gaps[row["name"]] <= ROUNDING else
                     tr("{name}: losses up to {gap:.1e} from the row above: more than float "
                        "rounding", **words))
    words = dict(ratio=ratio, first=tr(levers[0]["name"]))
    if ratio > 1:
        return tr("With every lever on, ×{ratio:.2f} the tokens/s of the first row ({first})",
                  **words), "\n".join(lines), "good"
    return tr("With every lever on, ×{ratio:.2f} the tokens/s of the first row ({first}): slower "
              "here", **words), "\n".join(lines), "bad"
