"""Lesson 04's exercise checkers: each takes the learner's answer and the lesson's own objects
(its runs) and derives what it expects, so the notebook shows only the call. ``...`` means "not
answered yet".

- :func:`check_row_parallel`: the learner's row-parallel forward, run in real ranks (2 and 3)
  against one dense ``nn.Linear``: output, input, weight and bias gradients; the package's own
  ``RowParallelLinear.forward`` refuses while it runs.
- :func:`check_tp_bytes`: the learner's ``tp_bytes(batch, seq_len, d_model, n_layer)``, the bytes
  a tensor-parallel run all-reduces per step as the meter counts them (each all-reduce by the size
  of what it sums), against runs the checker launches (degrees 2 and 4, batches and lengths no
  cell runs), with ``launch`` and the lesson's counting helpers refused while it runs.
"""
from __future__ import annotations

import sys

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn

from ...config import RunSpec
from ...models import build_model
from ...i18n import say, tr
from ...parallel.tensor_parallel.megatron import RowParallelLinear, TensorParallelGroup, owned_indices
from ...runtime.launcher import launch
from ..common.code_exercise import CalledTheReference, call_refusing
from ..common.exercises import as_number, records_in_ranks

DIFFERS = {   # what is compared -> what the learner is told when it differs
    "output": "row-parallel forward: on {world} ranks, rank {rank}: the output differs from the "
              "dense layer's by {error:.3g}.",
    "input gradient": "row-parallel forward: on {world} ranks, rank {rank}: the input gradient "
                      "differs from the dense layer's by {error:.3g}.",
    "weight gradient": "row-parallel forward: on {world} ranks, rank {rank}: the weight gradient "
                       "differs from the dense layer's by {error:.3g}.",
    "bias gradient": "row-parallel forward: on {world} ranks, rank {rank}: the bias gradient "
                     "differs from the dense layer's by {error:.3g}. Where is the bias added, "
                     "before or after the ranks' partial outputs are summed?",
}


@dataclass(frozen=True)
class RowParallelCheck:
    """In every rank: the candidate's output and gradients against one dense ``nn.Linear``
    (the same layer, input and upstream gradient on every rank), with the package's
    ``RowParallelLinear.forward`` refused while the candidate runs."""

    candidate: Callable

    def __call__(self, spec, rank, world, device, emit):
        tp = TensorParallelGroup(rank, world)
        torch.manual_seed(0)
        dense = nn.Linear(4 * world, 6)
        x = torch.randn(3, 5, 4 * world, requires_grad=True)
        upstream = torch.randn(3, 5, 6)
        dense(x).backward(upstream)
        cols = owned_indices(dense.in_features, tp)
        x_local = x.detach()[..., cols].clone().requires_grad_()
        weight = dense.weight.detach()[:, cols].clone().requires_grad_()
        bias = dense.bias.detach().clone().requires_grad_()   # whole on every rank
        try:
            out = call_refusing(self.candidate, (x_local, weight, bias, tp),
                                refused=(RowParallelLinear.forward,))
        except CalledTheReference:
            emit({"step": 0, "reference": True})
            return
        want = dense(x).detach()
        if not isinstance(out, torch.Tensor) or out.shape != want.shape:
            emit({"step": 0, "returned": list(out.shape) if isinstance(out, torch.Tensor)
                  else type(out).__name__})
            return
        errors = {"output": float((out.detach() - want).abs().max())}
        if out.requires_grad:
            out.backward(upstream)
        for name, got, expected in (("input gradient", x_local.grad, x.grad[..., cols]),
                                    ("weight gradient", weight.grad, dense.weight.grad[:, cols]),
                                    ("bias gradient", bias.grad, dense.bias.grad)):
            errors[name] = float((got - expected).abs().max()) if got is not None else float("inf")
        emit({"step": 0, **errors})


