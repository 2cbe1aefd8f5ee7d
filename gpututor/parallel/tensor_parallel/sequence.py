"""Sequence parallel from scratch, on top of Megatron's tensor parallel.

The method of Megatron-LM's sequence parallelism [ref: korthikanti2022-tp-sp].

Tensor parallel splits the big matrices, but the layer norms (and dropout) between them run on
the whole activation ``B x T x d`` on every rank of the group: the same numbers ``tp`` times.
Sequence parallel splits those regions along the *sequence*: rank r keeps tokens
``r·T/tp .. (r+1)·T/tp`` of the residual stream. Two operators replace tensor parallel's pair:

    g   forward: all-gather along the sequence    backward: reduce-scatter   (before a
                                                                              column-parallel)
    ḡ   forward: reduce-scatter along the sequence backward: all-gather     (after a
                                                                              row-parallel)

An all-reduce is a reduce-scatter followed by an all-gather, so the bytes sent stay the same;
what changes is that each rank keeps 1/tp of the layer norms' inputs for backward. Parameters
used inside the sequence-split regions (the layer norms, the row-parallel biases) now see only
this rank's tokens: their gradients are summed over the tensor-parallel group after backward
(:func:`sync_sequence_parallel_gradients`). The embeddings run on the whole sequence, then each
rank keeps its slice; the final norm's output is gathered again for the head and the loss.

``tp`` below is the layer's ``tp_communications.TensorParallelGroup``: it does the collectives.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ...checks import InvalidValue
from ...models import GPT, causal_attention


# ---- the operators -----------------------------------------------------------------------------

class ScatterToSequenceParallelRegion(torch.autograd.Function):
    """Keep this rank's slice of the sequence (every rank holds the whole input); backward:
    all-gather the slices' gradients."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, tp) -> torch.Tensor:
        ctx.tp = tp
        return x.chunk(tp.size, dim=1)[tp.rank].contiguous()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return ctx.tp.all_gather_sequence(grad), None


class GatherFromSequenceParallelRegion(torch.autograd.Function):
    """``g``: all-gather the sequence. Backward: reduce-scatter (the next layer is column
    parallel: each rank's gradient is a partial sum), or just this rank's slice when what
    follows is computed whole on every rank alike (the head and the loss)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, tp, reduce_grad: bool) -> torch.Tensor:
        ctx.tp, ctx.reduce_grad = tp, reduce_grad
        return tp.all_gather_sequence(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        if ctx.reduce_grad:
            return ctx.tp.reduce_scatter_sequence(grad), None, None
        return grad.chunk(ctx.tp.size, dim=1)[ctx.tp.rank].contiguous(), None, None


class ReduceScatterToSequenceParallelRegion(torch.autograd.Function):
    """``ḡ``: sum the row-parallel partial outputs and keep this rank's slice of the sequence;
    backward: all-gather the gradient."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, tp) -> torch.Tensor:
        ctx.tp = tp
        return tp.reduce_scatter_sequence(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return ctx.tp.all_gather_sequence(grad), None


def gather(x: torch.Tensor, tp, reduce_grad: bool = True) -> torch.Tensor:
    """``g``: the whole sequence from every rank's slice."""
    return GatherFromSequenceParallelRegion.apply(x, tp, reduce_grad)


def reduce_scatter(x: torch.Tensor, tp) -> torch.Tensor:
    """``ḡ``: the sum of the ranks' partial outputs, this rank's slice of the sequence."""
    return ReduceScatterToSequenceParallelRegion.apply(x, tp)


# ---- the tiny GPT with sequence-split norms ------------------------------------------------------

class SequenceParallelBlock(nn.Module):
    """A tensor-parallel block whose residual stream is split along the sequence. It holds the
    block's own modules (``ln1``, ``attn``, ``ln2``, ``mlp``: names unchanged) and only
    changes where the communication goes: ``g`` before each column-parallel layer, ``ḡ`` after
    each row-parallel one (their own ``f`` and ``g`` are skipped)."""

    def __init__(self, block: nn.Module, tp, first: bool):
        super().__init__()
        self.ln1, self.attn, self.ln2, self.mlp = block.ln1, block.attn, block.ln2, block.mlp
        self.tp, self.first = tp, first

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.first:   # the embeddings ran on the whole sequence: keep this rank's tokens
            x = ScatterToSequenceParallelRegion.apply(x, self.tp)
        attn, mlp = self.attn, self.mlp
        h = gather(self.ln1(x), self.tp)
        q, k, v = F.linear(h, attn.qkv.weight, attn.qkv.bias).chunk(3, dim=-1)
        y = F.linear(causal_attention(q, k, v, attn.head_dim, attn.mask), attn.proj.weight)
        x = x + reduce_scatter(y, self.tp) + attn.proj.bias
        h = F.gelu(F.linear(gather(self.ln2(x), self.tp), mlp.fc.weight, mlp.fc.bias))
        return x + reduce_scatter(F.linear(h, mlp.proj.weight), self.tp) + mlp.proj.bias


class GatheredLayerNorm(nn.LayerNorm):
    """The final norm on this rank's tokens, then the whole sequence gathered for the head."""

    def __init__(self, norm: nn.LayerNorm, tp):
        super().__init__(norm.normalized_shape, eps=norm.eps, device="meta")
        self.weight, self.bias, self.tp = norm.weight, norm.bias, tp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gather(super().forward(x), self.tp, reduce_grad=False)


def sequence_parallelize(model: nn.Module, tp) -> nn.Module:
    """Turn a tensor-parallel GPT (``megatron.parallelize`` done) sequence parallel, in place."""
    if not isinstance(model, GPT):
        raise InvalidValue("sequence_parallel", True, "the GPT", why="for this model")
    for i, block in enumerate(model.blocks):
        model.blocks[i] = SequenceParallelBlock(block, tp, first=i == 0)
    model.ln_f = GatheredLayerNorm(model.ln_f, tp)
    return model


def sequence_parallel_parameters(model: nn.Module) -> list[nn.Parameter]:
    """Parameters used on this rank's tokens only: the layer norms and the row-parallel biases."""
    params = []
    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            params += [module.weight, module.bias]
        if isinstance(module, SequenceParallelBlock):
            params += [module.attn.proj.bias, module.mlp.proj.bias]
    return [p for p in params if p is not None]


def sync_sequence_parallel_gradients(model: nn.Module, tp) -> None:
    """Sum, over the tensor-parallel group, the gradients each rank made from its tokens."""
    for p in sequence_parallel_parameters(model):
        if p.grad is not None:
            tp.all_reduce(p.grad)
