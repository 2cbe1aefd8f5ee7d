"""Lesson 06's exercise checkers: each takes the learner's answer and the lesson's own objects
and derives what it expects, so the notebook shows only the call. ``...`` means "not answered
yet".

- :func:`check_loss_scaler`: the learner's update rule, run step by step against
  ``torch.amp.GradScaler`` on the lesson's gradient stream and on streams the learner does not
  choose (other start scales and growth intervals), with the package's scaler and GradScaler's
  own update refused while it runs.
- :func:`check_held_bytes`: the learner's function from a model, the compute copy's dtype and the
  optimizer to the bytes section 4's master-weights trainer holds between steps, run on
  layouts and models the lesson never prints (fixed and drawn) with the trainer, the
  package's bytes-per-parameter tables and torch's optimizers refused while it runs, against
  the checker's own one-step runs.
- :func:`check_flush_threshold`: below what magnitude a true gradient becomes 0 in fp16 with a
  static loss scale (fp16's smallest subnormal, from ``format_table``, and round-to-nearest).
"""
from __future__ import annotations

import functools
import math
import random
from typing import Callable, Iterable

import torch

from ...formulas import optimizer_state_bytes
from ...i18n import say, tr
from ...plan.memory import bytes_per_param, model_state_bytes
from ...precision.formats import format_table
from ...precision.loss_scaling import DynamicLossScaler, replay_scalers
from ...models import build_model
from ...measure.memory import optimizer_tensors, state_bytes
from ...precision.master_weights import MasterWeightsTrainer, train_master_weights
from ..common.code_exercise import call_refusing, number_from
from ..common.exercises import as_number, check_answer

# ---- exercise 1: the loss scaler's update rule -------------------------------------------------

INF, NAN = float("inf"), float("nan")
# (start scale, growth_interval, gradients): the checker's own streams, besides the lesson's.
# Growth every step, overflows in a row, growth right after a back-off, a long clean stretch.
STREAMS = ((2.0**16, 1, (1.0, 1.0, INF, 1.0, NAN, INF, 1.0, 1.0)),
           (2.0**7, 4, (1.0,) * 5 + (INF, 1.0, 1.0, 1.0, 1.0, 1.0, INF, INF, 1.0) + (1.0,) * 8),
           (3.0, 2, (INF, 1.0, 1.0, 1.0, INF, 1.0, 1.0, 1.0, 1.0, 1.0)))


def _scaler_references() -> tuple[tuple, tuple]:
    """Every way to the reference rule: the package's scaler, GradScaler's update (and FSDP's
    ShardedGradScaler's), and the kernel GradScaler calls (``torch._amp_update_scale_``, also as
    an aten op): the functions, and the ``(owner, name)`` attributes."""
    # FSDP's ShardedGradScaler has its own update, in Python on CPU (an examiner's reading)
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
    functions = (DynamicLossScaler.update, replay_scalers, torch.amp.GradScaler.update,
                 ShardedGradScaler.update, ShardedGradScaler._amp_update_scale_cpu_)
    kernels = ((torch, "_amp_update_scale_"), (torch.ops.aten, "_amp_update_scale_"),
               (torch.ops.aten, "_amp_update_scale"))
    return functions, kernels


def grad_scaler_scales(gradients: Iterable[float], init_scale: float,
                       growth_interval: int) -> list[float]:
    """The scale ``torch.amp.GradScaler`` applies at each step of ``gradients`` and after the
    last (GradScaler's defaults otherwise: x2 growth, x0.5 back-off)."""
    rows = replay_scalers(list(gradients) + [1.0], init_scale=init_scale,
                          growth_interval=growth_interval)
    return [row["grad_scaler_scale"] for row in rows]


def _pair(result) -> tuple:
    """The rule's ``(scale, clean_steps)`` (TypeError or ValueError if it is not a pair)."""
    scale, clean_steps = result
    return scale, clean_steps


