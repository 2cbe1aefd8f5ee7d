"""Attention three ways: the same numbers, three costs in time and memory.

- :func:`naive_attention`: the textbook ``softmax(Q·Kᵀ/√d + mask)·V``. It materialises the
  ``T × T`` scores of every head: memory grows with the square of the sequence.
- :func:`tiled_attention`: FlashAttention's algorithm [ref: dao2022-io], its forward arranged
  as FlashAttention-2's [ref: dao2023-loop-order] (query blocks outside), written in PyTorch; the
  backward keeps the same loop order (query blocks outside), not that paper's backward's. Queries
  and keys go in blocks; each query block keeps a running maximum ``m``, a running sum ``l`` of
  ``exp(s − m)`` and an unnormalised output, rescaled whenever a later key block raises the
  maximum (the *online softmax* [ref: milakov2018-online]). Only a ``block × block`` tile of
  scores exists at a time, and a tile the causal mask hides whole is never computed
  [ref: dao2023-causal]. Forward saves the output and each row's log-sum-exp ``L = m + log l``;
  backward recomputes each tile's probabilities from ``L`` instead of storing them (5 matmuls a
  tile against the naive backward's 4 [ref: dao2023-matmuls]): lesson 01b counts the FLOPs of
  both ways (``lessons.one_device.measures.attention_flops``).
- ``torch.nn.functional.scaled_dot_product_attention`` (``is_causal=True``): PyTorch's fused
  kernels (a FlashAttention or memory-efficient kernel where one applies).

All three take ``q, k, v`` of shape ``B × heads × T × head_dim``. Written for clarity, the tiled
version runs its tiles in Python: it shows where the memory goes, not how fast a fused kernel
is (that is SDPA's part).

:class:`TiledAttention` is also a FlashAttention-2 for any model (issue 43): causal or not, with
as many keys as the caller has (``k, v``: ``B × heads × S × head_dim``, S may differ from the
queries' T). With ``causal`` and S ≠ T the mask is aligned top-left, as
``scaled_dot_product_attention(is_causal=True)`` documents it (``torch.ones(T, S).tril()``: query
i sees keys 0..i) [ref: pytorch-sdpa-causal]; FlashAttention's own library aligns it bottom-right
since its release 2.1 [ref: flash-attn-readme-causal], so compare with the API you
  will replace it by.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .checks import InvalidValue


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention with the full ``T × T`` score matrix."""
    T = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    return F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """PyTorch's fused attention, causal."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _accumulate_dtype(t: torch.Tensor) -> torch.dtype:
    """fp32 for 16-bit inputs (as FlashAttention accumulates), the input's own dtype above."""
    return torch.promote_types(t.dtype, torch.float32)


def _tiles(T: int, block: int):
    return [(start, min(start + block, T)) for start in range(0, T, block)]


def _causal_tile_mask(q0: int, q1: int, k0: int, k1: int, device,
                      causal: bool = True) -> torch.Tensor | None:
    """Which entries of the (queries q0:q1) × (keys k0:k1) tile a query may see (None: all)."""
    if not causal or k1 - 1 <= q0:
        return None
    rows = torch.arange(q0, q1, device=device)[:, None]
    cols = torch.arange(k0, k1, device=device)[None, :]
    return cols <= rows


