"""The roofline model: is an operator limited by arithmetic or by memory traffic?

Williams, Waterman & Patterson 2009 ("Roofline: an insightful visual performance model for
multicore architectures", CACM 52(4)): a device does at most ``peak`` FLOP/s and moves at most
``bandwidth`` bytes/s to and from memory. An operator with *arithmetic intensity*
``I = FLOPs / bytes moved`` can therefore reach at most

    attainable(I) = min(peak, bandwidth × I)

On a log-log plot that is a slanted line (memory roof) meeting a flat one (compute roof) at the
*ridge point* ``I = peak / bandwidth``. An operator left of the ridge is memory-bound: a faster
ALU would not help it, fewer bytes would. Right of it, it is compute-bound. Big matmuls sit right
of the ridge; layer norm, GELU, softmax and residual adds sit far to the left.

Here both roofs are measured on this machine (:func:`peak_matmul_flops`,
:func:`memory_bandwidth`), and each operator of a model is timed alone on the shapes it sees in
forward (:func:`operator_costs`). The memory roof is main memory's: an operator whose tensors
stay in cache can land above it (caches are faster), as small ones do on a CPU.
:func:`catalog_roofs` gives datasheet roofs of GPUs for comparison: those are not measured.
"""
from __future__ import annotations

import math
import re
from functools import partial
from typing import Callable, Iterable

import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import checks
from ..catalog import get_gpu
from ..checks import InvalidValue
from ..config import torch_dtype
from ..formulas import bytes_per_value
from ..models import MLP, build_model
from .matmul import matmul_flops
from .timing import seconds_per_call

# FLOPs per element of the ops that are not matmuls. These are conventions (there is no one
# right count: exp or erf is many instructions, or one), chosen so each step is one FLOP:
FLOPS_PER_ELEMENT = {
    "layer norm": 7,     # sum for the mean, subtract it, square, sum for the variance,
    #                      multiply by 1/std, scale by γ, shift by β
    "GELU": 5,           # 0.5·x·(1 + erf(x/√2)): divide, erf (as one), add, multiply, halve
    "softmax": 5,        # max, subtract it, exp, sum, divide
    "residual add": 1,   # one addition
}

# A linear's role in the model, from its name without the "blocks.<i>." prefix.
LINEAR_ROLES = {"attn.qkv": "attention qkv", "attn.proj": "attention out proj",
                "mlp.fc": "MLP fc", "mlp.proj": "MLP proj", "head": "LM head"}


def attainable(intensity: float, peak: float, bandwidth: float) -> float:
    """The roof at ``intensity`` FLOP/byte: ``min(peak, bandwidth × intensity)`` FLOP/s."""
    checks.positive("intensity", intensity, allow_zero=True)
    checks.positive("peak", peak)
    checks.positive("bandwidth", bandwidth)
    return min(peak, bandwidth * intensity)


def ridge(peak: float, bandwidth: float) -> float:
    """The intensity (FLOP/byte) where the memory roof meets the compute roof."""
    checks.positive("peak", peak)
    checks.positive("bandwidth", bandwidth)
    return peak / bandwidth


def bound(intensity: float, peak: float, bandwidth: float) -> str:
    """``"memory-bound"`` left of the ridge, ``"compute-bound"`` at it or right of it (at the
    ridge both roofs are equal: the operator could just reach peak)."""
    checks.positive("intensity", intensity, allow_zero=True)
    return "compute-bound" if intensity >= ridge(peak, bandwidth) else "memory-bound"


