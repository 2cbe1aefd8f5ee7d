"""Knowledge distillation (Hinton, Vinyals and Dean 2015): a small student learns from the
softened predictions of a bigger teacher as well as from the true next character.

    loss = α · T² · KL(softmax(teacher / T) ‖ softmax(student / T)) + (1 − α) · CE(student, target)

The temperature ``T`` > 1 flattens both distributions so the student also learns *which wrong
characters* the teacher finds plausible; ``T²`` keeps the soft term's gradients the same size
as ``T`` changes. ``α`` weighs the two terms (``α = 0`` is ordinary training).

:class:`DistillTask` trains the student in a rank: ``gpututor.lessons.compression.runs.
launch_distillation`` launches it (``launch(spec, task=...)``): the same batches and AdamW as a plain run of ``spec``,
plus a frozen teacher's forward pass each step. The student is ``spec``'s model, or, with
``student_shape``, a GPT smaller than the series' sizes (e.g. one layer, width 64), built the
same way from ``spec.seed``. With ``alpha=0`` it is ordinary training: the baseline.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import checks
from ..checks import InvalidValue
from ..files import write_atomically

SHAPE_FIELDS = ("n_layer", "n_head", "d_model")


def check_distillation_options(temperature, alpha) -> None:
    """Raise ``ValueError`` naming the argument, its value and what is allowed."""
    checks.where("temperature", temperature, checks.number_in(0, 100, low_open=True),
                 "a number in (0, 100]")
    checks.where("alpha", alpha, checks.number_in(0, 1), "a number in [0, 1]")


def check_student_shape(student_shape) -> None:
    """``student_shape``: None, or ``(name, value)`` pairs of GPT sizes (n_layer, n_head, d_model)."""
    if student_shape is None:
        return
    try:
        shape = dict(student_shape)
    except (TypeError, ValueError):
        shape = None
    ok = shape is not None and set(shape) <= set(SHAPE_FIELDS) and all(
        checks.int_in(1, 1024)(v) for v in shape.values())
    if ok and shape.get("d_model", 1) % shape.get("n_head", 1):
        ok = False
    if not ok:
        raise InvalidValue("student_shape", student_shape, "None or (name, value) pairs with "
                           f"names in {', '.join(SHAPE_FIELDS)}, integers in [1, 1024], d_model "
                           "a multiple of n_head")


def build_student(spec, student_shape=None) -> nn.Module:
    """``spec``'s model, or a GPT of ``student_shape`` (built from ``spec.seed`` the same way)."""
    import dataclasses

    from ..models import GPT, build_model, config_of

    check_student_shape(student_shape)
    if student_shape is None:
        return build_model(spec)
    if spec.model != "gpt":
        raise InvalidValue("model", spec.model, "'gpt'", "with a student_shape")
    cfg = dataclasses.replace(config_of(spec), **dict(student_shape))
    if cfg.d_model % cfg.n_head:
        raise InvalidValue("student_shape", student_shape, "a shape whose d_model is a multiple "
                           "of n_head", f"here: d_model={cfg.d_model} is not a multiple of "
                           f"n_head={cfg.n_head}")
    return GPT(cfg, seed=spec.seed)


def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor,
                      targets: torch.Tensor, temperature: float = 2.0, alpha: float = 0.5
                      ) -> torch.Tensor:
    """``α·T²·KL(teacher_T ‖ student_T) + (1−α)·CE(student, targets)``, averaged over tokens.

    Logits are ``(..., vocab)``; ``targets`` holds the matching class ids ``(...)``.
    """
    check_distillation_options(temperature, alpha)
    vocab = student_logits.shape[-1]
    s = student_logits.reshape(-1, vocab).float()
    t = teacher_logits.reshape(-1, vocab).float().detach()
    hard = F.cross_entropy(s, targets.reshape(-1))
    soft = F.kl_div(F.log_softmax(s / temperature, dim=-1), F.log_softmax(t / temperature, dim=-1),
                    log_target=True, reduction="batchmean")  # sum over vocab, mean over tokens
    return alpha * temperature**2 * soft + (1 - alpha) * hard


@dataclass(frozen=True)
class DistillTask:
    """Train ``spec``'s model (the student) with :func:`distillation_loss` in a rank of ``launch``.

    The teacher is ``teacher_spec``'s model with the weights saved at ``teacher_state``. Each
    record has ``loss`` (the student's cross-entropy on the true targets, comparable to a plain
    run's loss) and ``objective`` (the distillation loss it was trained on).
    """

    teacher_spec: object
    teacher_state: str
    temperature: float = 2.0
    alpha: float = 0.5
    save_state: Optional[str] = None
    student_shape: Optional[tuple] = None

    def __call__(self, spec, rank, world_size, device, emit) -> None:
        from ..data import batches
        from ..models import build_model, count_parameters

        if device.type == "cpu":
            torch.set_num_threads(spec.threads_per_rank)
        teacher = None
        if self.alpha > 0:  # alpha = 0 is plain training: no teacher needed (it may not exist yet)
            teacher = build_model(self.teacher_spec)
            # tensors only: unpickling anything else from a file could run code
            teacher.load_state_dict(torch.load(self.teacher_state, map_location="cpu",
                                               weights_only=True))
            teacher = teacher.to(device).eval().requires_grad_(False)
        student = build_student(spec, self.student_shape).to(device)
        optimizer = torch.optim.AdamW(student.parameters(), lr=spec.lr, weight_decay=0.0)
        start_time = time.time()
        for step, (inputs, targets) in enumerate(batches(spec)):
            inputs, targets = inputs.to(device), targets.to(device)
            start = time.perf_counter()
            with torch.no_grad():
                teacher_logits = teacher(inputs) if teacher is not None else None
            optimizer.zero_grad(set_to_none=True)
            logits = student(inputs)
            hard = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
            objective = hard if self.alpha == 0 else distillation_loss(
                logits, teacher_logits, targets, self.temperature, self.alpha)
            objective.backward()
            optimizer.step()
            loss = hard.item()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            step_time = time.perf_counter() - start
            emit({"step": step, "loss": loss, "objective": objective.item(),
                  "time": time.time() - start_time, "step_time_s": step_time,
                  "tokens_per_s": inputs.numel() / step_time, "params": count_parameters(student),
                  "device": str(device), "world_size": world_size, "probe": False})
        if self.save_state:
            state = {k: v.detach().cpu() for k, v in student.state_dict().items()}
            write_atomically(self.save_state, lambda f: torch.save(state, f), binary=True)
