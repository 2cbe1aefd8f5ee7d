"""FP8 casts from scratch: the two formats, a scale per tensor, per row or per block of 32.

An FP8 number has 8 bits. ``float8_e4m3fn`` (4 exponent, 3 mantissa bits) reaches 448 and keeps
about 2 significant decimal digits; ``float8_e5m2`` (5 and 2) reaches 57344 with less precision.
E4M3 is meant for weights and activations, E5M2 for gradients [ref: micikevicius2022-formats].
So few values fit that a tensor is first multiplied by a **scale** that moves its largest
magnitude (its *amax*) to the top of the format, then cast; ``data / scale`` gives it back
[ref: micikevicius2022-scaling]. What differs between recipes is how many numbers share a scale:

- **per tensor**, dynamic (:func:`tensorwise_scale`: the amax of this tensor now) or delayed
  (:class:`DelayedScaler`: the largest amax of the last N steps, so no pass over the tensor is
  needed before the cast);
- **per row** (:func:`rowwise_scale`): one scale per row, so one large row no longer squeezes
  every other row towards zero;
- **per block of 32** (:func:`mx_block_cast`), OCP Microscaling (MX): the scale is a power of
  two stored in 8 bits (E8M0) [ref: ocp2023-mx-conversion].

Every cast here **saturates**: a scaled value beyond the format's largest normal number is
clamped to ±max before the cast (torch's own cast to E5M2 rounds 61440 up to inf, and to E4M3
saturates: clamping first makes both behave the same way). Rounding is torch's cast,
round-to-nearest-even. :func:`cast_counts` says what a cast lost: values that overflowed (were
clamped) and nonzero values that flushed to zero.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

FP8_DTYPES = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
AMAX_FLOOR = 1e-12          # a smaller amax counts as this: an all-zero tensor gets a finite scale
MX_BLOCK = 32               # elements that share one E8M0 scale in the OCP MX formats
E8M0_EXPONENTS = (-127, 127)  # the powers of two an E8M0 scale can hold (255 is NaN)


def fp8_dtype(name_or_dtype: str | torch.dtype) -> torch.dtype:
    """``"e4m3"``/``"e5m2"`` or a torch FP8 dtype, as the torch dtype."""
    if isinstance(name_or_dtype, torch.dtype):
        if name_or_dtype not in FP8_DTYPES.values():
            raise ValueError(f"{name_or_dtype} is not one of {list(FP8_DTYPES.values())}")
        return name_or_dtype
    if name_or_dtype not in FP8_DTYPES:
        raise ValueError(f"FP8 format {name_or_dtype!r}: choose one of {list(FP8_DTYPES)}")
    return FP8_DTYPES[name_or_dtype]


def fp8_max(dtype: str | torch.dtype) -> float:
    """The largest normal value of the format (448 for E4M3, 57344 for E5M2)."""
    return torch.finfo(fp8_dtype(dtype)).max


def fp8_values(dtype: str | torch.dtype) -> torch.Tensor:
    """Every value the format holds: its 256 bit patterns read as numbers (float32, NaNs kept)."""
    return torch.arange(256, dtype=torch.int32).to(torch.uint8).view(fp8_dtype(dtype)).float()


def fp8_format_facts(dtype: str | torch.dtype) -> dict:
    """What the format holds, read from its 256 bit patterns (not from a table).

    ``max``: the largest finite value; ``smallest_subnormal``: the smallest positive one;
    ``mantissa_bits`` from the gap just above 1 (2^-mantissa); ``smallest_normal``: the pattern
    with exponent field 1 and mantissa 0; ``nan`` and ``inf``: how many patterns are each.
    """
    dt = fp8_dtype(dtype)
    values = fp8_values(dt)
    finite = values[torch.isfinite(values)]
    positive = finite[finite > 0]
    mantissa = round(-math.log2((positive[positive > 1].min() - 1).item()))
    return {"format": str(dt).replace("torch.", ""), "max": finite.max().item(),
            "smallest_normal": values[1 << mantissa].item(),
            "smallest_subnormal": positive.min().item(), "mantissa_bits": mantissa,
            "nan": int(torch.isnan(values).sum()), "inf": int(torch.isinf(values).sum())}


def saturating_cast(scaled: torch.Tensor, dtype: str | torch.dtype) -> torch.Tensor:
    """Cast an already scaled float32 tensor to FP8, clamping to ±max first (saturation)."""
    dt = fp8_dtype(dtype)
    top = fp8_max(dt)
    return scaled.clamp(min=-top, max=top).to(dt)


def _amax_to_scale(amax: torch.Tensor, dtype: torch.dtype, power_of_2: bool) -> torch.Tensor:
    # max / amax computed in float64 then rounded once to float32 (torchao's order, so the
    # scales agree bit for bit); power_of_2 rounds the scale *down*, so amax·scale ≤ max still
    scale = (fp8_max(dtype) / amax.double().clamp(min=AMAX_FLOOR)).float()
    if power_of_2:
        scale = torch.exp2(torch.floor(torch.log2(scale)))
    return scale


def tensorwise_scale(x: torch.Tensor, dtype: str | torch.dtype, power_of_2: bool = False
                     ) -> torch.Tensor:
    """One scale for the whole tensor: ``max / amax(x)`` (a 0-d float32 tensor)."""
    return _amax_to_scale(x.detach().abs().max(), fp8_dtype(dtype), power_of_2)


def rowwise_scale(x: torch.Tensor, dtype: str | torch.dtype, dim: int = -1,
                  power_of_2: bool = False) -> torch.Tensor:
    """One scale per slice along ``dim``: ``max / amax`` over ``dim`` (kept as a size-1 dim).

    ``dim=-1`` gives one scale per row; ``dim=0`` one per column."""
    amax = x.detach().abs().amax(dim=dim, keepdim=True)
    return _amax_to_scale(amax, fp8_dtype(dtype), power_of_2)


@dataclass
class Fp8Cast:
    """An FP8 tensor and its scale: ``data.float() / scale`` is the value it stands for."""
    data: torch.Tensor     # float8_e4m3fn or float8_e5m2
    scale: torch.Tensor    # float32, broadcastable to data (0-d, one per row, or one per block)
    overflow: int          # values beyond max's rounding range, kept at ±max by the clamp
    flushed: int           # nonzero values that became 0

    def dequantize(self) -> torch.Tensor:
        """Back to float32: what a matmul on these FP8 numbers computes with."""
        return self.data.float() / self.scale


def overflows(scaled: torch.Tensor, dtype: str | torch.dtype) -> torch.Tensor:
    """Which scaled values overflow: rounded to nearest-even with no limit on the exponent,
    they would land above the format's max, so only the saturation keeps them at ±max.

    The threshold is half a step above max (464 for E4M3, whose steps there are 32; 61440 for
    E5M2, steps of 8192). At exactly that midpoint the tie goes to the even neighbour: 448 for
    E4M3 (mantissa 110: not an overflow), 65536 for E5M2 (57344's mantissa 11 is odd: an
    overflow). So a value a float32 rounding puts a hair above max (amax·scale) does not count.
    """
    dt = fp8_dtype(dtype)
    top = fp8_max(dt)
    step = 2.0 ** math.floor(math.log2(top)) * torch.finfo(dt).eps   # the spacing next to max
    midpoint = top + step / 2
    max_is_odd = bool(torch.tensor(top).to(dt).view(torch.uint8).item() & 1)
    mag = scaled.abs()
    return torch.isfinite(scaled) & ((mag >= midpoint) if max_is_odd else (mag > midpoint))


def cast_counts(x: torch.Tensor, scale: torch.Tensor, dtype: str | torch.dtype) -> dict:
    """How many values of ``x`` a cast with ``scale`` to ``dtype`` loses.

    ``overflow``: values :func:`overflows` marks (they saturate to ±max); ``flushed``: nonzero
    values whose cast is 0; also the number of values and of nonzero ones.
    """
    dt = fp8_dtype(dtype)
    scaled = x.detach().float() * scale
    cast = saturating_cast(scaled, dt)
    return {"values": x.numel(), "nonzero": int((x != 0).sum()),
            "overflow": int(overflows(scaled, dt).sum()),
            "flushed": int(((x != 0) & (cast.float() == 0)).sum())}


def cast_with_scale(x: torch.Tensor, scale: torch.Tensor, dtype: str | torch.dtype) -> Fp8Cast:
    """``x`` (upcast to float32) times ``scale``, cast with saturation, with its loss counted."""
    dt = fp8_dtype(dtype)
    data = saturating_cast(x.detach().float() * scale, dt)
    counts = cast_counts(x, scale, dt)
    return Fp8Cast(data, scale, counts["overflow"], counts["flushed"])


def tensorwise_cast(x: torch.Tensor, dtype: str | torch.dtype = "e4m3",
                    power_of_2: bool = False) -> Fp8Cast:
    """Dynamic per-tensor scaling: the scale from this tensor's own amax."""
    return cast_with_scale(x, tensorwise_scale(x, dtype, power_of_2), dtype)


