"""Ring attention from scratch: causal attention over a sequence split among the ranks of a ring.

Ring attention [ref: liu2023-ring]. Each of n ranks holds the queries, keys and values of its share
of the sequence (``split.py``). Queries stay home; the key/value blocks travel around the ring: at
step s rank r holds the block of rank r-s, and while it computes on it, the block of rank r-s-1 is
already on its way (``cp_communications.Ring.shift``). After n steps every query has met every key,
and no rank holds more than two key/value blocks at a time: the ``T × T`` scores never exist
anywhere, and each rank's memory grows with T/n.

It is FlashAttention's algorithm (``gpututor/attention.py``) with the loop over key tiles
turned into a loop over ranks. Each visiting block gives a partial output ``o_i`` (softmax over
that block alone) and its rows' log-sum-exp ``lse_i``; the *online softmax* merges them:

    lse  = logaddexp(lse, lse_i)
    out  = out · exp(lse_old − lse) + o_i · exp(lse_i − lse)

Causality is decided by *global* positions: a key is visible to a query iff its position is
≤ the query's. Of each block only the queries that see some key and the keys some query sees
are computed (a block no query may see costs no compute, but still travels on: every rank
keeps the ring's sends in step).

Backward is FlashAttention-2's, ring-wise: forward saves only the output and the final lse;
each block's probabilities are recomputed as ``p = exp(s − lse)``, and with
``delta = rowsum(dO ∘ O)``:  ``dv = pᵀ dO``, ``dp = dO vᵀ``, ``ds = p ∘ (dp − delta)``,
``dq = ds k``, ``dk = dsᵀ q`` (each times the scale). ``dq`` stays home; ``dk`` and ``dv`` go
into a buffer that travels with its block, one hop behind it, picks up every rank's share and
arrives home after a full circle.
"""
from __future__ import annotations

import math

import torch

from .cp_communications import GRAD_TAG, KV_TAG, Ring


def _accumulate_dtype(t: torch.Tensor) -> torch.dtype:
    """fp32 for 16-bit inputs (as FlashAttention accumulates), the input's own dtype above."""
    return torch.promote_types(t.dtype, torch.float32)


def visible_tile(q_pos: torch.Tensor, k_pos: torch.Tensor) -> tuple | None:
    """The part of a (queries × keys) block that causal attention needs, by global positions:
    ``(rows, cols, mask)``: the queries that see some key, the keys some query sees, and which
    of those pairs are visible (None: all). None when no query sees any key."""
    visible = k_pos[None, :] <= q_pos[:, None]
    rows, cols = visible.any(dim=1).nonzero()[:, 0], visible.any(dim=0).nonzero()[:, 0]
    if rows.numel() == 0:
        return None
    sub = visible[rows][:, cols]
    return rows, cols, (None if bool(sub.all()) else sub)


def _scores(q, k, mask, scale):
    s = (q @ k.transpose(-2, -1)) * scale
    return s if mask is None else s.masked_fill(~mask, float("-inf"))


def block_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    mask: torch.Tensor | None, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(o_i, lse_i)``: attention of ``q`` over this one block of keys (every row sees one)."""
    s = _scores(q, k, mask, scale)
    lse = torch.logsumexp(s, dim=-1)
    return torch.exp(s - lse[..., None]) @ v, lse


def merge(out: torch.Tensor, lse: torch.Tensor, out_i: torch.Tensor,
          lse_i: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The online softmax: combine two partial attentions of the same queries over disjoint keys."""
    new = torch.logaddexp(lse, lse_i)
    return out * torch.exp(lse - new)[..., None] + out_i * torch.exp(lse_i - new)[..., None], new


def _rows(t: torch.Tensor, index: torch.Tensor, dim: int = -2) -> torch.Tensor:
    return t if index.numel() == t.shape[dim] else t.index_select(dim, index)