def _first_difference(update_rule: Callable, gradients, init_scale: float,
                      growth_interval: int, where: str) -> tuple | None:
    """Run the rule over ``gradients`` with the references refused; the first step where its
    scale is not GradScaler's, as ``(step, its scale, GradScaler's)``, or None."""
    expected = grad_scaler_scales(gradients, init_scale, growth_interval)
    scale, clean_steps = init_scale, 0
    functions, kernels = _scaler_references()
    for step, g in enumerate(gradients, start=1):
        scale, clean_steps = call_refusing(
            update_rule, (scale, clean_steps, not math.isfinite(g), growth_interval),
            read=_pair, refused=functions, attributes=kernels,
            called=tr("loss scaler: your rule ran the package's scaler or GradScaler's own "
                      "update: write the rule yourself."),
            mistyped=tr("loss scaler: your rule did not return a pair (scale, clean_steps): "
                        "{error}"),
            failed=tr("loss scaler: on {where}, your rule failed at step {step}: {error}"),
            where=where, step=step)
        if as_number(scale) != expected[step]:
            return step, scale, expected[step]
    return None


def check_loss_scaler(update_rule, gradients: list[float], init_scale: float = 2.0**10,
                      growth_interval: int = 3) -> None:
    """``update_rule(scale, clean_steps, found_inf, growth_interval) -> (scale, clean_steps)``
    against ``torch.amp.GradScaler``, step by step (a rule that grows one step late can end at
    the same scale): on the lesson's ``gradients`` (from ``init_scale``, ``growth_interval``),
    then on :data:`STREAMS`, which the learner does not choose."""
    if update_rule is ...:
        say("Not answered yet: define my_update and run the cell again.")
        return
    cases = [(tuple(gradients), init_scale, growth_interval)] + \
        [(stream, start, interval) for start, interval, stream in STREAMS]
    for number, (stream, start, interval) in enumerate(cases):
        where = tr("section 3's stream") if number == 0 else \
            tr("the checker's stream {number}", number=number)
        found = _first_difference(update_rule, stream, start, interval, where)
        if found is None:
            continue
        step, mine, theirs = found
        event = tr("an overflow") if not math.isfinite(stream[step - 1]) else tr("a clean step")
        mine_number = as_number(mine)
        how = tr("not a number") if mine_number is None else \
            tr("too high") if mine_number > theirs else tr("too low")
        raise AssertionError(tr(
            "loss scaler: on {where} (start scale {start:g}, growth_interval={interval}), after "
            "step {step} ({event}) your rule's scale is {mine!r}, {how} against GradScaler's. "
            "Try again.", where=where, start=start, interval=interval, step=step, event=event,
            mine=mine, how=how))
    say("Correct: the same scale as GradScaler at every step of section 3's stream and of "
             "{count} streams of the checker's (other start scales and growth intervals).",
             count=len(STREAMS))


# ---- exercise 2: what a master-weights trainer holds, for layouts the lesson did not print ------

# (model, size, compute dtype, optimizer) every check runs: section 4's third trainer (fp16, AdamW)
# on a model the lesson never counts, and layouts it never prints (an fp32 copy, SGD's momentum)
HELD_CASES = (("gpt", "small", "fp16", "adamw"), ("moe", "tiny", "bf16", "sgd"),
              ("gpt", "tiny", "fp32", "adamw"), ("gpt", "small", "fp32", "sgd"))
HELD_MODELS = (("gpt", "tiny"), ("gpt", "small"), ("moe", "tiny"))
PRINTED = ("gpt", "tiny", "bf16", "adamw")   # section 4's table: no check draws it


def drawn_held_cases(count: int = 2, rng: random.Random | None = None) -> list[tuple]:
    """``count`` (model, size, dtype, optimizer) drawn at random, none fixed nor printed."""
    rng, drawn = rng or random.Random(), []
    while len(drawn) < count:
        case = rng.choice(HELD_MODELS) + (rng.choice(("fp32", "bf16", "fp16")),
                                          rng.choice(("adamw", "sgd")))
        if case not in HELD_CASES and case != PRINTED and case not in drawn:
            drawn.append(case)
    return drawn


def _held_references() -> tuple:
    """The trainer, the package's tables of bytes per parameter and of optimizer state, and its
    byte count of an optimizer's state."""
    return (train_master_weights, MasterWeightsTrainer.__init__, MasterWeightsTrainer.step,
            MasterWeightsTrainer.memory, optimizer_state_bytes, bytes_per_param,
            model_state_bytes, optimizer_tensors, state_bytes)


