"""What each way of computing attention costs on this machine, against the sequence length.

For every length and way (``gpututor.attention.ATTENTION_KERNELS``): the time of one forward and backward
(the fastest of a few, interleaved), and, from the live-tensor probe, the bytes the forward left
alive for backward and the peak over the whole step (inputs not counted). Naive attention keeps
the ``T × T`` probabilities of every head, so its bytes grow with ``T²``; the tiled one keeps the
output and one number per row, so they grow with ``T``.
"""
from __future__ import annotations

import time

import torch

from .. import checks
from ..attention import ATTENTION_KERNELS
from .memory import LiveBytesProbe


def attention_costs(lengths, ways=("naive", "tiled", "sdpa"), batch: int = 1, heads: int = 4,
                    head_dim: int = 32, block: int = 64, repeats: int = 3) -> list[dict]:
    """One row per (length, way): ``seconds`` (forward + backward, fastest of ``repeats``),
    ``saved_bytes`` (what forward left for backward) and ``peak_bytes``."""
    for way in ways:
        checks.choice("way", way, ATTENTION_KERNELS)
    rows = []
    for T in lengths:
        gen = torch.Generator().manual_seed(T)
        q, k, v = (torch.randn(batch, heads, T, head_dim, generator=gen, requires_grad=True)
                   for _ in range(3))
        grad = torch.randn(batch, heads, T, head_dim, generator=gen)
        call = {w: (lambda w=w: ATTENTION_KERNELS[w](q, k, v, block=block) if w == "tiled"
                    else ATTENTION_KERNELS[w](q, k, v)) for w in ways}
        best = {w: float("inf") for w in ways}
        for _ in range(repeats):            # interleaved: drift on a shared machine hits all alike
            for w in ways:
                start = time.perf_counter()
                call[w]().backward(grad)
                best[w] = min(best[w], time.perf_counter() - start)
        for w in ways:
            with LiveBytesProbe([q, k, v, grad, q.grad, k.grad, v.grad]) as probe:
                out = call[w]()
                probe.set_phase("backward")
                out.backward(grad)
            rows.append({"seq_len": T, "way": w, "seconds": best[w],
                         "saved_bytes": probe.forward_end, "peak_bytes": probe.peak - probe.baseline})
    return rows
