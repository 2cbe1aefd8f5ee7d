"""FLOPs: the one formula for a transformer's training FLOPs, and device peaks for MFU.

Counted FLOPs come from PyTorch's ``FlopCounterMode`` in the worker; this module holds what
the counts are compared with:

- :func:`training_flops_per_token`, the formula (Kaplan et al. 2020, Table 1; PaLM, Chowdhery
  et al. 2022, Appendix B): forward ``2·N + 2·2·L·s·d`` per token (``N`` the weights that take
  part in matmuls, attention's ``Q·Kᵀ`` and ``scores·V`` over the full ``s×s`` square), training
  3× the forward. The planner uses the same function for models it never builds.
- :func:`model_flops_per_token`: that formula for a model this package built.
- :func:`device_peak_flops`: the datasheet peak of the device a rank runs on, from the one
  table of devices (:mod:`gpututor.plan.catalog`), matched by exact name; None on a CPU or an
  unknown GPU (MFU is then not measured, never 0).
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..moe import moe_layers
from ..plan.catalog import gpu_for_cuda_name

RECOMPUTE = ("none", "selective", "full")


def training_flops_per_token(matmul_params: float, n_layer: int = 0, seq_len: int = 0,
                             d_model: int = 0, recompute: str = "none") -> float:
    """FLOPs per trained token: ``6·N + 12·L·s·d`` (``6·N`` alone for a model without attention).

    ``recompute`` counts work that runs but is not the model's: ``"full"`` runs the forward a
    second time (``8·N + 16·L·s·d``, the four passes of Narayanan et al. 2021); ``"selective"``
    re-runs attention's scores only (``+ 4·L·s·d``, Korthikanti et al. 2022). MFU uses
    ``"none"`` (the model's FLOPs), whatever the run recomputes (PaLM, Appendix B).
    """
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute={recompute!r} is invalid: allowed values are "
                         + ", ".join(repr(r) for r in RECOMPUTE))
    attention = 2 * 2 * n_layer * seq_len * d_model      # forward, per token
    passes = 4 if recompute == "full" else 3
    extra = attention if recompute == "selective" else 0
    return passes * (2 * matmul_params + attention) + extra


def uncounted_attention_flops(cfg, tokens: int, seq_len: int, device: torch.device) -> int:
    """The attention FLOPs ``FlopCounterMode`` misses for ``tokens`` trained tokens: torch's
    counter has no formula for the CPU kernel of ``scaled_dot_product_attention`` (it counts 0),
    so a GPT with ``attention="sdpa"`` on CPU gets attention's ``3 · 2·2·L·s·d`` per token (both
    products, forward and backward) added, as naive attention's matmuls are counted. Elsewhere 0."""
    if getattr(cfg, "attention", "naive") != "sdpa" or device.type != "cpu":
        return 0
    return 3 * 2 * 2 * cfg.n_layer * seq_len * cfg.d_model * tokens


def matmul_parameters(model: nn.Module) -> int:
    """Weights that take part in a token's matmuls: every ``nn.Linear`` (embedding lookups do
    not; a tied LM head does, through its ``nn.Linear``). A mixture of experts sends each token
    through ``top_k`` of its experts: each MoE layer counts ``top_k`` experts' weights, however
    many experts it holds (an expert-parallel rank holds a few), plus its router."""
    layers = moe_layers(model)
    in_experts = {id(m) for layer in layers for expert in layer.experts.values()
                  for m in expert.modules()}
    dense = sum(m.weight.numel() for m in model.modules()
                if isinstance(m, nn.Linear) and id(m) not in in_experts)
    active = sum(layer.top_k * _linear_weights(next(iter(layer.experts.values())))
                 for layer in layers if len(layer.experts))
    return dense + active


def _linear_weights(module: nn.Module) -> int:
    return sum(m.weight.numel() for m in module.modules() if isinstance(m, nn.Linear))


def model_flops_per_token(model: nn.Module, seq_len: int) -> float:
    """:func:`training_flops_per_token` for a model of :mod:`gpututor.models`."""
    cfg = getattr(model, "cfg", None)
    if hasattr(cfg, "n_layer"):   # a GPT: attention too
        return training_flops_per_token(matmul_parameters(model), cfg.n_layer, seq_len,
                                        cfg.d_model)
    return training_flops_per_token(matmul_parameters(model))


def device_peak_flops(device: torch.device, precision: str) -> float | None:
    """The device's dense peak FLOP/s for ``precision`` if the catalogue knows it, else None."""
    if device.type != "cuda":
        return None
    gpu = gpu_for_cuda_name(torch.cuda.get_device_name(device))
    return gpu.peak_flops.get(precision) if gpu is not None else None
