"""FLOPs of the models this package builds, and device peaks for MFU.

Counted FLOPs come from PyTorch's ``FlopCounterMode`` in the worker; this module holds what
the counts are compared with:

- :func:`model_flops_per_token`: the one formula (``gpututor.formulas.training_flops_per_token``,
  ``6·N + 12·L·s·h`` per token: Kaplan et al. 2020, §2.1 [ref: kaplan2020-compute]; PaLM,
  Chowdhery et al. 2022, Appendix B [ref: chowdhery2022-flops]) for a model this package
  built, ``N`` its weights that take part in matmuls (:func:`matmul_parameters`). The planner calls the same formula for models it never builds.
- :func:`device_peak_flops`: the datasheet peak of the device a rank runs on, from the one
  table of devices (:mod:`gpututor.catalog`), matched by exact name; None on a CPU or an
  unknown GPU (MFU is then not measured, never 0).
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..catalog import gpu_for_cuda_name
from ..formulas import attention_flops_per_token, training_flops_per_token
from ..moe import moe_layers


def uncounted_attention_flops(cfg, tokens: int, seq_len: int, device: torch.device) -> int:
    """The attention FLOPs ``FlopCounterMode`` misses for ``tokens`` trained tokens: torch's
    counter has no formula for the CPU kernel of ``scaled_dot_product_attention`` (it counts 0),
    so a GPT with ``attention="sdpa"`` on CPU gets attention's ``3 · 2·2·L·s·d`` per token (both
    products, forward and backward) added, as naive attention's matmuls are counted. Elsewhere 0."""
    if getattr(cfg, "attention", "naive") != "sdpa" or device.type != "cpu":
        return 0
    return 3 * attention_flops_per_token(cfg.n_layer, seq_len, cfg.d_model) * tokens


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