def rowwise_cast(x: torch.Tensor, dtype: str | torch.dtype = "e4m3", dim: int = -1,
                 power_of_2: bool = False) -> Fp8Cast:
    """Per-row (axiswise) scaling: one scale per slice along ``dim``."""
    return cast_with_scale(x, rowwise_scale(x, dtype, dim, power_of_2), dtype)


def mx_shared_exponent(amax: torch.Tensor, dtype: str | torch.dtype = "e4m3") -> torch.Tensor:
    """The OCP MX shared exponent of blocks with these amaxes (an int32 tensor).

    ``floor(log2(amax)) − emax_elem``, where ``emax_elem`` is the exponent of the element
    format's largest normal (8 for E4M3: 448 = 1.75·2⁸; 15 for E5M2), clamped to what E8M0
    holds, −127..127 [ref: ocp2023-mx-conversion]. The rounding of the scale is the spec's
    **floor**: the block's amax lands in [2^emax_elem, 2^(emax_elem+1)), so values above max
    (448..512 for E4M3) are clamped. ``floor(log2)`` is read exactly from the float's exponent
    (``torch.frexp``), not from a rounded logarithm; an all-zero block gets −127.
    """
    emax_elem = math.floor(math.log2(fp8_max(dtype)))
    _, exponent = torch.frexp(amax.float())          # amax = m·2^e with m in [0.5, 1)
    floor_log2 = torch.where(amax > 0, exponent - 1, torch.full_like(exponent, -10_000))
    return (floor_log2 - emax_elem).clamp(*E8M0_EXPONENTS)