def ring_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tiles: list, ring: Ring,
                 scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Output and per-row log-sum-exp of this rank's queries over every rank's keys.

    ``tiles[s]``: :func:`visible_tile` of our queries against the block held at ring step s."""
    dt = _accumulate_dtype(q)
    out = torch.zeros(q.shape, dtype=dt, device=q.device)
    lse = torch.full(q.shape[:-1], float("-inf"), dtype=dt, device=q.device)
    kv = torch.stack((k, v))        # the block that travels: our keys and values first
    for step in range(ring.size):
        # start the next block's transfer before computing on this one: they overlap
        transfer = ring.shift(kv, KV_TAG) if step < ring.size - 1 else None
        if tiles[step] is not None:
            rows, cols, mask = tiles[step]
            o_i, lse_i = block_attention(_rows(q, rows).to(dt), _rows(kv[0], cols).to(dt),
                                         _rows(kv[1], cols).to(dt), mask, scale)
            o_new, lse_new = merge(_rows(out, rows), _rows(lse, rows, -1), o_i, lse_i)
            out.index_copy_(-2, rows, o_new)
            lse.index_copy_(-1, rows, lse_new)
        if transfer is not None:
            kv = transfer.wait()
    return out.to(q.dtype), lse


def ring_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                  lse: torch.Tensor, grad_out: torch.Tensor, tiles: list, ring: Ring,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of q, k, v: ``dq`` here, ``dk``/``dv`` collected around the ring."""
    dt = _accumulate_dtype(q)
    delta = (grad_out.to(dt) * out.to(dt)).sum(dim=-1)     # D = rowsum(dO ∘ O)
    dq = torch.zeros(q.shape, dtype=dt, device=q.device)
    kv = torch.stack((k, v))
    dkv = torch.zeros(kv.shape, dtype=dt, device=q.device)  # the gradient of the block we hold
    grads = None
    for step in range(ring.size):
        transfer = ring.shift(kv, KV_TAG) if step < ring.size - 1 else None
        if step > 0:   # the block's gradient so far, from the rank that held it last step
            dkv = grads.wait()
        if tiles[step] is not None:
            rows, cols, mask = tiles[step]
            qi, doi = _rows(q, rows).to(dt), _rows(grad_out, rows).to(dt)
            kj, vj = _rows(kv[0], cols).to(dt), _rows(kv[1], cols).to(dt)
            p = torch.exp(_scores(qi, kj, mask, scale) - _rows(lse, rows, -1)[..., None])
            dp = doi @ vj.transpose(-2, -1)
            ds = p * (dp - _rows(delta, rows, -1)[..., None])   # softmax's backward
            dq.index_add_(-2, rows, (ds @ kj) * scale)
            dkv[0].index_add_(-2, cols, (ds.transpose(-2, -1) @ qi) * scale)
            dkv[1].index_add_(-2, cols, p.transpose(-2, -1) @ doi)
        grads = ring.shift(dkv, GRAD_TAG)   # on with the block: the next rank holds it next
        if transfer is not None:
            kv = transfer.wait()
    dkv = grads.wait()   # home after a full circle: every rank's share of our k's and v's gradient
    return dq.to(q.dtype), dkv[0].to(k.dtype), dkv[1].to(v.dtype)


class RingAttention(torch.autograd.Function):
    """Ring attention as one autograd op: forward and backward both go around the ring."""

    @staticmethod
    def forward(ctx, q, k, v, positions, ring):
        me = positions[ring.rank]
        tiles = [visible_tile(me, positions[(ring.rank - s) % ring.size])
                 for s in range(ring.size)]
        scale = 1.0 / math.sqrt(q.shape[-1])
        with torch.autocast(q.device.type, enabled=False):   # accumulate as we say, not bf16
            out, lse = ring_forward(q, k, v, tiles, ring, scale)
        ctx.save_for_backward(q, k, v, out, lse)   # O(T/n) per row, never the scores
        ctx.tiles, ctx.ring, ctx.scale = tiles, ring, scale
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        with torch.autocast(q.device.type, enabled=False):
            grads = ring_backward(q, k, v, out, lse, grad_out, ctx.tiles, ctx.ring, ctx.scale)
        return (*grads, None, None)


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
                   ring: Ring) -> torch.Tensor:
    """Causal attention of this rank's ``q`` (``B × heads × T/n × head_dim``) over the keys and
    values of every rank of ``ring``. ``positions`` (``n × T/n``): row j holds the global
    positions of ring rank j's tokens (:func:`split.split_positions`)."""
    positions = positions.to(q.device)
    if positions.shape != (ring.size, q.shape[-2]):
        raise ValueError(f"positions of shape {tuple(positions.shape)} are invalid: allowed is "
                         f"(ring size, local tokens) = ({ring.size}, {q.shape[-2]})")
    return RingAttention.apply(q, k, v, positions, ring)
