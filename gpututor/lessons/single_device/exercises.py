"""Lesson 01's exercise checkers: each takes the learner's answer and the lesson's own objects
(the step anatomy, the batch sweep) and derives what it expects from them, so the notebook shows
only the call. ``...`` means "not answered yet".

- :func:`check_optimizer_bytes`: AdamW's state, in bytes, as the anatomy run measured it.
- :func:`check_activation_ratio`: activations at one batch size over another, as the sweep
  measured them.
- :func:`check_training_hours`: hours for a number of tokens at the anatomy run's achieved
  FLOP/s, by the FLOPs formula (``gpututor.measure.flops.model_flops_per_token``).
- :func:`check_flops_per_step`: the learner's ``my_flops_per_step(model, batch_size, seq_len)``
  against the same formula, on two GPTs and step shapes the learner does not choose, with the
  package's FLOP functions refused while it runs.
"""
from __future__ import annotations

import math
from typing import Callable

from torch.utils.flop_counter import FlopCounterMode

from ... import formulas
from ...config import RunSpec
from ...i18n import tr
from ...measure import flops
from ...models import GPT, build_model
from ..common.code_exercise import call_refusing, number_from
from ..common.exercises import check_answer


def check_optimizer_bytes(answer, anatomy) -> None:
    """AdamW's state in bytes after a step of the ``anatomy`` run (``step_anatomy``), exactly as
    it measured it: two fp32 moments per parameter and a 4-byte step counter per tensor."""
    check_answer(answer, anatomy.memory.get("optimizer") or None, "AdamW state in bytes",
                 rel_tol=0)


def check_activation_ratio(answer, batch_runs: list[dict], big: int = 64,
                           small: int = 16) -> None:
    """Rank 0's activation bytes at batch ``big`` over those at batch ``small``, as the sweep
    ``batch_runs`` (summaries with ``sweep_value``) measured them; within 5 %."""
    by_batch = {s.get("sweep_value"): (s.get("mem_by_category") or {}).get("activations")
                for s in batch_runs}
    high, low = by_batch.get(big), by_batch.get(small)
    expected = high[0] / low[0] if high and low and high[0] and low[0] else None
    check_answer(answer, expected, "activation ratio", rel_tol=0.05)


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
        print(tr("FLOPs per step: not answered yet. Define your function and pass it in."))
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
                                     "not a number.", got=type(got), **case))
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
    print(tr("Correct: your FLOPs per step equal the formula's (which FlopCounterMode counts too) "
             "for the tiny and the medium GPT, at batch and sequence lengths other than the "
             "lesson's."))
