"""Context parallel: split every sequence over the ranks of the ``cp`` dim.

Every rank of a cp group trains on the same sequences (its data-parallel slice of the batch,
whole) and keeps only its share of their positions (``split.py``: zig-zag by default). Everything
in a transformer but attention works token by token (embeddings, layer norms, MLPs, the head,
the loss), so each rank runs those on its own T/n tokens and never needs the others'. Attention
is the one place where tokens meet: it runs as ring attention over the cp group
(``ring_attention.py``). Two small changes to the GPT make that so (parameter names unchanged):

- the position embedding gives this rank's *global* positions: the model asks for positions
  ``0..T/n-1`` of its local tokens, :class:`GlobalPositionEmbedding` maps them to where those
  tokens sit in the whole sequence;
- every attention becomes :class:`RingSelfAttention`: the same ``qkv`` and ``proj``, with ring
  attention between them.

The loss: each rank's is the mean cross-entropy over its T/n tokens. Every rank holds equally
many tokens, so the mean of those means is the one-process loss over the whole sequence (the
run's summary averages the ranks' losses), and the mean of their gradients is its gradient:
the parameters are replicated, and :meth:`ContextParallel.sync_gradients` averages their
gradients over the cp group with one all-reduce (a rank's gradient also holds what the other
ranks' queries sent back through the ring's ``dk``/``dv``). Communication per step: the ring's
key/value blocks (2·(n-1) shifts per attention: forward and backward), their gradients
(n shifts per attention), and that one all-reduce, all metered.

torch's own ``torch.distributed.tensor.experimental.context_parallel`` (which patches SDPA with
a DTensor ring over a ``DeviceMesh``) does not run on CPU in torch 2.13: its ring handlers cover
SDPA's CUDA kernels only (flash, efficient, cuDNN); on CPU SDPA calls
``aten._scaled_dot_product_flash_attention_for_cpu``, which has no sharding strategy
(``NotImplementedError``). A test checks that it still fails, so we notice when it runs.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from ... import checks
from ...checks import InvalidValue
from ...measure.timing import CollectiveTimer
from ...models import GPT, CausalSelfAttention
from ..base import Strategy
from ..composed import Composed
from ..mesh import degree_of, dim_group
from .cp_communications import Ring
from .ring_attention import ring_attention
from .split import SPLITS, check_split, split_positions


@dataclass
class ContextParallelGroup:
    """The ranks that share each sequence: the ring they talk over and how the sequence is split."""

    ring: Ring
    split: str = "zigzag"
    timer: CollectiveTimer | None = None   # meters the gradients' all-reduce

    def __post_init__(self):
        self._positions = {}

    def positions(self, local_len: int, device) -> torch.Tensor:
        """``n × local_len``: the global positions every rank of the ring holds."""
        key = (local_len, str(device))
        if key not in self._positions:
            n = self.ring.size
            self._positions[key] = split_positions(local_len * n, n, self.split).to(device)
        return self._positions[key]

    def keep_local(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's tokens of ``x`` (``B × T × ...``), in increasing position."""
        n = self.ring.size
        mine = split_positions(x.shape[1], n, self.split)[self.ring.rank].to(x.device)
        return x.index_select(1, mine)


class GlobalPositionEmbedding(nn.Module):
    """The GPT's position table, looked up at this rank's global positions."""

    def __init__(self, dense: nn.Embedding, cp: ContextParallelGroup):
        super().__init__()
        self.weight, self.cp = dense.weight, cp

    def forward(self, local: torch.Tensor) -> torch.Tensor:
        mine = self.cp.positions(local.shape[0], local.device)[self.cp.ring.rank]
        return F.embedding(mine[local], self.weight)


class RingSelfAttention(nn.Module):
    """The GPT's causal self-attention, with ring attention over the cp group in the middle."""

    def __init__(self, dense: CausalSelfAttention, cp: ContextParallelGroup):
        super().__init__()
        self.n_head, self.qkv, self.proj, self.cp = dense.n_head, dense.qkv, dense.proj, cp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, -1).transpose(1, 2)
                   for t in self.qkv(x).split(C, dim=2))
        y = ring_attention(q, k, v, self.cp.positions(T, x.device), self.cp.ring)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


