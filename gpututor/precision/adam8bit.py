"""Adam with 8-bit optimizer state, from scratch: a simpler variant of block-wise quantization
(Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization"
[ref: dettmers2022-blockwise]).

fp32 Adam keeps two numbers per parameter, the running mean ``m`` of the gradient and the running
mean ``v`` of its square: 8 bytes. Here each state tensor is cut into blocks of ``block`` numbers,
and each block is stored as one byte per number plus one fp32 scale (its largest magnitude):

- ``m`` (signed) as int8: ``q = round(m / absmax · 127)``;
- ``v`` (never negative, spanning many orders of magnitude) through its square root, as uint8:
  ``q = round(√v / max√v · 255)``, and never below 1. The square root halves the range in
  orders of magnitude, and it is what the update divides by anyway. The floor of 1 matters: a
  linear code rounds a √v below half a level to 0, the update's denominator then falls to
  ``eps`` and that parameter takes a step of about ``lr · m / eps``. Code 1 then stands for
  everything below 1.5 levels, so a √v below half a level is stored too large, never as 0: the
  step it gets is smaller than Adam's, not one of ``lr · m / eps``.

With ``block=64`` that is ``2 + 8/64 = 2.125`` bytes per parameter instead of 8. Each step
dequantizes a tensor's state, does the ordinary Adam update in fp32, and quantizes again.
Where this differs from Dettmers et al. 2022 (§2 [ref: dettmers2022-blockwise]): they use blocks
of 2048, a non-linear "dynamic" 8-bit code (dynamic tree quantization, fine steps near 0 and
coarse ones far from it) and store ``v`` itself; here blocks are 64, the code is linear and
``v`` is stored as √v. The linear code is the simplest that shows the mechanism and the bytes.
``quantize=False`` keeps the same code path in fp32, and equals ``torch.optim.Adam``: the tests
check both.
"""
from __future__ import annotations

import math

import torch

from .. import checks


def quantize_blocks(x: torch.Tensor, block: int, signed: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` (flat) as 8-bit codes and one fp32 scale per block of ``block`` numbers. Unsigned
    codes (for √v, never negative) are at least 1, so nothing is stored as 0."""
    n = x.numel()
    pad = (-n) % block
    blocks = torch.nn.functional.pad(x.reshape(-1), (0, pad)).view(-1, block)
    scale = blocks.abs().amax(dim=1).clamp_min(torch.finfo(torch.float32).tiny)
    levels = 127 if signed else 255
    codes = torch.round(blocks / scale[:, None] * levels)
    if not signed:
        codes = codes.clamp_min(1)   # never 0: see the module's docstring
    return codes.to(torch.int8 if signed else torch.uint8), scale


def dequantize_blocks(codes: torch.Tensor, scale: torch.Tensor, numel: int, signed: bool) -> torch.Tensor:
    levels = 127 if signed else 255
    return (codes.float() * (scale[:, None] / levels)).reshape(-1)[:numel]


class Adam8bit(torch.optim.Optimizer):
    """Adam (no weight decay, bias-corrected, as ``torch.optim.Adam``) with 8-bit state."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 block: int = 64, quantize: bool = True):
        checks.integer("block", block)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, block=block, quantize=quantize))

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g, state = p.grad.float().reshape(-1), self.state[p]
                if not state:
                    state["step"] = 0
                    m = torch.zeros_like(g)
                    v = torch.zeros_like(g)
                else:
                    m, v = self._load(state, g.numel(), group)
                state["step"] += 1
                t = state["step"]
                m.lerp_(g, 1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                # the bias-corrected update, in torch.optim.Adam's order of operations
                denom = (v.sqrt() / math.sqrt(1 - beta2 ** t)).add_(group["eps"])
                p.addcdiv_(m.view_as(p).to(p.dtype), denom.view_as(p).to(p.dtype),
                           value=-group["lr"] / (1 - beta1 ** t))
                self._store(state, m, v, group)
        return loss

    def _store(self, state, m, v, group) -> None:
        if group["quantize"]:
            state["m_codes"], state["m_scale"] = quantize_blocks(m, group["block"], signed=True)
            state["s_codes"], state["s_scale"] = quantize_blocks(v.sqrt(), group["block"], signed=False)
        else:
            state["m"], state["v"] = m, v

    def _load(self, state, numel, group):
        if group["quantize"]:
            m = dequantize_blocks(state["m_codes"], state["m_scale"], numel, signed=True)
            s = dequantize_blocks(state["s_codes"], state["s_scale"], numel, signed=False)
            return m, s * s
        return state["m"], state["v"]


def state_bytes_per_param(optimizer: torch.optim.Optimizer) -> float:
    """Bytes of optimizer state (every tensor in ``optimizer.state``) per parameter."""
    n_params = sum(p.numel() for g in optimizer.param_groups for p in g["params"])
    held = sum(t.nbytes for s in optimizer.state.values()
               for t in s.values() if torch.is_tensor(t))
    return held / n_params if n_params else math.nan
