"""Lesson 01's exercise checkers: each takes the learner's answer and the lesson's own objects
(the step anatomy, the batch sweep) and derives what it expects from them, so the notebook shows
only the call. ``...`` means "not answered yet".

- :func:`check_optimizer_bytes`: the learner's ``my_optimizer_bytes(n_params, n_tensors)``
  against the bytes AdamW holds after a step, counted on two GPTs that are not the lesson's.
- :func:`check_activation_ratio`: activations at a sequence length no run used over those at the
  lesson's, measured by the checker.
- :func:`check_training_hours`: hours for a number of tokens at the anatomy run's achieved
  FLOP/s, by the FLOPs formula (``gpututor.measure.flops.model_flops_per_token``).
- :func:`check_flops_per_step`: the learner's ``my_flops_per_step(model, batch_size, seq_len)``
  against the same formula, on two GPTs and step shapes the learner does not choose, with the
  package's FLOP functions refused while it runs.
"""
from __future__ import annotations

import math
from typing import Callable

import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from ... import formulas
from ...config import RunSpec
from ...data import batches
from ...i18n import say, tr
from ...measure import flops
from ...measure.memory import LiveBytesProbe, adamw_state_bytes
from ...models import GPT, build_model, count_parameters
from ..common.code_exercise import call_refusing, number_from
from ..common.exercises import check_answer


# the GPTs exercise 1's formula runs on: not the lesson's (small) model
OPTIMIZER_SIZES = ("tiny", "medium")


def check_optimizer_bytes(candidate: Callable) -> None:
    """Run ``candidate(n_params, n_tensors)`` for each GPT of :data:`OPTIMIZER_SIZES` against
    the bytes of the state ``torch.optim.AdamW`` holds for it after a step, counted here
    (``gpututor.measure.memory.adamw_state_bytes``); exactly."""
    if candidate is ...:
        say("AdamW state in bytes: not answered yet. Define your function and pass it in.")
        return
    for size in OPTIMIZER_SIZES:
        model = build_model(RunSpec(model="gpt", model_size=size))
        n_params, n_tensors = count_parameters(model), len(list(model.parameters()))
        want = adamw_state_bytes(model)
        got = candidate(n_params, n_tensors)
        case = dict(size=size, params=n_params, tensors=n_tensors)
        number = number_from(got, tr("AdamW state in bytes: for the {size} GPT ({params:,} "
                                     "parameters in {tensors} tensors) your function returned "
                                     "{got!r}, not a number.", got=got, **case))
        if number == want:
            continue
        wrong = ("AdamW state in bytes: for the {size} GPT ({params:,} parameters in {tensors} "
                 "tensors) yours is more than AdamW holds. Two fp32 numbers per parameter, and "
                 "one 4-byte step counter per tensor (not per parameter)." if number > want else
                 "AdamW state in bytes: for the {size} GPT ({params:,} parameters in {tensors} "
                 "tensors) yours is less than AdamW holds. Two fp32 averages per parameter, 4 "
                 "bytes each, and a 4-byte step counter per tensor.")
        raise AssertionError(tr(wrong, **case))
    say("Correct: your formula gives exactly the bytes AdamW holds after a step, for the "
             "tiny and the medium GPT.")


def forward_activation_bytes(spec) -> int:
    """What the forward pass of ``spec``'s model on its first batch leaves alive for backward,
    in bytes: ``LiveBytesProbe.forward_end``, measured here as the runs' worker measures it."""
    model = build_model(spec)
    x, y = next(iter(batches(spec)))
    with LiveBytesProbe([*model.parameters(), *model.buffers()]) as probe:
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        probe.set_phase("backward")
        loss.backward()
    return probe.forward_end


