"""Tensor parallel with PyTorch's DTensor: a declarative plan on a ``DeviceMesh`` (production API).

``megatron.py`` writes Megatron's layers by hand. Here PyTorch does it from a *plan* that
names, for each Linear, how to split it (the transformer blocks' Linears of torchtitan's plan
for Llama, without its sequence-parallel layouts; the head and embedding, which torchtitan also
splits, stay whole here: lesson 04, section 2). PyTorch marks these APIs experimental and
subject to change [ref: pytorch-tp-experimental]:

    from scratch (megatron.py)               DTensor (torch.distributed.tensor.parallel)
    ColumnParallelLinear: rows of weight     ColwiseParallel(): weight and bias become DTensors
      owned by this rank, f in front           sharded on dim 0 (Shard(0)); the input is taken
                                               as Replicate, the output comes out Shard(-1)
    RowParallelLinear: columns of weight,    RowwiseParallel(): weight Shard(1), bias Replicate;
      g (all-reduce) behind                    the output is a Partial sum turned Replicate by
                                               an all-reduce
    f's all-reduce in backward               the input gradient comes out Partial and is
                                               all-reduced back to Replicate

``parallelize_module(block, mesh, plan)`` swaps each named Linear's parameters for DTensors and
installs hooks that convert inputs and outputs; with ``use_local_output=True`` (the default)
the code between layers keeps seeing plain tensors holding this rank's heads or hidden units.

The plan needs one change to the tiny GPT: its attention computes q, k and v with one fused
``qkv`` Linear, and ``ColwiseParallel`` cuts a weight into contiguous row blocks, which would
give rank 0 all of q and half of k. :class:`SplitQKVAttention` holds ``q``, ``k``, ``v`` as three
Linears (the fused weight's three row blocks: the same numbers), so each is split by heads. The
price, visible with ``torch.distributed.tensor.debug.CommDebugMode``: backward all-reduces the
input gradient of q, k and v separately (three all-reduces where Megatron's fused layer has
one). DTensor's collectives are not metered here: the communication fields are None (not measured).
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ...models import GPT, CausalSelfAttention, causal_attention
from ..base import MemoryLayout, Strategy
from ..mesh import device_mesh
from ..pieces import Box, Piece, default_pieces, dtensor_box
from .megatron import check_degree, tensor_parallel_collectives


class SplitQKVAttention(nn.Module):
    """The tiny GPT's attention with ``q``, ``k``, ``v`` as three Linears; the number of heads is
    read from the shapes, so the same code runs on all heads or on one rank's share of them."""

    def __init__(self, fused: CausalSelfAttention):
        super().__init__()
        d = fused.qkv.in_features
        self.head_dim = d // fused.n_head
        with torch.device(fused.qkv.weight.device):   # "meta" for a model that is not made yet
            self.q, self.k, self.v = (nn.Linear(d, d) for _ in range(3))
        with torch.no_grad():
            for i, linear in enumerate((self.q, self.k, self.v)):
                linear.weight.copy_(fused.qkv.weight[i * d:(i + 1) * d])
                linear.bias.copy_(fused.qkv.bias[i * d:(i + 1) * d])
        self.proj = fused.proj
        self.register_buffer("mask", fused.mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(causal_attention(self.q(x), self.k(x), self.v(x), self.head_dim, self.mask))


def tensor_parallel_plan(model: nn.Module) -> dict[str, dict]:
    """Module path -> plan for ``parallelize_module``: column then row in each attention and MLP.
    (torch.distributed.tensor is imported here, not by ``import gpututor``: 0.6 s.)"""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
    mlp = {"mlp.fc": ColwiseParallel(), "mlp.proj": RowwiseParallel()}
    if not isinstance(model, GPT):
        return {"": mlp}  # the char MLP model: only its MLP is split
    attention = {"attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(),
                 "attn.v": ColwiseParallel(), "attn.proj": RowwiseParallel()}
    return {f"blocks.{i}": {**attention, **mlp} for i in range(len(model.blocks))}


class TensorParallelDTensor(Strategy):
    name = "tp-dtensor"
    dim = "tp"
    builds_on_meta = True   # each rank makes only its shards (parallel/meta.py)
    description = "torch DTensor parallelize_module: ColwiseParallel/RowwiseParallel plan"
    meters_comm = False     # DTensor's collectives run inside torch, unmetered
    memory_layout = MemoryLayout(tensor_parallel=True, note="same split through DTensor")
    # fp16 would need GradScaler.unscale_ over a mix of DTensors (the split Linears) and plain
    # tensors (the rest), which it refuses ("mixed torch.Tensor and DTensor"): not offered
    precisions = ("fp32", "bf16")

    def step_collectives(self, spec, model):
        return tensor_parallel_collectives(self, spec, model)

    def validate(self, spec) -> None:
        super().validate(spec)
        check_degree(spec, self.name)

    def wrap(self, model, ctx):
        from torch.distributed.tensor.parallel import parallelize_module
        mesh = device_mesh(ctx, "tp")   # the grid's tp slice (all ranks in a one-dim run)
        for block in getattr(model, "blocks", []):
            block.attn = SplitQKVAttention(block.attn)
        for path, plan in tensor_parallel_plan(model).items():
            parallelize_module(model.get_submodule(path), mesh, plan)
        return model

    def checkpoint_pieces(self, model, aliases):
        """DTensor shards in place, except that q, k and v are the thirds of the fused
        ``qkv`` of the one-process model (rows k·d.. of its weight and bias)."""
        return dtensor_tp_pieces(model, aliases)

    def full_state_dict(self, model) -> dict:
        """The dense model's state dict: each DTensor's ``full_tensor()`` (an all-gather), and
        q, k, v put back together into the fused ``qkv``."""
        state = {name: t.full_tensor() if hasattr(t, "full_tensor") else t.detach()
                 for name, t in model.state_dict().items()}
        for name in [n for n in state if n.endswith(".attn.q.weight")]:
            prefix = name[:-len("q.weight")]
            for kind in ("weight", "bias"):
                state[f"{prefix}qkv.{kind}"] = torch.cat(
                    [state.pop(f"{prefix}{p}.{kind}") for p in "qkv"])
        return state


def dtensor_tp_pieces(model, aliases) -> list:
    """:meth:`TensorParallelDTensor.checkpoint_pieces` (also for ``fsdp+tp``)."""
    pieces = []
    for piece in default_pieces(model, aliases):
        box = piece.boxes[0]
        prefix, _, rest = box.name.rpartition(".attn.")
        part, _, kind = rest.partition(".")
        if prefix and part in ("q", "k", "v"):
            p = piece.param
            d = p.shape[0]
            name, whole = f"{prefix}.attn.qkv.{kind}", (3 * d,) + tuple(p.shape[1:])
            shift = ("qkv".index(part) * d,) + (0,) * (p.dim() - 1)
            if hasattr(p, "device_mesh"):
                box = dtensor_box(name, p, shift, whole)
            else:
                box = Box(name, whole, shift, tuple(p.shape), lambda t: t)
            piece = Piece(p, [box])
        pieces.append(piece)
    return pieces
