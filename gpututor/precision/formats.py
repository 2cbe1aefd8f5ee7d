"""Number formats, measured: what fp32, bf16 and fp16 can hold, found by casting real tensors.

:func:`format_table` (bits, range, precision), :func:`cast_table` (what each format stores for
a value), :func:`flush_to_zero_fraction` and :func:`overflow_fraction` (what a cast loses of
real gradients), :func:`cpu_matrix_features` (which bf16/fp16 arithmetic instructions this CPU advertises).
"""
from __future__ import annotations

import math
from typing import Iterable

import torch
import torch.nn.functional as F

from .. import checks
from ..config import PRECISIONS, torch_dtype

DTYPES = {name: torch_dtype(name) for name in PRECISIONS}


def _dtype(name: str) -> torch.dtype:
    checks.choice("dtype", name, DTYPES)
    return DTYPES[name]


def smallest_subnormal(dtype: torch.dtype) -> float:
    """Halve a real tensor of ``dtype`` from 1 until one more halving gives 0: the last nonzero."""
    x = torch.ones((), dtype=dtype)
    while (x / 2) != 0:
        x = x / 2
    return x.item()


def format_table() -> list[dict]:
    """For fp32, bf16 and fp16: bits of exponent and mantissa, range and precision.

    ``mantissa_bits`` comes from the spacing of numbers just above 1 (``eps = 2**-mantissa``),
    the exponent bits from what is left of the width; ``max`` and ``smallest_normal`` from
    ``torch.finfo``; the smallest subnormal by halving a real tensor until it becomes 0.
    """
    rows = []
    for name, dtype in DTYPES.items():
        info = torch.finfo(dtype)
        mantissa = round(-math.log2(info.eps))
        rows.append({
            "format": name, "bits": info.bits, "exponent_bits": info.bits - 1 - mantissa,
            "mantissa_bits": mantissa, "max": info.max, "smallest_normal": info.smallest_normal,
            "smallest_subnormal": smallest_subnormal(dtype), "eps": info.eps,
            "decimal_digits": -math.log10(info.eps),
        })
    return rows


DEMO_VALUES = (1e-8, 1e-6, 3e-5, 1 / 3, 1 + 2**-9, 1000.1, 65504.0, 70000.0, 3e38)


def cast_table(values: Iterable[float] = DEMO_VALUES) -> list[dict]:
    """What each format stores for each value: cast a real tensor, read it back as float64."""
    rows = []
    for v in values:
        row = {"value": v}
        for name, dtype in DTYPES.items():
            row[name] = torch.tensor(v, dtype=torch.float64).to(dtype).double().item()
        rows.append(row)
    return rows


def flush_to_zero_fraction(tensors: Iterable[torch.Tensor], dtype: str = "fp16",
                           scale: float = 1.0) -> float:
    """Fraction of the nonzero entries of ``tensors × scale`` that become 0 in ``dtype``."""
    return _cast_loss(tensors, dtype, scale, counted=lambda t: t != 0,
                      lost=lambda cast: cast == 0)


def overflow_fraction(tensors: Iterable[torch.Tensor], dtype: str = "fp16",
                      scale: float = 1.0) -> float:
    """Fraction of the finite entries of ``tensors × scale`` that become inf in ``dtype``."""
    return _cast_loss(tensors, dtype, scale, counted=torch.isfinite, lost=torch.isinf)


def _cast_loss(tensors, dtype: str, scale: float, counted, lost) -> float:
    """Of the entries of ``tensors × scale`` where ``counted`` holds (in float64), the fraction
    where ``lost`` holds after casting them to ``dtype``."""
    target = _dtype(dtype)
    total = hit = 0
    for t in tensors:
        t = t.detach().double() * scale
        mask = counted(t)
        total += int(mask.sum())
        hit += int((mask & lost(t.to(target))).sum())
    return hit / total if total else 0.0


def model_gradients(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor
                    ) -> list[torch.Tensor]:
    """The fp32 gradients of one batch's loss, one tensor per parameter (for the demos above)."""
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten()).backward()
    grads = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad(set_to_none=True)
    return grads


def cpu_matrix_features(cpuinfo: str = "/proc/cpuinfo") -> list[str] | None:
    """Which bf16/fp16 arithmetic instructions this CPU advertises; None where it cannot be read.

    Linux x86 (the ``flags`` line of ``/proc/cpuinfo``): ``avx512_bf16`` / ``amx_bf16`` (bf16 dot
    products), ``avx512_fp16`` / ``amx_fp16`` (fp16 arithmetic). Linux ARM (the ``Features``
    line): ``bf16`` (BF16 instructions), ``fphp`` / ``asimdhp`` (half-precision, fp16,
    arithmetic; ARMv8.2 and later). macOS (no ``/proc/cpuinfo``): ``sysctl``'s
    ``hw.optional.arm.FEAT_BF16`` / ``FEAT_FP16``, named ``FEAT_BF16`` / ``FEAT_FP16``. Without
    them a CPU converts to fp32 and back on the fly.
    """
    wanted = ("avx512_bf16", "amx_bf16", "avx512_fp16", "amx_fp16", "bf16", "fphp", "asimdhp")
    try:
        with open(cpuinfo) as f:
            flags = {word for line in f if line.startswith(("flags", "Features"))
                     for word in line.split(":", 1)[1].split()}
    except OSError:
        return _sysctl_features()
    return [w for w in wanted if w in flags]


def _sysctl_features() -> list[str] | None:
    """macOS's ``hw.optional.arm.FEAT_BF16`` / ``FEAT_FP16`` that are 1; None where ``sysctl``
    does not answer (not macOS, or an Intel Mac, whose keys these are not)."""
    import subprocess
    found, answered = [], False
    for name in ("FEAT_BF16", "FEAT_FP16"):
        try:
            out = subprocess.run(["sysctl", "-n", f"hw.optional.arm.{name}"], capture_output=True,
                                 text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0 and out.stdout.strip():
            answered = True
            if out.stdout.strip() == "1":
                found.append(name)
    return found if answered else None
