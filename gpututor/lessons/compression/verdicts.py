"""Lesson 07's results as a learner reads them: the rows of its tables, and one verdict per result,
its words chosen from the run's numbers.

Each ``*_verdict`` returns ``(headline, details, tone)`` for :func:`gpututor.i18n.show_verdict`:
one sentence true for the numbers given, the figures behind it as details, and "good", "bad" or
"mixed" (a fact the lesson neither hopes for nor fears).
"""
from __future__ import annotations

from ...i18n import tr
from .runs import pruned_latency, pruned_latency_lines, variant_label

# a validation loss within this of another reads as "as good as" it (the lesson's runs differ
# by a few thousandths where nothing was removed: int8 rounding, the same model fine-tuned)
LOSS_BAND = 0.02
# two students' losses within this read as "about the same" (one seed each)
STUDENT_BAND = 0.005


def teacher_verdict(summary: dict, val_loss: float, n_params: int, file_bytes: int
                    ) -> tuple[str, str, str]:
    """Whether the teacher's training loss fell by at least 10 % over its run (a model worth
    compressing), with its held-out loss; size and speed as details."""
    losses = summary["losses"]
    details = tr("{n:,} parameters, {mb:.2f} MB on disk; {steps} steps at {tokens} tokens/s",
                 n=n_params, mb=file_bytes / 1e6, steps=len(losses),
                 tokens=tr("not measured") if summary.get("tokens_per_s") is None
                 else f"{summary['tokens_per_s']:,.0f}")
    values = dict(first=losses[0], last=losses[-1], steps=len(losses), val=val_loss)
    if losses[-1] <= 0.9 * losses[0]:
        return tr("The teacher trained: its loss fell from {first:.2f} to {last:.2f} in {steps} "
                  "steps, and it scores {val:.3f} on held-out text", **values), details, "good"
    return tr("The teacher's loss barely fell ({first:.2f} to {last:.2f} in {steps} steps): what "
              "follows compresses a model that has learnt little", **values), details, "bad"


def rounding_rows(w, q, scale, back, n: int = 6) -> list[list[str]]:
    """The first ``n`` weights of row 0: the weight, its int8 code, the code times the row's
    scale, and the error."""
    return [[f"{a:.4f}", str(int(c)), f"{b:.4f}", f"{b - a:+.5f}"]
            for a, c, b in zip(w[0, :n].tolist(), q[0, :n].tolist(), back[0, :n].tolist())]


def rounding_verdict(error: dict, row_scale: float, row_max: float) -> tuple[str, str, str]:
    """Whether rounding moved every weight by at most half a step of its row's scale
    (``quantize.quantization_error``'s ``max_error_in_scales`` <= 0.5)."""
    details = "\n".join([
        tr("row 0's scale: max|w| / 127 = {amax:.4f} / 127 = {scale:.6f}", amax=row_max,
           scale=row_scale),
        tr("largest error {value:.4f} in the weights' units (max_abs_error)",
           value=error["max_abs_error"]),
        tr("relative error {value:.4f}: ‖error‖ / ‖w‖, Frobenius norms (relative_error)",
           value=error["relative_error"])])
    steps = error["max_error_in_scales"]
    if steps <= 0.5 + 1e-6:
        return tr("Rounding moved every weight of this matrix by at most {steps:.3f} of its row's "
                  "step: within the bound of half a step", steps=steps), details, "good"
    return tr("Rounding moved a weight of this matrix by {steps:.3f} of its row's step, more than "
              "the bound of half a step: the quantizer does not round to the nearest code",
              steps=steps), details, "bad"


def quantized_rows(rows: list[dict]) -> list[list[str]]:
    """Per variant (``{"variant", "bytes", "loss"}``, the first the fp32 baseline): MB, the file
    against the baseline's, validation loss and its change."""
    base = rows[0]
    return [[variant_label(r["variant"]), f"{r['bytes'] / 1e6:.2f}",
             f"{r['bytes'] / base['bytes']:.2f}x", f"{r['loss']:.4f}",
             f"{r['loss'] - base['loss']:+.4f}"] for r in rows]


