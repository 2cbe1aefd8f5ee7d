"""Models that never exist whole: build on ``meta``, cut or shard, then make only your part.

A strategy that keeps part of the model (a pipeline stage, a tensor-parallel slice, an FSDP
shard) gets the model built on PyTorch's ``meta`` device (``build_model(spec, meta=True)``:
shapes, no memory), cuts or shards it there, and then calls :func:`materialize`. Each
parameter is then allocated on the rank's device at the size this rank holds and filled with
its slice of :func:`gpututor.models.initial_value` (which depends only on the seed and the
parameter's name), so the result equals slicing the model a single process builds, and no rank
ever holds the whole model, during setup included. What a rank holds of a parameter:

- a plain tensor: all of it (its stage's blocks, the replicated embeddings and norms);
- a Megatron layer's weight (``ColumnParallelLinear``/``RowParallelLinear``): its rows or
  columns (``init_rows`` / ``init_cols``, kept by the layer);
- a DTensor (FSDP2's shards, DTensor tensor parallel): its local shard, cut by the DTensor's
  own placements (``distribute_tensor(..., src_data_rank=None)``: no communication).

Making one parameter's slice makes the whole parameter first, on CPU, for a moment: the setup
peak is this rank's part plus the largest single parameter, not the model.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..measure.memory import is_dtensor, local_tensor
from ..models import init_kind, initial_value


def is_meta(model: nn.Module) -> bool:
    """True while any parameter or buffer of ``model`` has no memory yet."""
    return any(local_tensor(t).is_meta for t in [*model.parameters(), *model.buffers()])


def materialize(model: nn.Module, device: torch.device, seed: int) -> nn.Module:
    """Allocate ``model``'s meta tensors on ``device`` and give them this rank's part of their
    first values; ``model`` itself (cut or sharded) is returned. Nothing to do if it is real."""
    if not is_meta(model):
        return model
    ties = _tied_names(model)
    model.to_empty(device=device)   # meta -> cpu makes new Parameters: ties come undone ...
    owners = dict(model.named_modules())
    for first, *others in ties:     # ... so tie them again (the GPT's head and embedding)
        for name in others:
            owner, _, pname = name.rpartition(".")
            setattr(owners[owner], pname, model.get_parameter(first))
    with torch.no_grad():
        for name, p in model.named_parameters():
            owner_name, _, pname = name.rpartition(".")
            local_tensor(p).copy_(_my_part(name, p, owners[owner_name], pname, seed).to(device))
        for module in model.modules():   # the causal masks: computed, not drawn
            mask = getattr(module, "mask", None)
            if isinstance(mask, torch.Tensor) and mask.dtype == torch.bool:
                mask.copy_(torch.tril(torch.ones(mask.shape, dtype=torch.bool)).to(device))
    return model


def _tied_names(model: nn.Module) -> list[list[str]]:
    """Groups of names that share one parameter (more than one name each)."""
    names = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    return [group for group in names.values() if len(group) > 1]


def _my_part(name: str, p: torch.Tensor, owner: nn.Module, pname: str, seed: int):
    """This rank's part of parameter ``name``'s first value (CPU)."""
    canonical, third = _canonical(name)
    shape = _global_shape(p, owner, pname, third)
    full = initial_value(canonical, shape, init_kind(owner, pname), seed)
    if third is not None:                     # q, k or v: a third of the fused qkv
        full = full.chunk(3, dim=0)[third]
    if is_dtensor(p):
        from torch.distributed.tensor import distribute_tensor   # already imported: p is one
        return distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None).to_local()
    rows, cols = getattr(owner, "init_rows", None), getattr(owner, "init_cols", None)
    if rows is not None:                      # ColumnParallelLinear: its rows (and bias rows)
        return full[rows]
    if cols is not None and pname == "weight":   # RowParallelLinear: its columns
        return full[:, cols]
    return full


def _canonical(name: str) -> tuple[str, int | None]:
    """The name a parameter has in the whole model (where :func:`initial_value` reads it), and
    which third of a fused ``qkv`` it is (DTensor's plan splits q, k, v into three layers)."""
    if name == "head.weight":                 # a pipeline's last stage keeps its own copy of
        return "tok_emb.weight", None         # the tied embedding
    for third, letter in enumerate("qkv"):
        marker = f".attn.{letter}."
        if marker in name:
            return name.replace(marker, ".attn.qkv."), third
    return name, None


def _global_shape(p: torch.Tensor, owner: nn.Module, pname: str, third: int | None) -> tuple:
    """The whole parameter's shape (for a split q, k or v: the fused qkv's)."""
    shape = list(p.shape)   # a DTensor's shape is already the whole parameter's
    rows, cols = getattr(owner, "init_rows", None), getattr(owner, "init_cols", None)
    if rows is not None:
        shape[0] = owner.full_out_features
    elif cols is not None and pname == "weight":
        shape[1] = owner.full_in_features
    if third is not None:
        shape[0] *= 3
    return tuple(shape)