def check_activation_ratio(answer, spec, long: int = 128, short: int = 64, batch: int = 16) -> None:
    """Activation bytes of ``spec``'s model at ``seq_len=long`` over those at ``seq_len=short``,
    both at batch ``batch`` (no run of the lesson changed the sequence length), measured here in
    this process; within 5 %. Predicting it needs attention's ``seq_len²`` term: a ratio of
    ``long / short`` (activations in proportion to the sequence) is about 10 % low here."""
    if answer is ...:
        check_answer(answer, None, "activation ratio")
        return
    one = spec.replace(strategy="single", world_size=1, steps=1, grad_accum=1, batch_size=batch)
    expected = forward_activation_bytes(one.replace(seq_len=long)) / \
        forward_activation_bytes(one.replace(seq_len=short))
    check_answer(answer, expected, "activation ratio", rel_tol=0.05, source="counted")


def check_training_hours(answer, anatomy, tokens: float = 1e9) -> None:
    """Hours to train the anatomy run's model on ``tokens`` tokens at the FLOP/s its steps
    achieved: ``tokens · model_flops_per_token / achieved FLOP/s``; within 1 %."""
    model = build_model(anatomy.spec, meta=True)
    rate = anatomy.achieved_flops
    expected = tokens * flops.model_flops_per_token(model, anatomy.spec.seq_len) / rate / 3600 \
        if rate else None
    check_answer(answer, expected, "hours for 1e9 tokens", rel_tol=0.01, source="formula")


# two GPTs of the series and step shapes that are not the lesson's (batch 32, 64 characters)
FLOPS_CASES = (("tiny", 8, 48), ("medium", 4, 128))
# what the learner's function must not call: the package's formula, and the pieces it is made of
FLOP_FUNCTIONS = (flops.model_flops_per_token, flops.matmul_parameters,
                  formulas.training_flops_per_token, formulas.attention_flops_per_token)


def reference_flops_per_step(model, batch_size: int, seq_len: int) -> float:
    """The model FLOPs of one training step of ``model`` (forward and backward) on
    ``batch_size`` sequences of ``seq_len`` tokens: ``model_flops_per_token · tokens``."""
    return flops.model_flops_per_token(model, seq_len) * batch_size * seq_len


def check_flops_per_step(candidate: Callable) -> None:
    """Run ``candidate(model, batch_size, seq_len)`` on each of :data:`FLOPS_CASES` against
    :func:`reference_flops_per_step` (within 0.1 %), with the package's FLOP functions refused
    while it runs; say whether it is too much or too little and what to look at, not by how much."""
    if candidate is ...:
        say("FLOPs per step: not answered yet. Define your function and pass it in.")
        return
    for size, batch_size, seq_len in FLOPS_CASES:
        model = build_model(RunSpec(model="gpt", model_size=size, batch_size=batch_size,
                                    seq_len=seq_len), meta=True)
        want = reference_flops_per_step(model, batch_size, seq_len)
        case = dict(size=size, batch=batch_size, seq=seq_len)
        # counting is not deriving: the model's forward and torch's counter refuse too
        got = call_refusing(candidate, (model, batch_size, seq_len),
                            refused=(*FLOP_FUNCTIONS, reference_flops_per_step, GPT.forward,
                                     FlopCounterMode.__enter__),
                            called=tr("FLOPs per step: your function called the package's "
                                      "FLOPs formula (gpututor.measure.flops or "
                                      "gpututor.formulas), ran the model or a FLOP counter: "
                                      "write the formula yourself."))
        number = number_from(got, tr("FLOPs per step: for the {size} GPT, batch {batch}, "
                                     "{seq} tokens per sequence, your function returned {got!r}, "
                                     "not a number.", got=got, **case))
        if math.isclose(number, want, rel_tol=1e-3):
            continue
        wrong = ("FLOPs per step: for the {size} GPT, batch {batch}, {seq} tokens per sequence, "
                 "yours is more than the formula gives. Count only the weights that take part in a "
                 "matmul (the nn.Linear layers), 6 FLOPs per weight and token, and attention's "
                 "term once." if number > want else
                 "FLOPs per step: for the {size} GPT, batch {batch}, {seq} tokens per sequence, "
                 "yours is less than the formula gives. Did you count the backward (twice the "
                 "forward), attention's term, and every token of the step?")
        raise AssertionError(tr(wrong, **case))
    say("Correct: your FLOPs per step equal the formula's (which FlopCounterMode counts too) "
             "for the tiny and the medium GPT, at batch and sequence lengths other than the "
             "lesson's.")