def tiled_forward(q, k, v, block: int, causal: bool = True):
    """Output and per-row log-sum-exp, one ``block × block`` tile of scores at a time."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    T, S, dt = q.shape[-2], k.shape[-2], _accumulate_dtype(q)
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:-1], dtype=dt, device=q.device)
    for q0, q1 in _tiles(T, block):
        qi = q[..., q0:q1, :].to(dt)
        m = torch.full(qi.shape[:-1], float("-inf"), dtype=dt, device=q.device)  # row maximum
        l = torch.zeros(qi.shape[:-1], dtype=dt, device=q.device)                # sum of exp
        acc = torch.zeros_like(qi)                                        # unnormalised output
        for k0, k1 in _tiles(S, block):
            if causal and k0 >= q1:   # keys after the block's last query are never seen
                break
            s = (qi @ k[..., k0:k1, :].to(dt).transpose(-2, -1)) * scale
            mask = _causal_tile_mask(q0, q1, k0, k1, q.device, causal)
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1))
            p = torch.exp(s - m_new[..., None])
            correction = torch.exp(m - m_new)      # rescale what earlier tiles summed
            l = l * correction + p.sum(dim=-1)
            acc = acc * correction[..., None] + p @ v[..., k0:k1, :].to(dt)
            m = m_new
        out[..., q0:q1, :] = (acc / l[..., None]).to(q.dtype)
        lse[..., q0:q1] = m + torch.log(l)
    return out, lse


def tiled_backward(q, k, v, out, lse, grad_out, block: int, causal: bool = True):
    """Gradients of q, k, v, recomputing each tile's probabilities from the saved log-sum-exp."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    T, S, dt = q.shape[-2], k.shape[-2], _accumulate_dtype(q)
    dq, dk, dv = (torch.zeros_like(t, dtype=dt) for t in (q, k, v))
    delta = (grad_out.to(dt) * out.to(dt)).sum(dim=-1)   # D_i = rowsum(dO ∘ O)
    for q0, q1 in _tiles(T, block):
        qi, doi = q[..., q0:q1, :].to(dt), grad_out[..., q0:q1, :].to(dt)
        for k0, k1 in _tiles(S, block):
            if causal and k0 >= q1:
                break
            kj, vj = k[..., k0:k1, :].to(dt), v[..., k0:k1, :].to(dt)
            s = (qi @ kj.transpose(-2, -1)) * scale
            mask = _causal_tile_mask(q0, q1, k0, k1, q.device, causal)
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            p = torch.exp(s - lse[..., q0:q1, None])             # the tile's probabilities
            dv[..., k0:k1, :] += p.transpose(-2, -1) @ doi
            dp = doi @ vj.transpose(-2, -1)
            ds = p * (dp - delta[..., q0:q1, None])              # softmax's backward
            dq[..., q0:q1, :] += (ds @ kj) * scale
            dk[..., k0:k1, :] += (ds.transpose(-2, -1) @ qi) * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


class TiledAttention(torch.autograd.Function):
    """FlashAttention-2 from scratch: ``TiledAttention.apply(q, k, v, block, causal)``. Saves
    the inputs, the output and one log-sum-exp per query row (never a T × S matrix)."""

    @staticmethod
    def forward(ctx, q, k, v, block, causal=True):
        out, lse = tiled_forward(q, k, v, block, causal)
        ctx.save_for_backward(q, k, v, out, lse)   # O(T) extra per row, never O(T²)
        ctx.block, ctx.causal = block, causal
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        grads = tiled_backward(q, k, v, out, lse, grad_out, ctx.block, ctx.causal)
        return (*grads, None, None)


def tiled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    block: int = 64, causal: bool = True) -> torch.Tensor:
    """Attention, FlashAttention's way: tiles of ``block`` queries × ``block`` keys. ``q``:
    B × heads × T × d; ``k``, ``v``: B × heads × S × d (any S); ``causal`` masks top-left,
    as ``F.scaled_dot_product_attention(..., is_causal=True)``."""
    if not isinstance(block, int) or isinstance(block, bool) or block < 1:
        raise InvalidValue("block", block, "a positive integer")
    if not isinstance(causal, bool):
        raise InvalidValue("causal", causal, "True or False")
    if q.dim() < 2 or k.shape != v.shape or k.shape[:-2] != q.shape[:-2] \
            or k.shape[-1] != q.shape[-1]:
        raise InvalidValue("q, k, v shapes", (tuple(q.shape), tuple(k.shape), tuple(v.shape)),
                           "q: (..., T, d); k and v equal, (..., S, d) with q's leading dims")
    return TiledAttention.apply(q, k, v, block, causal)


# every way of computing attention here; the GPT trains with those of config.ATTENTION
ATTENTION_KERNELS = {"naive": naive_attention, "tiled": tiled_attention, "sdpa": sdpa_attention}
