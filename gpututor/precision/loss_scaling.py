"""Dynamic loss scaling from scratch (Micikevicius et al. 2018, *Mixed Precision Training*).

Loss scaling and skipping the update on an overflow: §3.2 [ref: micikevicius2018-loss-scaling];
the rule that halves and doubles the scale is ``torch.amp.GradScaler``'s.

fp16 flushes gradients below ~6e-8 to zero, so backward runs on ``loss × scale``. If any
gradient overflowed (inf/nan) the step is skipped and the scale halved; after
``growth_interval`` clean steps in a row the scale doubles. The production twin is
``torch.amp.GradScaler``; :func:`replay_scalers` feeds both the same gradient stream.
"""
from __future__ import annotations

from typing import Iterable

import torch

from .. import checks


class DynamicLossScaler:
    """Loss scaling with the update rule of ``torch.amp.GradScaler`` and its defaults: start at
    2¹⁶, ×2 after 2000 clean steps in a row, ×0.5 on an overflow
    (https://pytorch.org/docs/stable/amp.html#torch.amp.GradScaler).

    Each step: backward on ``scale_loss(loss)``; ``unscale_(grads)`` divides the gradients by
    the scale and says whether any is inf/nan; the caller skips the optimizer step if so; then
    ``update(found_inf)`` halves the scale after an overflow, or doubles it after
    ``growth_interval`` clean steps in a row.
    """

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000):
        checks.number_where("init_scale", init_scale, lambda v: v > 0, "a finite number > 0")
        checks.number_where("growth_factor", growth_factor, lambda v: v > 1, "a finite number > 1")
        checks.number_where("backoff_factor", backoff_factor, lambda v: 0 < v < 1, "a number in (0, 1)")
        checks.where("growth_interval", growth_interval, checks.int_in(1), "an integer >= 1")
        self.scale = float(init_scale)
        self.growth_factor, self.backoff_factor = growth_factor, backoff_factor
        self.growth_interval = growth_interval
        self.clean_steps = 0   # steps since the last overflow or growth (GradScaler's tracker)

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.scale

    def unscale_(self, grads: Iterable[torch.Tensor]) -> bool:
        """Divide ``grads`` by the scale in place; return True if any entry is inf or nan."""
        found_inf = False
        inv_scale = 1.0 / self.scale
        for g in grads:
            if g is None:
                continue
            g.mul_(inv_scale)
            found_inf = found_inf or not bool(torch.isfinite(g).all())
        return found_inf

    def update(self, found_inf: bool) -> None:
        """Back off after an overflow; grow after ``growth_interval`` clean steps in a row."""
        if found_inf:
            self.scale *= self.backoff_factor
            self.clean_steps = 0
            return
        self.clean_steps += 1
        if self.clean_steps == self.growth_interval:
            self.scale *= self.growth_factor
            self.clean_steps = 0


def replay_scalers(gradients: Iterable[float], **scaler_args) -> list[dict]:
    """Feed the same gradient stream to :class:`DynamicLossScaler` and ``torch.amp.GradScaler``.

    Each step, a one-parameter model gets the gradient ``g × (the scaler's scale)`` (what
    backward on a scaled loss would give); both scalers unscale, decide, and update. Returns one
    row per step: the gradient, and each scaler's scale and whether it skipped the step.
    """
    ours, theirs = DynamicLossScaler(**scaler_args), torch.amp.GradScaler("cpu", **scaler_args)
    p_ours, p_theirs = torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))
    opt_ours = torch.optim.SGD([p_ours], lr=0.01)
    opt_theirs = torch.optim.SGD([p_theirs], lr=0.01)
    rows = []
    for g in gradients:
        row = {"gradient": g, "scale": ours.scale}
        p_ours.grad = torch.full((1,), g) * ours.scale
        found_inf = ours.unscale_([p_ours.grad])
        if not found_inf:
            opt_ours.step()
        ours.update(found_inf)
        row["skipped"] = found_inf
        row["grad_scaler_scale"] = theirs.scale(torch.ones(())).item()  # the scale it applies
        p_theirs.grad = torch.full((1,), g) * row["grad_scaler_scale"]
        before = p_theirs.detach().clone()
        theirs.step(opt_theirs)  # unscales; skips the step if a gradient is inf/nan
        theirs.update()
        row["grad_scaler_skipped"] = bool(torch.equal(before, p_theirs.detach()))
        rows.append(row)
    return rows
