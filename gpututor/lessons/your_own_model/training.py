"""Lesson 03b's training and measuring, the same in every rank and in one process: a few AdamW
steps of any character model on the corpus (``data/``), each rank on its share of the global
batch, and what a wrapped model holds and sends.

- :class:`WrappedRuns` (a task for ``launch``) and :func:`run_wrapped`: in each of N real ranks,
  build the learner's model, wrap it with each of the learner's wrapping functions
  (``wrap(module) -> (model, optimizer)``) and train it.
- :func:`train_wrapped`: trains a wrapped model and its optimizer for ``STEPS`` steps on this
  rank's rows of each global batch; returns a record (losses, bytes held, bytes sent in the last
  step, and the full parameters on rank 0).
- :func:`one_process`: the reference, the same model trained on the whole global batch in one
  process.
- :func:`held_bytes`: parameters, gradients and optimizer state this rank holds, counted from
  the tensors themselves (each storage once).
- :func:`full_parameters`: every parameter whole, under its own name, whatever wraps it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from ...config import RunSpec
from ...data import global_batch, load_corpus, shard, split
from ...runtime.launcher import launch

STEPS, BATCH, SEQ_LEN, SEED = 4, 12, 32, 0      # a global batch of 12 windows of 32 characters (2, 3, 4 ranks)
LR, WEIGHT_DECAY = 1e-3, 0.1                    # AdamW: weight decay shows a frozen layer is left alone


def step_batch(step: int, rank: int = 0, world: int = 1):
    """This rank's rows of step ``step``'s global batch (all of it with ``world`` 1)."""
    ids = split(load_corpus("en")[1], "train")
    return shard(global_batch(ids, step, BATCH, SEQ_LEN, SEED), rank, world)


def next_char_loss(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the next character at every position."""
    logits = model(inputs)
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard (what this rank holds); any other tensor as it is."""
    return t.to_local() if hasattr(t, "to_local") else t


def _optimizer_state(optimizer) -> list[torch.Tensor]:
    """Every tensor of the optimizer's state, reached through the wrappers torch's
    ZeroRedundancyOptimizer (``.optim``) and gpututor's ShardedOptimizer (``.optimizer``) keep."""
    inner = getattr(optimizer, "optim", None) or getattr(optimizer, "optimizer", None) or optimizer
    return [v for state in inner.state.values() for v in state.values()
            if isinstance(v, torch.Tensor)]


def adamw(model: nn.Module) -> torch.optim.AdamW:
    """The lesson's optimizer over ``model``'s parameters (frozen ones get no gradient: skipped)."""
    return torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)


def held_bytes(model: nn.Module, optimizer) -> dict[str, int]:
    """Bytes of parameters, gradients and optimizer state this rank holds, each storage counted
    once (a tied weight, parameters that are views of one flat vector, a flat gradient buffer
    whose views are the ``.grad``\\s). The optimizer's parameters count too: a sharded
    optimizer's slices and their gradients live there, not in the model."""
    seen: set[int] = set()

    def count(tensors) -> int:
        total = 0
        for t in tensors:
            if t is None:
                continue
            storage = _local(t).untyped_storage()
            if storage.nbytes() and storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
        return total

    params = list(model.parameters()) + [p for group in optimizer.param_groups
                                         for p in group["params"]]
    return {"params": count(params), "grads": count(p.grad for p in params),
            "optimizer": count(_optimizer_state(optimizer))}


def full_parameters(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter whole, by its name in the unwrapped model (all ranks must call it):
    ZeRO3 gathers its shards, FSDP2's DTensors gather theirs, DDP's ``module.`` prefix goes."""
    if hasattr(model, "full_state_dict"):
        return {k: v.detach().float() for k, v in model.full_state_dict().items()}
    inner = getattr(model, "module", model)
    out = {}
    for name, p in inner.named_parameters(remove_duplicate=False):
        out[name] = (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().float().clone()
    return out


def train_wrapped(model: nn.Module, optimizer, rank: int, world: int, *, meter=None) -> dict:
    """``STEPS`` AdamW steps on this rank's rows of each global batch. The record: this rank's
    loss at each step, the bytes it holds after the last step (:func:`held_bytes`), the bytes its
    collectives moved in the last step (``meter``: a from-scratch wrapper's ``.meter``; None for
    torch's own, which counts nothing) and, on rank 0, the full parameters."""
    losses, sent = [], None
    for step in range(STEPS):
        if meter is not None:
            meter.reset()
        inputs, targets = step_batch(step, rank, world)
        optimizer.zero_grad(set_to_none=True)
        loss = next_char_loss(model, inputs, targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if meter is not None:
            sent = {"data": int(meter.bytes), "wire": float(meter.wire_bytes)}
    record = {"rank": rank, "world": world, "losses": losses, "sent": sent,
              "held": held_bytes(model, optimizer)}
    full = full_parameters(model)          # every rank takes part in the gathers
    record["params"] = {k: v.numpy() for k, v in full.items()} if rank == 0 else None
    return record


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"


@dataclass(frozen=True)
class WrappedRuns:
    """In every rank: for each ``(name, wrap)``, the model built as one process builds it (same
    seed), wrapped by ``wrap(module) -> (model, optimizer)`` and trained (:func:`train_wrapped`).
    The bytes come from a from-scratch wrapper's ``.meter`` (the model's or the optimizer's);
    torch's wrappers have none. A wrapping or a step that raises is recorded as its error's
    first line, and the next wrapping runs."""

    model_class: type
    args: tuple
    wraps: tuple        # ((name, wrap), ...)

    def __call__(self, spec, rank, world, device, emit):
        for index, (name, wrap) in enumerate(self.wraps):
            torch.manual_seed(SEED)
            module = self.model_class(*self.args)
            try:
                model, optimizer = wrap(module)
                meter = getattr(model, "meter", None) or getattr(optimizer, "meter", None)
                record = train_wrapped(model, optimizer, rank, world, meter=meter)
            except Exception as exc:   # noqa: BLE001 - shown to the learner
                record = {"rank": rank, "world": world, "error": _first_line(exc)}
            emit({"step": index, "wrapper": name, **record})


def run_wrapped(model_class, args: tuple, wraps: dict[str, Callable], world: int = 2) -> dict:
    """``{name: [rank 0's record, rank 1's, ...]}``: ``model_class(*args)`` wrapped by each of
    ``wraps`` and trained in ``world`` real ranks on CPU (the learner's classes and functions
    travel to them by value, cloudpickle)."""
    spec = RunSpec(world_size=world, device="cpu", timeout=60)
    records = launch(spec, task=WrappedRuns(model_class, tuple(args), tuple(wraps.items()))).wait()
    out: dict[str, list] = {name: [None] * world for name in wraps}
    for r in records:
        out[r["wrapper"]][r["rank"]] = r
    return out


def one_process(model_class, *args, **kwargs) -> dict:
    """The reference: ``model_class(*args, **kwargs)`` trained on the whole global batch in this
    process, as :func:`train_wrapped` trains each rank on its part (same seed, same steps)."""
    torch.manual_seed(SEED)
    model = model_class(*args, **kwargs)
    return train_wrapped(model, adamw(model), 0, 1)
