"""int8 quantization of Linear weights: from scratch, then PyTorch's two production paths.

**From scratch** (symmetric, per output channel): each row ``w`` of a weight gets its own scale
``s = max|w| / 127``; the stored weight is ``q = round(w / s)``, an int8 in [-127, 127], and the
layer computes ``y = (x @ qᵀ) · s + b``. Rounding moves each weight by at most ``s / 2``.
:class:`Int8Linear` is that layer ("weight-only": activations stay float).

**Production**:

- :func:`quantize_torchao_int8` — torchao's ``quantize_(model, Int8WeightOnlyConfig())``, the
  path PyTorch points to today. The same idea (weight-only, per channel, symmetric), not the
  same numbers: its scale is ``max|w| / 127.5`` and its codes span [-128, 127], so some weights
  get another code than here (lesson 07's exercise 1 counts them); it stores them in an
  ``Int8Tensor``.
  torchao is an optional dependency: ``pip install "gpututor[compress]"``.
- :func:`quantize_dynamic_int8` — ``torch.ao.quantization.quantize_dynamic``: weights int8 *and*
  activations quantized on the fly, so the matmul itself runs in int8 (fbgemm/onednn kernels,
  CPU only). Deprecated in favour of torchao and due to be removed from torch, but still shipped
  with torch 2.6-2.13; its deprecation warnings are silenced here, and said so in the lesson.

Linear weights take 1 byte instead of 4 either way (embeddings, norms and biases stay float:
:func:`gpututor.compression.measure.int8_size_bound`); whether inference gets faster depends on
the kernel, so the lesson measures it (:mod:`gpututor.compression.measure`).
"""
from __future__ import annotations

import copy
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..optional import quiet_import

QMAX = 127   # symmetric int8: [-127, 127], so 0 is exact and the range is the same both ways


def symmetric_scale(weight: torch.Tensor, qmax: int = QMAX) -> torch.Tensor:
    """One scale per output channel (row): ``max|w| / qmax`` (a tiny floor for all-zero rows)."""
    amax = weight.detach().abs().amax(dim=1).float()
    return torch.clamp(amax / qmax, min=torch.finfo(torch.float32).tiny)


def quantize_per_channel(weight: torch.Tensor, qmax: int = QMAX
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, scale)``: int8 weights ``round(w / scale)`` per row, and the float32 scales."""
    scale = symmetric_scale(weight, qmax)
    q = torch.clamp(torch.round(weight.detach().float() / scale[:, None]), -qmax, qmax)
    return q.to(torch.int8), scale


def dequantize_per_channel(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The float weights the int8 ones stand for: ``q · scale`` per row."""
    return q.float() * scale[:, None]


def quantization_error(weight: torch.Tensor) -> dict[str, float]:
    """How far int8 moves a weight: largest error, that error in units of its row's scale
    (at most 0.5 by construction), and the relative size of the whole error matrix."""
    q, scale = quantize_per_channel(weight)
    error = dequantize_per_channel(q, scale) - weight.detach().float()
    return {"max_abs_error": error.abs().max().item(),
            "max_error_in_scales": (error.abs() / scale[:, None]).max().item(),
            "relative_error": (error.norm() / weight.detach().float().norm()).item()}


class Int8Linear(nn.Module):
    """A Linear layer that stores int8 weights and one float scale per output channel."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.in_features, self.out_features = q.shape[1], q.shape[0]
        self.register_buffer("q", q)
        self.register_buffer("scale", scale)
        self.register_buffer("bias", None if bias is None else bias.detach().clone())

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> "Int8Linear":
        q, scale = quantize_per_channel(linear.weight)
        return cls(q, scale, linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The scale is per output column of x @ qᵀ, so it can be applied after the matmul.
        y = F.linear(x, self.q.to(x.dtype)) * self.scale.to(x.dtype)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def quantize_linears(model: nn.Module) -> nn.Module:
    """A copy of ``model`` with every ``nn.Linear`` replaced by an :class:`Int8Linear`.

    A Linear whose weight is tied to an embedding (the GPT's LM head) gets its own int8 copy; the
    embedding stays float, as with the production paths.
    """
    model = copy.deepcopy(model).eval()
    for module in list(model.modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.Linear):
                setattr(module, child_name, Int8Linear.from_linear(child))
    return model


def quantize_dynamic_int8(model: nn.Module) -> nn.Module:
    """A copy with int8 weights and int8 matmuls: ``torch.ao.quantization.quantize_dynamic``.

    CPU only. Deprecated (torch points to torchao); its deprecation warnings are silenced here.
    """
    model = copy.deepcopy(model).cpu().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*deprecated.*")
        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)


def torchao_version() -> str | None:
    """torchao's version if it can be imported here, else None."""
    try:
        with quiet_import():
            import torchao
            from torchao.quantization import Int8WeightOnlyConfig, quantize_  # noqa: F401
        return torchao.__version__
    except Exception:  # noqa: BLE001 - missing, or built for another torch: either way, not usable
        return None


def quantize_torchao_int8(model: nn.Module) -> nn.Module:
    """A copy with torchao's int8 weight-only quantization on every Linear (production API)."""
    if torchao_version() is None:
        raise ImportError("torchao is not installed (or does not load with this torch): "
                          'pip install "gpututor[compress]"')
    with quiet_import():
        from torchao.quantization import Int8WeightOnlyConfig, quantize_
    # A tied LM head gets a new int8 weight; the embedding keeps the float one (as above).
    model = copy.deepcopy(model).eval()
    with quiet_import():
        quantize_(model, Int8WeightOnlyConfig(set_inductor_config=False))
    return model
