"""fp32 master weights with a low-precision compute copy, from scratch.

The optimizer updates fp32 weights; each step copies them into a bf16/fp16 model that does the
forward and backward. The production way is ``torch.autocast``
(:meth:`gpututor.parallel.base.Strategy.train_step`), which keeps the weights in fp32 and casts
per operation instead, and ``GradScaler`` for fp16.
"""
from __future__ import annotations

import copy
import statistics
import time
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn.functional as F

from ..data import batches
from ..measure.memory import optimizer_tensors, tensor_bytes
from ..models import build_model
from .formats import _dtype
from .loss_scaling import DynamicLossScaler


@dataclass
class StepResult:
    loss: float          # the unscaled loss of this step
    skipped: bool        # True if gradients overflowed and the optimizer step was skipped
    scale: float         # the loss scale used for this step (1.0 without a scaler)
    overflowed: bool = False   # True if any gradient held inf/nan (taken anyway without a scaler)


class MasterWeightsTrainer:
    """Train ``model`` with fp32 master weights and a ``dtype`` copy that does the compute.

    One step: (1) copy the fp32 master weights into the low-precision model; (2) forward and
    backward there, on ``loss × scale`` if a :class:`DynamicLossScaler` is given; (3) turn the
    gradients into fp32 on the master weights and unscale them; (4) with a scaler, skip the step
    on inf/nan gradients (without one the step is taken anyway, inf/nan included: the step's
    ``overflowed`` says so); otherwise let the optimizer (AdamW, or ``optimizer="sgd"``: SGD
    with momentum 0.9, as the runs' ``RunSpec.optimizer``) update the fp32 master weights, so
    updates too small for bf16/fp16 still add up.
    """

    def __init__(self, model: torch.nn.Module, dtype: str = "bf16", lr: float = 1e-3,
                 scaler: Optional[DynamicLossScaler] = None, optimizer: str = "adamw"):
        self.dtype = _dtype(dtype)
        self.master = model.float()
        self.compute = copy.deepcopy(model).to(self.dtype)
        self.scaler = scaler
        params = self.master.parameters()
        self.optimizer = torch.optim.SGD(params, lr=lr, momentum=0.9) if optimizer == "sgd" \
            else torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
        self.pairs = list(zip(self.master.parameters(), self.compute.parameters()))

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> StepResult:
        # (1) fp32 master -> low-precision compute copy (rounds every weight to dtype)
        with torch.no_grad():
            for master, low in self.pairs:
                low.copy_(master)
        # (2) forward and backward in low precision; the loss itself is computed in fp32
        logits = self.compute(inputs)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
        scale = self.scaler.scale if self.scaler else 1.0
        (self.scaler.scale_loss(loss) if self.scaler else loss).backward()
        # (3) low-precision gradients -> fp32 on the master weights, then unscale
        for master, low in self.pairs:
            master.grad = None if low.grad is None else low.grad.float()
            low.grad = None
        grads = [m.grad for m, _ in self.pairs if m.grad is not None]
        if self.scaler:
            found_inf = self.scaler.unscale_(grads)
        else:
            found_inf = not all(bool(torch.isfinite(g).all()) for g in grads)
        # (4) skip on overflow (only a scaler makes that safe to continue), else update fp32
        skip = found_inf and self.scaler is not None
        if not skip:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler:
            self.scaler.update(found_inf)
        return StepResult(loss.item(), skip, scale, found_inf)

    def memory(self) -> dict[str, int]:
        """Bytes held now: fp32 master weights, the low-precision copy, optimizer state."""
        return {"master_weights": tensor_bytes(self.master.parameters()),
                "compute_copy": tensor_bytes(self.compute.parameters()),
                "optimizer": tensor_bytes(optimizer_tensors(self.optimizer))}


@dataclass
class MasterWeightsRun:
    """What :func:`train_master_weights` measured: one entry per step, and bytes held at the end."""

    results: list        # StepResult per step
    memory: dict         # MasterWeightsTrainer.memory() after the last step
    seconds: float       # wall time of all steps
    step_seconds: list = field(default_factory=list)   # wall time of each step

    @property
    def losses(self) -> list[float]:
        return [r.loss for r in self.results]

    @property
    def steady_step_s(self) -> float | None:
        """Median seconds of the steps after the first (which also pays for first-call setup);
        None for a run of fewer than 2 steps."""
        return statistics.median(self.step_seconds[1:]) if len(self.step_seconds) > 1 else None


def train_master_weights(spec, dtype: str = "bf16", scaler: Optional[DynamicLossScaler] = None
                         ) -> MasterWeightsRun:
    """Train ``spec``'s model in this process with :class:`MasterWeightsTrainer`.

    Uses ``spec``'s model, seed, batches, steps, optimizer and learning rate, on
    ``spec.threads_per_rank`` threads, so with ``dtype="fp32"`` and no scaler it is exactly the
    plain fp32 loop.
    """
    saved = torch.get_num_threads()
    torch.set_num_threads(spec.threads_per_rank)
    try:
        trainer = MasterWeightsTrainer(build_model(spec), dtype, spec.lr, scaler, spec.optimizer)
        start = time.perf_counter()
        results, step_seconds = [], []
        for inputs, targets in batches(spec):
            began = time.perf_counter()
            results.append(trainer.step(inputs, targets))
            step_seconds.append(time.perf_counter() - began)
        return MasterWeightsRun(results, trainer.memory(), time.perf_counter() - start,
                                step_seconds)
    finally:
        torch.set_num_threads(saved)
