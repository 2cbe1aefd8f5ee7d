"""Lesson 06b's runs: the same small GPT, seed and batches trained in this process in fp32, in
bf16 (autocast) and in FP8, with the from-scratch recipes of ``gpututor.precision.fp8_linear``
and torchao's emulated tensorwise Float8 training, the output layer kept in high precision.

Each run records its loss per step; a from-scratch FP8 run also records, per step and per
converted layer, each operand's overflow and flush-to-zero counts (``fp8_cast_counts``) and the
tensorwise scale its amax gives (``max / amax``: input and weight in E4M3, the output's gradient
in E5M2), and, at the last step, the operands themselves, scaled, for the histograms.
Nothing here measures speed: emulated FP8 runs in float32 on a CPU.
"""
from __future__ import annotations

import time
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn

from ...checks import InvalidValue
from ...config import FP8_KEPT
from ...data import batches
from ...models import build_model
from ...precision.fp8_casts import fp8_max, rowwise_scale, tensorwise_scale
from ...precision.fp8_linear import Fp8Linear, convert_linears, fp8_cast_counts
from ...precision.fp8_training import to_fp8_training, torchao_float8

FROM_SCRATCH = ("tensorwise", "rowwise", "mxfp8")
TORCHAO = "torchao tensorwise (emulated)"
LESSON_RUNS = ("fp32", "bf16") + FROM_SCRATCH + (TORCHAO,)
OPERANDS = {"input": "e4m3", "weight": "e4m3", "grad_output": "e5m2"}   # tensorwise formats


def convert_torchao(model: nn.Module, kept=FP8_KEPT) -> list[str]:
    """torchao's ``convert_to_float8_training`` with ``emulate=True`` (FP8 numerics in float32,
    so it runs on a CPU), every ``nn.Linear`` but ``kept``; the names converted (what a run with
    ``precision="fp8"`` does: ``precision/fp8_training.py``)."""
    return to_fp8_training(model, emulate=True, kept=kept)


class OperandProbe:
    """Hooks on a model's :class:`Fp8Linear` layers that note each operand's tensorwise scale
    (``max / amax``) at every step, and keep the operands of the step ``keep_at``."""

    def __init__(self, model: nn.Module, keep_at: int):
        self.scales: dict[str, list[float]] = {}
        self.kept: dict[str, torch.Tensor] = {}
        self.step, self.keep_at, self.handles = 0, keep_at, []
        for name, module in model.named_modules():
            if isinstance(module, Fp8Linear):
                self.handles.append(module.register_forward_hook(self._forward(name)))
                self.handles.append(module.register_full_backward_hook(self._backward(name)))

    def _note(self, name: str, operand: str, t: torch.Tensor) -> None:
        t = t.detach().float()
        key = f"{name}.{operand}"
        self.scales.setdefault(key, []).append(float(tensorwise_scale(t, OPERANDS[operand])))
        if self.step == self.keep_at:
            self.kept[key] = t.reshape(-1, t.shape[-1]).clone()

    def _forward(self, name):
        def hook(module, inputs, _out):
            self._note(name, "input", inputs[0])
            self._note(name, "weight", module.weight)
        return hook

    def _backward(self, name):
        def hook(_module, _grad_in, grad_out):
            self._note(name, "grad_output", grad_out[0])
        return hook

    def close(self) -> None:
        for h in self.handles:
            h.remove()