def memory_bandwidth(device="cpu", threads: int = 1, nbytes: int = 64_000_000,
                     min_time_s: float = 0.3) -> float:
    """Bytes/s of ``dst.copy_(src)`` on ``nbytes``-byte tensors, best of 3 rounds.

    Counted as STREAM's Copy (McCalpin) is: ``nbytes`` read plus ``nbytes`` written. A CPU that
    reads a cache line before writing it (write-allocate) moves more than that, so this is the
    rate a program sees, a little under what the wires carry. Take ``nbytes`` well above the
    last-level cache, or this measures the cache. One thread rarely fills a CPU's memory bus.
    """
    device = _check_device(device)
    checks.integer("threads", threads, 1)
    checks.integer("nbytes", nbytes, 4096)
    checks.positive("min_time_s", min_time_s)
    src = torch.randn(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    moved = 2 * src.nbytes   # numel x element size
    return moved / _best_seconds(lambda: dst.copy_(src), device, threads, 3, min_time_s)


def peak_matmul_flops(device="cpu", threads: int = 1, size: int = 512,
                      dtype: torch.dtype = torch.float32, min_time_s: float = 0.3) -> float:
    """The compute roof as measured here: FLOP/s of a ``size``×``size`` matmul
    (:func:`gpututor.measure.matmul.matmul_flops`). A real peak is higher: this is the best we saw."""
    device = _check_device(device)
    checks.integer("threads", threads, 1)
    checks.integer("size", size, 1)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise InvalidValue("dtype", dtype, "a floating torch.dtype, e.g. torch.float32 or "
                           "torch.bfloat16")
    checks.positive("min_time_s", min_time_s)
    return matmul_flops([(size, size, size)], dtype, device, threads, min_time_s)


def operator_costs(spec, threads: int = 1, repeats: int = 3, min_time_s: float = 0.05
                   ) -> list[dict]:
    """The main forward operators of ``spec``'s model, each timed alone on its forward shapes.

    One row per operator: ``op``, ``shape`` (its input's), ``flops``, ``elements`` (the least
    traffic: every input read once, every output written once, weights included), ``bytes``
    (those elements in ``spec.precision``), ``intensity`` (FLOP/byte; :func:`intensity_in`
    gives it for elements of another size), ``seconds`` (one call, best of ``repeats`` rounds) and
    ``flops_per_s``. The micro-batch is ``spec.batch_size // spec.grad_accum`` sequences of
    ``spec.seq_len`` tokens, in ``spec.precision``, on ``spec.resolved_device()``.
    """
    checks.integer("threads", threads, 1)
    checks.integer("repeats", repeats, 1)
    checks.positive("min_time_s", min_time_s)
    device, dtype = torch.device(spec.resolved_device()), torch_dtype(spec.precision)
    model = build_model(spec).to(device=device, dtype=dtype)
    rows = []
    with torch.no_grad():
        for op, shape, flops, nbytes, call in _operators(model, spec.batch_size // spec.grad_accum,
                                                         spec.seq_len, device, dtype):
            seconds = _best_seconds(call, device, threads, repeats, min_time_s)
            rows.append({"op": op, "shape": shape, "flops": flops,
                         "elements": nbytes // _element_size(dtype), "bytes": nbytes,
                         "intensity": flops / nbytes, "seconds": seconds,
                         "flops_per_s": flops / seconds})
    return rows


def matmul_elements(m: int, k: int, n: int, batches: int = 1, bias: int = 0) -> int:
    """Elements an ``(m×k) @ (k×n)`` matmul moves at the least (``batches`` of them): both inputs
    read once, the output written once; ``bias`` elements more read (a linear's bias). The count
    :func:`operator_costs` uses for every matmul and linear."""
    for name, value in (("m", m), ("k", k), ("n", n), ("batches", batches)):
        checks.integer(name, value, 1)
    checks.integer("bias", bias, 0)
    return batches * (m * k + k * n + m * n) + bias


def matmul_intensity(m: int, k: int, n: int, bytes_per_element: int) -> float:
    """FLOP/byte of an ``(m×k) @ (k×n)`` matmul: ``2·m·k·n`` FLOPs (a multiply and an add per
    term) over :func:`matmul_elements` × ``bytes_per_element`` bytes."""
    checks.integer("bytes_per_element", bytes_per_element, 1)
    return 2 * m * k * n / (matmul_elements(m, k, n) * bytes_per_element)


def intensity_in(row: dict, precision: str) -> float:
    """An :func:`operator_costs` row's FLOPs per byte were its elements ``precision`` numbers
    (in bf16 every element is 2 bytes, so an fp32 row's intensity doubles): the intensity to
    place against a roof drawn for that precision."""
    return row["flops"] / (row["elements"] * bytes_per_value(precision))


def _element_size(dtype: torch.dtype) -> int:
    return torch.tensor([], dtype=dtype).element_size()


def catalog_roofs(names: Iterable[str] = ("A100-80GB", "H100-80GB"), precision: str = "bf16"
                  ) -> list[dict]:
    """Datasheet roofs (dense peak at ``precision``, memory bandwidth, ridge) from
    :mod:`gpututor.catalog`; a name it does not hold raises ValueError listing those it does."""
    names = (names,) if isinstance(names, str) else tuple(names)
    roofs = []
    for name in names:
        gpu = get_gpu(name)
        peak = gpu.peak(precision)
        roofs.append({"name": gpu.name, "precision": precision, "peak": peak,
                      "bandwidth": gpu.memory_bandwidth,
                      "ridge": ridge(peak, gpu.memory_bandwidth), "source": gpu.source})
    return roofs


# ---- the operators and how they are timed -------------------------------------------------------

def _operators(model: nn.Module, batch: int, seq_len: int, device: torch.device,
               dtype: torch.dtype):
    """``(op, input shape, FLOPs, bytes, call)`` for each main operator of ``model``."""
    size = _element_size(dtype)

    randn = partial(torch.randn, device=device, dtype=dtype)
    seen = set()
    for name, module in model.named_modules():
        role = re.sub(r"^blocks\.\d+\.", "", name)
        if not isinstance(module, nn.Linear) or role in seen:
            continue
        seen.add(role)
        m, k, n = batch * seq_len, module.in_features, module.out_features
        bias = n if module.bias is not None else 0
        x = randn(batch, seq_len, k)
        # 2·m·k·n, as torch's FlopCounterMode counts a linear: the bias add (m·n) is left out
        yield (f"linear: {LINEAR_ROLES.get(role, role)}", (batch, seq_len, k), 2 * m * k * n,
               matmul_elements(m, k, n, bias=bias) * size, lambda f=module, x=x: f(x))

    cfg = model.cfg
    d_model = cfg.d_model
    if hasattr(cfg, "n_head"):   # a GPT: attention's two batched matmuls and softmax
        heads, hd, T = cfg.n_head, d_model // cfg.n_head, seq_len
        q, k, v, p = (randn(batch, heads, T, hd), randn(batch, heads, T, hd),
                      randn(batch, heads, T, hd), randn(batch, heads, T, T))
        bh = batch * heads
        yield ("matmul: attention scores q·kᵀ", tuple(q.shape), 2 * bh * T * hd * T,
               matmul_elements(T, hd, T, batches=bh) * size, lambda: q @ k.transpose(-2, -1))
        yield ("matmul: attention mix p·v", tuple(p.shape), 2 * bh * T * T * hd,
               matmul_elements(T, T, hd, batches=bh) * size, lambda: p @ v)
        yield _elementwise("softmax", p, 1, lambda: F.softmax(p, dim=-1), size)
        norm = next(m for m in model.modules() if isinstance(m, nn.LayerNorm))
        x = randn(batch, seq_len, d_model)
        yield _elementwise("layer norm", x, 1, lambda: norm(x), size, extra_bytes=2 * d_model)
        y = randn(batch, seq_len, d_model)
        yield _elementwise("residual add", x, 2, lambda: x + y, size)
    mlp = next(m for m in model.modules() if isinstance(m, MLP))
    hidden = randn(batch, seq_len, mlp.fc.out_features)
    yield _elementwise("GELU", hidden, 1, lambda: F.gelu(hidden), size)


def _elementwise(op: str, x: torch.Tensor, inputs: int, call: Callable, size: int,
                 extra_bytes: int = 0):
    """A row for an op whose output has ``x``'s shape: ``inputs`` tensors like ``x`` read,
    the output written, ``extra_bytes`` elements more read (a layer norm's γ and β)."""
    n = x.numel()
    return (op, tuple(x.shape), FLOPS_PER_ELEMENT[op] * n, ((inputs + 1) * n + extra_bytes) * size,
            call)


def _best_seconds(call: Callable, device: torch.device, threads: int, rounds: int,
                  min_time_s: float) -> float:
    """Seconds of one ``call()``: a warm-up, then the best of ``rounds`` rounds, each the mean
    over as many calls as fit in ``min_time_s / rounds`` (at least one), on ``threads`` threads."""
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        call()   # warm-up: the first call picks kernels and allocates
        best = math.inf
        for _ in range(rounds):
            best = min(best, seconds_per_call(call, device, min_time_s / rounds))
        return best
    finally:
        torch.set_num_threads(saved)


def _check_device(device) -> torch.device:
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda") or (
            parsed.type == "cuda" and not torch.cuda.is_available()):
        raise InvalidValue("device", device, "'cpu' or 'cuda'" if torch.cuda.is_available()
                           else "'cpu' (no GPU here)")
    return parsed