def check_row_parallel(candidate, world_sizes: tuple = (2, 3)) -> None:
    """Run ``candidate(x_local, weight_local, bias, tp)`` in real ranks on each of
    ``world_sizes`` and compare its output and gradients with one dense ``nn.Linear``. Raises
    ``AssertionError`` saying what differs."""
    if candidate is ...:
        say("row-parallel forward: not answered yet. Define your function and pass it in.")
        return
    for world in world_sizes:
        spec = RunSpec(world_size=world, device="cpu", timeout=20)
        records = records_in_ranks(RowParallelCheck(candidate), spec,
                                   "row-parallel forward: on {world} ranks your function failed: "
                                   "{error}")
        for record in records:
            if record.get("reference"):
                raise AssertionError(tr("row-parallel forward: your function ran the package's "
                                        "RowParallelLinear: write the forward yourself."))
            if "returned" in record:
                raise AssertionError(tr("row-parallel forward: on {world} ranks rank {rank} "
                                        "returned {returned}, not the layer's output (a tensor "
                                        "shaped like the dense layer's).", world=world,
                                        rank=record["rank"], returned=record["returned"]))
            for part, message in DIFFERS.items():
                if not record[part] <= 1e-5:
                    raise AssertionError(tr(message, world=world, rank=record["rank"],
                                            error=record[part]))
    say("Correct: on {worlds} ranks the output and the input, weight and bias gradients equal "
        "one dense nn.Linear.", worlds=" & ".join(map(str, world_sizes)))


# exercise 2's cases: (model size, tp degree, batch, sequence length), none of them a run a cell
# of lesson 04 makes (the lesson runs batch 16 at base's sequence length), degrees 2 and 4
TP_BYTES_CASES = (("tiny", 2, 3, 24), ("small", 4, 5, 40))


def _cache():
    """The runs' counts, one launch per spec, kept in a closure: no module attribute holds them
    (a learner's function could read one), and the checker refuses this reader while it runs."""
    counted: dict = {}

    def count(spec: RunSpec) -> int:
        if spec not in counted:
            counted[spec] = launch(spec).wait()["comm_bytes_per_step"]
        return counted[spec]
    return count


_count_run = _cache()


def counted_tp_bytes(base: RunSpec, size: str, degree: int, batch: int, seq_len: int) -> int:
    """The bytes a tensor-parallel run (``base`` with this model size, degree, batch and
    sequence length) all-reduces per step, as the package's meter counts them
    (``comm_bytes_per_step``: each all-reduce by the size of what it sums); launched once per
    spec and kept."""
    return _count_run(base.replace(strategy="tp", model_size=size, world_size=degree,
                                   batch_size=batch, seq_len=seq_len, steps=4))


def check_tp_bytes(candidate, base: RunSpec) -> None:
    """Run ``candidate(batch, seq_len, d_model, n_layer)``, the bytes a tensor-parallel run
    all-reduces per step, on :data:`TP_BYTES_CASES` (runs no cell makes, degrees 2 and 4),
    against what each run counted (:func:`counted_tp_bytes`: the checker launches them),
    exactly; ``launch``, the lesson's ``tp_allreduces`` and ``count_collectives`` refuse while
    it runs. Says which case is wrong, not what the answer is."""
    if candidate is ...:
        say("tp bytes: not answered yet. Define your function and pass it in.")
        return
    from .collectives import count_collectives
    from .messages import tp_allreduces
    for size, degree, batch, seq_len in TP_BYTES_CASES:
        expected = counted_tp_bytes(base, size, degree, batch, seq_len)
        cfg = build_model(base.replace(model_size=size)).cfg
        case = tr("degree {degree}, batch {batch}, seq_len {seq_len}, d_model {d}, n_layer "
                  "{layers}", degree=degree, batch=batch, seq_len=seq_len, d=cfg.d_model,
                  layers=cfg.n_layer)
        got = call_refusing(candidate, (batch, seq_len, cfg.d_model, cfg.n_layer),
                            refused=(launch, tp_allreduces, count_collectives,
                                     counted_tp_bytes),
                            attributes=((sys.modules[__name__], "_count_run"),),
                            called=tr("tp bytes: your function launched a run or called the "
                                      "lesson's counting helpers: count the bytes yourself."),
                            failed=tr("tp bytes [{case}]: your function raised {error}"),
                            case=case)
        number = as_number(got)
        if number is None:
            raise AssertionError(tr("tp bytes [{case}]: your function returned {got}, not a "
                                    "number.", case=case, got=repr(got)))
        if number != expected:
            raise AssertionError(tr("tp bytes [{case}]: yours is not what the run counted. How "
                                    "many all-reduces does one block make, forward and backward, "
                                    "and how big is what each one sums?", case=case))
    say("Correct: your count equals the bytes the runs counted, exactly, for {cases} tp "
             "runs no cell made (degrees {degrees}).", cases=len(TP_BYTES_CASES),
             degrees=" & ".join(str(c[1]) for c in TP_BYTES_CASES))