def train_run(spec, run: str, progress=None) -> dict:
    """Train ``spec``'s model as ``run`` (one of :data:`LESSON_RUNS`) with AdamW at ``spec.lr``:
    ``losses``, the layers ``converted``, and for a from-scratch FP8 run ``counts`` (per step:
    layer -> operand -> overflow/flushed/values), ``scales`` and ``kept`` (:class:`OperandProbe`),
    ``seconds`` (wall clock of the whole run: not a speed of FP8) and ``device`` (where it ran)."""
    model = build_model(spec)
    converted: list[str] = []
    if run in FROM_SCRATCH:
        converted = convert_linears(model, run, skip=FP8_KEPT)
    elif run == TORCHAO:
        converted = convert_torchao(model)
    probe = OperandProbe(model, spec.steps - 1) if run in FROM_SCRATCH else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if run == "bf16" else nullcontext()
    losses, counts, start = [], [], time.perf_counter()
    for step, (x, y) in enumerate(batches(spec)):
        if probe is not None:
            probe.step = step
        with autocast:
            logits = model(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if run in FROM_SCRATCH:
            counts.append(fp8_cast_counts(model))
    out = {"losses": losses, "converted": converted, "seconds": time.perf_counter() - start,
           "model": model, "device": str(next(model.parameters()).device)}
    if probe is not None:
        probe.close()
        out.update(counts=counts, scales=probe.scales, kept=probe.kept)
    if progress is not None:
        progress(run, out)
    return out


def torchao_float8_loads() -> bool:
    """Whether torchao's Float8 training (what :func:`convert_torchao` imports) loads here."""
    try:
        torchao_float8()
        return True
    except InvalidValue:   # missing, or built for another torch: not usable either way
        return False


def available_runs() -> tuple:
    """:data:`LESSON_RUNS`, less torchao's where torchao's Float8 does not load (torchao is an
    extra, ``gpututor[compress]``: Binder's environment and a plain ``pip install`` lack it)."""
    return LESSON_RUNS if torchao_float8_loads() else LESSON_RUNS[:-1]


def train_all(spec, runs=None, progress=None) -> dict:
    """:func:`train_run` for each of ``runs`` (default :func:`available_runs`), in order, on
    ``spec.threads_per_rank`` threads (as lesson 06's runs: on a shared machine more threads
    fight over its cores): run name -> its record."""
    runs = available_runs() if runs is None else runs
    saved = torch.get_num_threads()
    torch.set_num_threads(spec.threads_per_rank)
    try:
        return {run: train_run(spec, run, progress) for run in runs}
    finally:
        torch.set_num_threads(saved)


def run_totals(record: dict) -> dict[str, dict[str, int]]:
    """A from-scratch FP8 run's overflow and flush counts summed over its steps and layers, per
    operand of the three matmuls (``input``, ``weight``, ``grad_output``, ``*_for_dx/dw``)."""
    totals: dict = {}
    for step in record["counts"]:
        for layer in step.values():
            for operand, c in layer.items():
                t = totals.setdefault(operand, {"overflow": 0, "flushed": 0, "values": 0})
                for k in t:
                    t[k] += c[k]
    return totals


def weight_bytes(model: nn.Module, recipe: str) -> dict[str, int]:
    """Bytes of the converted layers' weights as a matmul reads them, counted from the tensors:
    ``bf16`` (2 bytes a value) and ``fp8`` (1 byte a value, from the cast's own FP8 tensor) plus
    the ``scales`` that recipe keeps: one float32 per tensor (tensorwise), per row (rowwise),
    one E8M0 byte per block of 32 (mxfp8)."""
    out = {"values": 0, "bf16": 0, "fp8": 0, "scales": 0}
    for module in model.modules():
        if not isinstance(module, Fp8Linear):
            continue
        w = module.weight.detach()
        out["values"] += w.numel()
        out["bf16"] += w.numel() * torch.tensor([], dtype=torch.bfloat16).element_size()
        out["fp8"] += w.numel() * torch.tensor([], dtype=torch.float8_e4m3fn).element_size()
        if recipe == "tensorwise":
            out["scales"] += 4
        elif recipe == "rowwise":
            out["scales"] += rowwise_scale(w, "e4m3").numel() * 4
        else:
            out["scales"] += -(-w.shape[-1] // 32) * w.shape[0]   # one byte per block of 32
    return out


def scaled_log2(t: torch.Tensor, operand: str) -> tuple[torch.Tensor, int]:
    """``log2 |t · scale|`` of the nonzero values of ``t`` under its tensorwise scale, and the
    count of zeros left out: where each value lands against the format's range."""
    dtype = OPERANDS[operand.split(".")[-1]]
    scaled = t.float() * tensorwise_scale(t, dtype)
    nonzero = scaled[scaled != 0].abs()
    return torch.log2(nonzero), int((scaled == 0).sum())


def format_edges(dtype: str) -> dict[str, float]:
    """log2 of the format's largest normal and of half its smallest subnormal (below which a
    value rounds to 0)."""
    import math
    from ...precision.fp8_casts import fp8_format_facts
    facts = fp8_format_facts(dtype)
    return {"max": math.log2(fp8_max(dtype)),
            "flush": math.log2(facts["smallest_subnormal"]) - 1}
