"""Lesson 04's exercise checkers: each takes the learner's answer and the lesson's own objects
(its runs) and derives what it expects, so the notebook shows only the call. ``...`` means "not
answered yet".

- :func:`check_row_parallel`: the learner's row-parallel forward, run in real ranks (2 and 3)
  against one dense ``nn.Linear``: output, input and weight gradients; the package's own
  ``RowParallelLinear.forward`` refuses while it runs.
- :func:`check_tp_bytes`: the bytes a tensor-parallel run all-reduces per step, as it counts
  them (each all-reduce by the size of what it sums), for a run the notebook has not made: the
  checker launches it, so no figure printed above holds the answer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn

from ...config import RunSpec
from ...i18n import tr
from ...parallel.tensor_parallel.megatron import RowParallelLinear, TensorParallelGroup, owned_indices
from ...runtime.launcher import launch
from ..common.code_exercise import CalledTheReference, call_refusing
from ..common.exercises import check_answer, records_in_ranks

DIFFERS = {   # what is compared -> what the learner is told when it differs
    "output": "row-parallel forward: on {world} ranks, rank {rank}: the output differs from the "
              "dense layer's by {error:.3g}.",
    "input gradient": "row-parallel forward: on {world} ranks, rank {rank}: the input gradient "
                      "differs from the dense layer's by {error:.3g}.",
    "weight gradient": "row-parallel forward: on {world} ranks, rank {rank}: the weight gradient "
                       "differs from the dense layer's by {error:.3g}.",
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
        try:
            out = call_refusing(self.candidate, (x_local, weight, dense.bias.detach(), tp),
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
                                    ("weight gradient", weight.grad, dense.weight.grad[:, cols])):
            errors[name] = float((got - expected).abs().max()) if got is not None else float("inf")
        emit({"step": 0, **errors})


def check_row_parallel(candidate, world_sizes: tuple = (2, 3)) -> None:
    """Run ``candidate(x_local, weight_local, bias, tp)`` in real ranks on each of
    ``world_sizes`` and compare its output and gradients with one dense ``nn.Linear``. Raises
    ``AssertionError`` saying what differs."""
    if candidate is ...:
        print(tr("row-parallel forward: not answered yet. Define your function and pass it in."))
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
    print(tr("Correct: on {worlds} ranks the output and the input and weight gradients equal one "
             "dense nn.Linear.", worlds=" & ".join(map(str, world_sizes))))


_COUNTED: dict = {}   # spec -> the bytes per step its run counted (one launch per spec)
# exercise 2's run: a degree and a batch that no cell of lesson 04 runs, fixed here so that the
# call cannot be pointed at a run whose figure is printed above
EXERCISE_RUN = {"strategy": "tp", "world_size": 4, "batch_size": 8, "steps": 4}


def check_tp_bytes(answer, base: RunSpec) -> None:
    """The bytes exercise 2's run all-reduces per step, as it counts them: each all-reduce by
    the size of the activations it sums (not what each rank sends). The run is ``base`` (the
    lesson's model and sequence length) with :data:`EXERCISE_RUN` (tensor parallel, degree 4,
    batch 8); the checker launches it itself (once per spec), so the answer is a prediction, not
    a figure read off a run above."""
    spec = base.replace(**EXERCISE_RUN)
    what = "bytes all-reduced per step by the exercise's tp run"
    if answer is ...:   # not answered: no need to launch
        return check_answer(answer, None, what)
    if spec not in _COUNTED:
        _COUNTED[spec] = launch(spec).wait()["comm_bytes_per_step"]
    check_answer(answer, _COUNTED[spec], what, rel_tol=1e-6)