def quantized_verdict(rows: list[dict], bound: dict) -> tuple[str, str, str]:
    """How far int8 shrank the file against what the fp32 parts left allow
    (``measure.int8_size_bound``), and whether the validation loss moved by under 1 % of the
    baseline's (rounding by half a step) or more."""
    base, variants = rows[0], rows[1:]
    ratios = [r["bytes"] / base["bytes"] for r in variants]
    worst = max(variants, key=lambda r: abs(r["loss"] - base["loss"]))
    change = worst["loss"] - base["loss"]
    details = tr("Linear weights (the head's tied copy counted as the embedding's) hold {share:.0%} "
                 "of the teacher's bytes: with them in 1 byte and the rest fp32, the file could "
                 "shrink at best to {bound:.2f}x (4x smaller would be 0.25x), plus the scales and, "
                 "where a variant makes one, an int8 copy of the tied head",
                 share=bound["linear_share"], bound=bound["bound"])
    low, high = f"{min(ratios):.2f}x", f"{max(ratios):.2f}x"
    values = dict(ratio=low if low == high else f"{low}-{high}", bound=bound["bound"],
                  change=change, name=variant_label(worst["variant"]),
                  share=abs(change) / base["loss"])
    if abs(change) < 0.01 * base["loss"]:
        return tr("int8 shrank the file to {ratio} the fp32 one (at best {bound:.2f}x: embeddings, "
                  "norms and biases stay fp32) and moved the validation loss by {size:.4f} at "
                  "most", size=abs(change), **values), details, "good"
    return tr("int8 shrank the file to {ratio} the fp32 one (at best {bound:.2f}x), but {name} "
              "moved the validation loss by {change:+.4f}, {share:.1%} of it: more than rounding "
              "by half a step usually costs", **values), details, "mixed"


def same_choice_verdict(counts: dict) -> tuple[str, str, str]:
    """Whether the from-scratch mask and torch's ``l1_unstructured`` chose the same weights
    (``prune.compare_pruning``)."""
    if counts["differ"] == 0:
        return tr("From scratch and torch's l1_unstructured chose the same {n:,} weights",
                  n=counts["pruned_scratch"]), "", "good"
    return tr("From scratch and torch's l1_unstructured disagree on {d:,} weights ({n:,} chosen "
              "from scratch)", n=counts["pruned_scratch"], d=counts["differ"]), "", "bad"


def finetune_rows(results: dict, steps: int) -> list[list[str]]:
    """Per pruned model (share pruned -> ``(sparsity reached, loss before, loss after)``; the key
    0.0 the unpruned model given the same steps): the table's cells."""
    return [[tr("unpruned") if share == 0 else f"{share:.0%}", f"{sparsity:.2%}", f"{before:.3f}",
             f"{after:.3f}"] for share, (sparsity, before, after) in results.items()]


def finetune_verdict(after: dict[float, float], unpruned: float, steps: int
                     ) -> tuple[str, str, str]:
    """Which pruned models (``after``: share pruned -> validation loss after ``steps`` steps of
    fine-tuning) came within :data:`LOSS_BAND` of the unpruned model given the same steps."""
    close = [s for s, loss in after.items() if loss <= unpruned + LOSS_BAND]
    far = [s for s in after if s not in close]
    values = dict(steps=steps, unpruned=unpruned, band=LOSS_BAND,
                  close=", ".join(f"{s:.0%}" for s in close),
                  far=", ".join(f"{s:.0%} ({after[s] - unpruned:+.3f})" for s in far))
    if not far:
        return tr("After {steps} steps of fine-tuning, every pruned model ({close} of the weights) "
                  "came within {band} of the unpruned one's {unpruned:.3f}", **values), "", "good"
    if close:
        return tr("After {steps} steps of fine-tuning, {close} pruned came within {band} of the "
                  "unpruned model's {unpruned:.3f}; {far} stayed behind", **values), "", "mixed"
    return tr("After {steps} steps of fine-tuning, every pruned model stayed behind the unpruned "
              "one's {unpruned:.3f}: {far}", **values), "", "bad"


def sparse_verdict(timing: list[dict]) -> tuple[str, str, str]:
    """At which shares of zeros the sparse CSR kernel beat the dense one (rows of
    ``prune.matmul_seconds`` with their ``sparsity``)."""
    faster = [r["sparsity"] for r in timing if r["sparse_csr"] < r["dense"]]
    if faster:
        return tr("Sparse CSR beat the dense kernel here only with {where} of the weights pruned",
                  where=", ".join(f"{s:.0%}" for s in faster)), "", "mixed"
    return tr("Sparse CSR was slower than the dense kernel at every sparsity measured here"), "", \
        "mixed"


def neurons_verdict(width: tuple[int, int], params: tuple[int, int], before: float, after: float,
                    unpruned: float, steps: int) -> tuple[str, str, str]:
    """Removing MLP neurons: what it cut, and whether after ``steps`` of fine-tuning the smaller
    model came within :data:`LOSS_BAND` of the unpruned one given the same steps."""
    details = tr("validation loss {before:.3f} before fine-tuning, {after:.3f} after {steps} steps",
                 before=before, after=after, steps=steps)
    values = dict(width=width[0], new_width=width[1], n=params[0], new_n=params[1], steps=steps,
                  after=after, unpruned=unpruned, behind=after - unpruned)
    if after <= unpruned + LOSS_BAND:
        return tr("MLP width {width} -> {new_width} cut the parameters from {n:,} to {new_n:,}; "
                  "after {steps} steps it scores {after:.3f}, within {band} of the unpruned "
                  "model's {unpruned:.3f}", band=LOSS_BAND, **values), details, "good"
    return tr("MLP width {width} -> {new_width} cut the parameters from {n:,} to {new_n:,}; after "
              "{steps} steps it scores {after:.3f}, {behind:.3f} behind the unpruned model's "
              "{unpruned:.3f}", **values), details, "mixed"


