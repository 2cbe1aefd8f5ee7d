"""Measure compressed models side by side: bytes on disk, CPU inference latency, loss.

Every variant is measured in the same process, on the same inputs and thread count, with the
latency rounds interleaved (A B C A B C ...) so that anything else slowing the machine down hits
all variants alike. Latency is the fastest of all timed forward passes, as ``timeit`` reports:
other programs can only slow a pass down, so the fastest is the most repeatable estimate of what
the variant itself costs (the median is kept too). Bytes are what ``torch.save`` writes for the
model's ``state_dict``. The figures of these rows are in ``gpututor.lessons.compression.figures``.
"""
from __future__ import annotations

import io
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..data import batches


def serialized_bytes(model: nn.Module) -> int:
    """Bytes of ``torch.save(model.state_dict())``: what the model weighs on disk."""
    buffer = io.BytesIO()
    with torch.inference_mode(False):  # torchao's int8 tensors cannot be detached inside it
        torch.save(model.state_dict(), buffer)
    return buffer.tell()


def int8_size_bound(model: nn.Module) -> dict[str, float]:
    """What int8 weights can do to ``model``'s file: ``linear_share``, the share of its parameter
    bytes held by ``nn.Linear`` weights (a weight tied to an embedding counts as the
    embedding's: the lookup table stays float), and ``bound``, the file's size relative to now
    if those weights took 1 byte instead of 4 and everything else stayed (scales not counted)."""
    embeddings = {m.weight.data_ptr() for m in model.modules() if isinstance(m, nn.Embedding)}
    linear = {m.weight.data_ptr(): m.weight.nbytes
              for m in model.modules() if isinstance(m, nn.Linear)
              and m.weight.data_ptr() not in embeddings}
    total = sum(p.nbytes for p in model.parameters())   # tied ones once
    share = sum(linear.values()) / total
    return {"linear_share": share, "bound": 1 - share + share / 4}


def validation_batches(spec, n_batches: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``n_batches`` global batches of ``spec``'s shape from the held-out 10 % of the corpus."""
    return list(batches(spec.replace(steps=n_batches), split_name="val"))


@torch.inference_mode()
def eval_loss(model: nn.Module, data: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """Mean cross-entropy of ``model`` over ``data`` (e.g. :func:`validation_batches`)."""
    model.eval()
    losses = [F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten()).item()
              for x, y in data]
    return statistics.fmean(losses)


@torch.inference_mode()
def _forward_seconds(model: nn.Module, inputs: torch.Tensor, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model(inputs)
        times.append(time.perf_counter() - start)
    return times


def measure_variants(variants: dict[str, nn.Module], spec, rounds: int = 7,
                     repeats_per_round: int = 3, n_eval_batches: int = 4,
                     threads: int = 1) -> list[dict]:
    """For each named model: bytes, CPU latency of a forward pass on one batch, validation loss.

    Latency: ``rounds`` interleaved rounds of ``repeats_per_round`` timed forwards each, after
    one warm-up forward, on ``threads`` CPU threads; ``latency_s`` is the fastest of them and
    ``latency_median_s`` their median.
    """
    data = validation_batches(spec, n_eval_batches)
    inputs = data[0][0]
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for model in variants.values():
            _forward_seconds(model.eval(), inputs, 1)   # warm-up: kernel choice, allocation
        times = {name: [] for name in variants}
        for _ in range(rounds):
            for name, model in variants.items():
                times[name] += _forward_seconds(model, inputs, repeats_per_round)
        return [{"variant": name, "bytes": serialized_bytes(model),
                 "latency_s": min(times[name]),
                 "latency_median_s": statistics.median(times[name]),
                 "loss": eval_loss(model, data)} for name, model in variants.items()]
    finally:
        torch.set_num_threads(saved)