# every torch optimizer is built through Optimizer.__init__: refused, no optimizer can be made
# and stepped to measure its state (a count needs none)
HELD_ATTRIBUTES = ((torch.optim.Optimizer, "__init__"),)


def check_held_bytes(candidate, spec) -> None:
    """``candidate(model, dtype, optimizer) -> bytes`` held between steps by section 4's trainer
    (``MasterWeightsTrainer``: fp32 master weights, a compute copy in ``dtype``, ``optimizer``
    "adamw" or "sgd"; fp16 with the dynamic loss scaler), on :data:`HELD_CASES` and two drawn
    cases, with :func:`_held_references` and :data:`HELD_ATTRIBUTES` refused while it runs;
    each against the trainer measured here after one step that was taken
    (:func:`held_after_a_taken_step`), within 1 % of it."""
    if candidate is ...:
        say("held bytes: not answered yet. Define your function and pass it in.")
        return
    cases = list(HELD_CASES) + drawn_held_cases()
    for model, size, dtype, optimizer in cases:
        one_step = spec.replace(model=model, model_size=size, steps=1, optimizer=optimizer,
                                batch_size=2, seq_len=16, grad_accum=1)
        where = tr("the {model} {size} model, a {dtype} copy and {optimizer}", model=model,
                   size=size, dtype=dtype, optimizer=optimizer)
        got = call_refusing(candidate, (build_model(one_step), dtype, optimizer),
                            refused=_held_references(), attributes=HELD_ATTRIBUTES,
                            called=tr("held bytes: your function ran the trainer, the "
                                      "package's bytes per parameter or an optimizer: count the "
                                      "bytes yourself."),
                            failed=tr("held bytes: for {where} your function failed: {error}"),
                            where=where)
        got = number_from(got, tr("held bytes: for {where} your function did not return a "
                                  "number.", where=where))
        held = held_after_a_taken_step(one_step, dtype)
        if abs(got - held) > 0.01 * abs(held):   # 1 % of what the trainer holds
            raise AssertionError(tr(
                "held bytes: for {where} your function gives {got:,.0f} bytes, {how} than the "
                "trainer holds between steps (more than 1 % off). What does it keep for each "
                "parameter, in which dtype, with this copy and this optimizer?", where=where,
                got=got, how=tr("more") if got > held else tr("fewer")))
    say("Correct: within 1 % of what the trainer holds between steps in {count} layouts the "
        "lesson never printed.", count=len(cases))


@functools.lru_cache(maxsize=32)
def held_after_a_taken_step(spec, dtype: str) -> int:
    """Bytes ``MasterWeightsTrainer`` holds between steps with a ``dtype`` copy (fp16 with the
    dynamic loss scaler, as section 4), measured after a step that was taken: a step the scaler
    skips (an overflow at the starting scale) creates no optimizer state, so the steps go on,
    the scale halving at each overflow, until one is taken."""
    for steps in (1, 4, 16, 64):
        scaler = DynamicLossScaler() if dtype == "fp16" else None
        run = train_master_weights(spec.replace(steps=steps), dtype, scaler)
        if not all(r.skipped for r in run.results):
            return sum(run.memory.values())
    raise RuntimeError(f"held bytes: every one of {steps} fp16 steps overflowed on "
                       f"{spec.model} {spec.model_size}; the check cannot measure the optimizer state")


# ---- exercise 3: where fp16 flushes a scaled gradient to zero -----------------------------------

def flush_threshold(loss_scale: float, dtype: str = "fp16") -> float:
    """The |g| at and below which ``g × loss_scale`` rounds to 0 in ``dtype``: half its smallest
    subnormal (round to nearest, ties to even), divided by the scale."""
    row = next(r for r in format_table() if r["format"] == dtype)
    return row["smallest_subnormal"] / 2 / loss_scale


def check_flush_threshold(answer, loss_scale: float = 1000.0) -> None:
    """Below what magnitude does a true gradient become exactly 0 in fp16, with a static loss
    scale of ``loss_scale`` (not a power of two, so the answer is not one either)?"""
    check_answer(answer, flush_threshold(loss_scale),
                 f"fp16 flush threshold of a gradient with loss scale {loss_scale:g}",
                 rel_tol=1e-3, source="formula")