def context_parallelize(model: GPT, cp: ContextParallelGroup) -> GPT:
    """Make ``model`` (in place) run on this rank's tokens, with ring attention between them."""
    model.cp = cp
    model.pos_emb = GlobalPositionEmbedding(model.pos_emb, cp)
    for block in model.blocks:
        block.attn = RingSelfAttention(block.attn, cp)
    return model


def average_gradients(model: nn.Module, cp: ContextParallelGroup) -> None:
    """Average every gradient over the cp group: one flat all-reduce (metered when ``cp.timer``)."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if cp.ring.size == 1 or not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    collective = lambda: dist.all_reduce(flat, group=cp.ring.group)
    if cp.timer is None:
        collective()
    else:
        cp.timer.run("all_reduce", flat.nbytes, collective,
                     group_size=cp.ring.size)
    flat /= cp.ring.size
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


class ContextParallel(Strategy):
    name = "cp"
    dim = "cp"
    description = "from scratch: the sequence split over ranks, ring attention between them"
    options = {"cp_split": checks.one_of(SPLITS)}
    allowed = {"cp_split": " or ".join(map(repr, SPLITS))}

    def validate(self, spec) -> None:
        super().validate(spec)
        n, named = degree_of(spec, "cp")
        split = spec.option("cp_split", "zigzag")
        if spec.model != "gpt":
            raise InvalidValue("model", spec.model, "'gpt' (cp replaces its attention and "
                               "position embedding)", f"for strategy={self.name!r}")
        if spec.attention != "naive":
            raise InvalidValue("attention", spec.attention, "'naive'",
                               f"for strategy={self.name!r}: ring attention replaces the model's "
                               "attention")
        try:
            check_split(spec.seq_len, n, split)
        except ValueError:
            pieces = 2 * n if split == "zigzag" else n
            raise InvalidValue("seq_len", spec.seq_len, f"a multiple of {pieces} (the sequence "
                               f"is cut into {'2 x cp' if split == 'zigzag' else 'cp'} equal "
                               "chunks)",
                               f"for strategy={self.name!r} with {named} and cp_split={split!r}"
                               ) from None

    # every cp rank sees its data-parallel slice of the batch whole: the ranks split the
    # sequence, not the batch (Strategy.data_parallel_size reads the grid's dp degree: 1 here)

    def wrap(self, model, ctx):
        cp = dim_group(ctx, "cp")
        ring = Ring(cp.rank, cp.size, cp.group, meter=ctx.comm, device=ctx.device)
        group = ContextParallelGroup(ring, ctx.spec.option("cp_split", "zigzag"),
                                     timer=CollectiveTimer(ctx.comm, ctx.device))
        return context_parallelize(model, group)

    def sync_gradients(self, model, ctx) -> None:
        inner = getattr(model, "module", model)
        average_gradients(inner, inner.cp)

    def keep_local(self, model, micro_batches: list) -> list:
        """This rank's tokens of every micro-batch's inputs and targets."""
        cp = getattr(model, "module", model).cp
        return [(cp.keep_local(x), cp.keep_local(y)) for x, y in micro_batches]

    def train_step(self, model, optimizer, micro_batches, ctx) -> float:
        """One step on this rank's positions of every sequence; returns their mean loss."""
        loss = super().train_step(model, optimizer, self.keep_local(model, micro_batches), ctx)
        self.flush(model)
        return loss

    def flush(self, model) -> None:
        """At the end of a step, CUDA: read the transfers' device marks (a no-op on CPU)."""
        cp = getattr(model, "module", model).cp
        cp.ring.flush()
        cp.timer.flush()


class ContextParallelLayout(Composed):
    """A data-parallel part (outermost) around context parallel: ``ddp+cp``.

    With ``mesh = {"dp": 2, "cp": 2}`` ranks 0 and 1 share the sequences of the first half of
    the batch (each keeping half of every sequence), ranks 2 and 3 those of the second half.
    The data-parallel part averages gradients over dp, then the cp part averages over cp."""

    def wrap(self, model, ctx):
        return self.data_part.wrap(self.part["cp"].wrap(model, ctx), ctx)

    def sync_gradients(self, model, ctx) -> None:
        self.data_part.sync_gradients(model, ctx)
        self.part["cp"].sync_gradients(model, ctx)

    def train_step(self, model, optimizer, micro_batches, ctx) -> float:
        cp = self.part["cp"]
        loss = super().train_step(model, optimizer, cp.keep_local(model, micro_batches), ctx)
        cp.flush(model)
        return loss
