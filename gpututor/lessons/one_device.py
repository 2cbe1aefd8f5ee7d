"""Lesson 10's measurements: one device used well (recomputation policies, 8-bit optimizer state).

Each function runs in this process, on one thread, and returns plain rows for ``ui.one_device``.
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from ..data import batches
from ..measure.memory import LiveBytesProbe
from ..models import RECOMPUTE, build_model
from ..precision.adam8bit import Adam8bit, state_bytes_per_param


def recomputation_costs(spec, policies=RECOMPUTE, repeats: int = 3) -> list[dict]:
    """Per policy: what forward left for backward (bytes, probed), the step's time (fastest of
    ``repeats``, interleaved) and its gradients, which must not depend on the policy."""
    x, y = next(iter(batches(spec)))
    models = {p: build_model(spec, recompute=p) for p in policies}

    def step(model):
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()

    best = {p: float("inf") for p in policies}
    for _ in range(repeats):
        for p, model in models.items():
            start = time.perf_counter()
            step(model)
            best[p] = min(best[p], time.perf_counter() - start)
    rows = []
    for p, model in models.items():
        model.zero_grad(set_to_none=True)
        with LiveBytesProbe(list(model.parameters()) + list(model.buffers())) as probe:
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            probe.set_phase("backward")
            loss.backward()
        rows.append({"policy": p, "saved_bytes": probe.forward_end, "seconds": best[p],
                     "grads": [q.grad.detach().clone() for q in model.parameters()]})
    return rows


def train_with(spec, make_optimizer) -> dict:
    """Train the spec's model for ``spec.steps`` steps in this process; the trained model, its
    losses and the optimizer's state bytes per parameter at the end."""
    model = build_model(spec)
    optimizer = make_optimizer(model.parameters())
    losses = []
    for x, y in batches(spec):
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"model": model, "losses": losses, "state_bytes_per_param": state_bytes_per_param(optimizer)}


def adam_fp32_vs_8bit(spec, lr: float | None = None) -> dict:
    """fp32 ``torch.optim.Adam`` and :class:`Adam8bit`, same model, data and steps."""
    lr = lr or spec.lr
    return {"Adam (fp32 state)": train_with(spec, lambda p: torch.optim.Adam(p, lr=lr)),
            "Adam, 8-bit state": train_with(spec, lambda p: Adam8bit(p, lr=lr))}
