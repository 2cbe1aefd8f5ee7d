"""Lesson 07: launch a student distilled from a trained teacher (one rank, live records), and
measure what the distillation temperature does to the teacher's distributions."""
from __future__ import annotations

import inspect
import math
from typing import Optional

import torch
import torch.nn.functional as F

from ...checks import InvalidValue
from ...compression.distill import (DistillTask, check_distillation_options, check_student_shape,
                                    distillation_loss)
from ...i18n import tr
from ...runtime.launcher import launch
from ...runtime.summary import summarize


# the package's default temperature (distillation_loss, DistillTask): the lesson distils at it
TEMPERATURE = inspect.signature(distillation_loss).parameters["temperature"].default


@torch.inference_mode()
def softened(model: torch.nn.Module, data: list, temperature: float, top: int = 5) -> dict:
    """``model``'s next-character distributions ``softmax(logits / temperature)`` over ``data``
    (``(inputs, targets)`` batches), averaged over every position: the likeliest character's
    probability (``top1``), that of the next ``top - 1`` (``next``), and the entropy in bits."""
    model.eval()
    top1 = following = entropy = 0.0
    count = 0
    for x, _ in data:
        p = F.softmax(model(x).flatten(0, 1).float() / temperature, dim=-1)
        ranked = p.sort(dim=-1, descending=True).values
        top1 += ranked[:, 0].sum().item()
        following += ranked[:, 1:top].sum().item()
        entropy += -(p * p.clamp_min(1e-30).log()).sum().item() / math.log(2)
        count += p.shape[0]
    return {"temperature": temperature, "top1": top1 / count, "next": following / count,
            "entropy_bits": entropy / count}


class DistillRun(DistillTask):
    """:class:`DistillTask`, summarised like a training run (loss, tokens/s, ...)."""

    def summarize(self, spec, records: list[dict], status: str = "finished") -> dict:
        return summarize(spec, records, status)


def launch_distillation(student_spec, teacher_spec, teacher_state: str,
                        temperature: float = TEMPERATURE,
                        alpha: float = 0.5, save_state: Optional[str] = None,
                        student_shape: Optional[tuple] = None):
    """Start training a student distilled from a trained teacher; return the :class:`Run`.

    ``teacher_state`` is the teacher run's saved weights (its ``save_state`` option). The student
    trains on ``student_spec``'s batches, steps and learning rate, on one rank; it is that spec's
    model, or a GPT of ``student_shape`` (see :func:`build_student`).
    """
    check_distillation_options(temperature, alpha)
    check_student_shape(student_shape)
    if student_spec.world_size != 1:
        raise InvalidValue("world_size", student_spec.world_size, "1 (the student trains on one "
                           "rank)", "for distillation")
    if student_spec.seq_len != teacher_spec.seq_len:
        raise InvalidValue("teacher_spec.seq_len", teacher_spec.seq_len,
                           f"{student_spec.seq_len}, the student's (teacher and student read the "
                           "same batches)")
    shape = None if student_shape is None else tuple(dict(student_shape).items())
    task = DistillRun(teacher_spec, str(teacher_state), temperature, alpha, save_state, shape)
    return launch(student_spec, task=task)


# the variants' names the lesson builds, as templates (the numbers filled in): each has a zh line
VARIANT_TEMPLATES = ("{share}% weights pruned + {steps} steps",
                     "{share}% neurons removed + {steps} steps", "unpruned + {steps} steps")


def variant_label(name: str) -> str:
    """A variant's name in the notebook's language: ``tr`` of the name itself ("fp32 teacher",
    "student alone", ...), or of the template of :data:`VARIANT_TEMPLATES` it fills in."""
    import re
    for template in VARIANT_TEMPLATES:
        pattern = "^" + re.escape(template).replace(r"\{share\}", r"(?P<share>\d+)") \
            .replace(r"\{steps\}", r"(?P<steps>\d+)") + "$"
        found = re.match(pattern, name)
        if found:
            return tr(template, **found.groupdict())
    return tr(name)


def pruned_latency(rows: list[dict], unpruned: str, same_work: str = "fp32 teacher") -> list[dict]:
    """Each weight-pruned variant's latency against the unpruned one, judged against the noise.

    The noise floor is the larger of two measured spreads: how far apart ``same_work`` and
    ``unpruned`` are (two models of the same shape: the same dense kernels, the same work), and
    how far each model's median pass is from its fastest (``latency_median_s`` / ``latency_s``:
    the jitter of its own passes), for the models compared. Per pruned variant: its ``row``, the
    latency ``ratio`` to the unpruned one, the ``floor``, and whether the change is ``within`` it.
    """
    by_name = {r["variant"]: r for r in rows}
    base = by_name[unpruned]["latency_s"]
    jitter = lambda r: r.get("latency_median_s", r["latency_s"]) / r["latency_s"] - 1
    pair = abs(by_name[same_work]["latency_s"] / base - 1)
    judged = []
    for r in rows:
        if "weights pruned" not in r["variant"]:
            continue
        ratio = r["latency_s"] / base
        floor = max(pair, jitter(by_name[unpruned]), jitter(by_name[same_work]), jitter(r))
        judged.append({"row": r, "ratio": ratio, "floor": floor, "within": abs(ratio - 1) <= floor})
    return judged


def pruned_latency_lines(rows: list[dict], unpruned: str, same_work: str = "fp32 teacher") -> list[str]:
    """:func:`pruned_latency` in words, one line per weight-pruned variant: within the noise
    floor it is reported as no measurable change; beyond it, the code says "faster" or "slower"
    from the numbers."""
    lines = []
    for judged in pruned_latency(rows, unpruned, same_work):
        ratio = judged["ratio"]
        values = dict(name=variant_label(judged["row"]["variant"]), ratio=ratio,
                      floor=judged["floor"], same=variant_label(same_work),
                      unpruned=variant_label(unpruned))
        if judged["within"]:
            lines.append(tr("{name}: latency {ratio:.3f}x the unpruned one, within the noise of "
                            "this measurement ({floor:.1%}: the larger of the gap between two models "
                            "doing the same work, {same} and {unpruned}, and of each model's median "
                            "pass over its fastest): no measurable change", **values))
        else:
            lines.append(tr("{name}: latency {ratio:.3f}x the unpruned one, {change} beyond the "
                            "noise of this measurement ({floor:.1%}: the larger of the gap between "
                            "two models doing the same work, {same} and {unpruned}, and of each "
                            "model's median pass over its fastest)",
                            change=tr("faster") if ratio < 1 else tr("slower"), **values))
    return lines