def students_verdict(alone: float, distilled: float) -> tuple[str, str, str]:
    """The distilled student's validation loss against the one trained alone: lower, higher or
    about the same (within :data:`STUDENT_BAND`); one seed each, which the details say."""
    details = tr("One seed each: this lesson does not measure how far another seed would move "
                 "either loss, so a small difference says little.")
    values = dict(alone=alone, distilled=distilled, diff=abs(distilled - alone))
    if distilled < alone - STUDENT_BAND:
        return tr("The distilled student scored {distilled:.3f} on held-out text, {diff:.3f} below "
                  "the student trained alone ({alone:.3f})", **values), details, "good"
    if distilled > alone + STUDENT_BAND:
        return tr("The distilled student scored {distilled:.3f} on held-out text, {diff:.3f} worse "
                  "than the student trained alone ({alone:.3f})", **values), details, "bad"
    return tr("The distilled student and the one trained alone scored about the same on held-out "
              "text ({distilled:.3f} and {alone:.3f})", **values), details, "mixed"


def int8_latency_verdict(rows: list[dict], unpruned: str, base: str = "fp32 teacher"
                         ) -> tuple[str, str, str]:
    """Each int8 variant's latency against ``base`` (the fp32 model it was made from): faster,
    slower, or within the noise, whose floor is taken as :func:`pruned_latency` takes it (the gap
    between ``base`` and ``unpruned``, two models of the same work, and each model's own jitter)."""
    by_name = {r["variant"]: r for r in rows}
    jitter = lambda r: r.get("latency_median_s", r["latency_s"]) / r["latency_s"] - 1
    pair = abs(by_name[unpruned]["latency_s"] / by_name[base]["latency_s"] - 1)
    pieces = []
    for r in rows:
        if not r["variant"].startswith("int8"):
            continue
        ratio = r["latency_s"] / by_name[base]["latency_s"]
        floor = max(pair, jitter(r), jitter(by_name[base]), jitter(by_name[unpruned]))
        words = tr("within the noise") if abs(ratio - 1) <= floor else \
            tr("faster") if ratio < 1 else tr("slower")
        pieces.append(tr("{name} {ratio:.2f}x, {words}", name=variant_label(r["variant"]),
                         ratio=ratio, words=words))
    return tr("int8 latency against the fp32 teacher's here: {pieces}", pieces="; ".join(pieces)), \
        tr("The noise: the larger of the gap between the fp32 teacher and {unpruned} (the same "
           "work) and of each model's median pass over its fastest: at least {floor:.1%} here.",
           unpruned=variant_label(unpruned),
           floor=max([pair] + [jitter(by_name[n]) for n in (base, unpruned)])), "mixed"


def pruned_verdict(rows: list[dict], unpruned: str, same_work: str = "fp32 teacher"
                   ) -> tuple[str, str, str]:
    """Weight-pruned variants against ``unpruned`` (the same extra training): their files, and
    whether their latency moved beyond this measurement's noise (:func:`pruned_latency_lines`,
    whose lines are the details)."""
    by_name = {r["variant"]: r for r in rows}
    judged = pruned_latency(rows, unpruned, same_work)
    files = [j["row"]["bytes"] / by_name[unpruned]["bytes"] for j in judged]
    lines = pruned_latency_lines(rows, unpruned, same_work)
    moved = [variant_label(j["row"]["variant"]) for j in judged if not j["within"]]
    values = dict(files=", ".join(f"{f:.3f}x" for f in files),
                  latency=", ".join(f"{j['ratio']:.2f}x" for j in judged), moved=", ".join(moved))
    same_file = all(abs(f - 1) < 0.01 for f in files)
    details = "\n".join(lines)
    if same_file and not moved:
        return tr("Pruning weights changed neither the file ({files} the unpruned one's: zeros are "
                  "stored like any other number) nor the latency beyond the noise ({latency})",
                  **values), details, "mixed"
    if same_file:
        return tr("Pruning weights left the file as large ({files}: zeros are stored like any "
                  "other number) but moved the latency beyond the noise for {moved} ({latency})",
                  **values), details, "mixed"
    if not moved:
        return tr("Pruning weights changed the file ({files} the unpruned one's) but not the "
                  "latency beyond the noise ({latency})", **values), details, "mixed"
    return tr("Pruning weights changed the file ({files} the unpruned one's) and, beyond the "
              "noise, the latency of {moved} ({latency})", **values), details, "mixed"