def mx_block_cast(x: torch.Tensor, dtype: str | torch.dtype = "e4m3", block: int = MX_BLOCK
                  ) -> Fp8Cast:
    """OCP MX: blocks of ``block`` values along the last dim, each with a power-of-two scale.

    The last dim is padded with zeros to a multiple of ``block`` (zeros change no amax) and
    the padding dropped again. The scale returned is ``2^−shared_exponent``, one per block,
    repeated over its values, so ``data / scale`` is the spec's ``X · P``.
    """
    n = x.shape[-1]
    padded = torch.nn.functional.pad(x.detach().float(), (0, (-n) % block))
    blocks = padded.reshape(*padded.shape[:-1], padded.shape[-1] // block, block)
    exponent = mx_shared_exponent(blocks.abs().amax(dim=-1, keepdim=True), dtype)
    scale = torch.exp2(-exponent.float()).expand_as(blocks)
    scale = scale.reshape(padded.shape)[..., :n]
    return cast_with_scale(x, scale, dtype)


class DelayedScaler:
    """Delayed per-tensor scaling: the scale comes from the amaxes of the last ``history`` casts.

    The first cast, with no history yet, uses its own amax (dynamic). After each cast, this
    tensor's amax joins the history, so a spike shows up in the next step's scale and is
    clamped (counted as overflow) in this one. Transformer Engine's ``DelayedScaling`` recipe
    works this way; torchao 0.18 keeps only dynamic scaling.
    """

    def __init__(self, dtype: str | torch.dtype = "e4m3", history: int = 16):
        if history < 1:
            raise ValueError(f"history must be at least 1, got {history}")
        self.dtype, self.history = fp8_dtype(dtype), history
        self.amaxes: list[float] = []

    def scale(self, x: torch.Tensor) -> torch.Tensor:
        """The scale the next cast of ``x`` uses: ``max / max(amax history)``."""
        seen = self.amaxes or [x.detach().abs().max().item()]
        return _amax_to_scale(torch.tensor(max(seen)), self.dtype, power_of_2=False)

    def cast(self, x: torch.Tensor) -> Fp8Cast:
        """Cast ``x`` with the scale from history, then record its amax."""
        out = cast_with_scale(x, self.scale(x), self.dtype)
        self.amaxes = (self.amaxes + [x.detach().abs().max().item()])[-self.history:]
        return out
