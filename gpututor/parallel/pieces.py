"""Which pieces of the whole model a rank holds: a strategy's description of its checkpoint.

A checkpoint has one layout whatever the strategy: the one-process model's parameters under
their own names and full shapes, and the optimizer's state of each parameter shaped like it.
Each rank describes what it holds of every such tensor as *boxes*: a box is an n-d block of
the whole tensor (its offset in each dim and its sizes) and the view of the rank's own tensor
that holds exactly those values. ``torch.distributed.checkpoint`` writes every rank's boxes,
and, on load, reads into any other layout's boxes what overlaps them (DCP reshards by the
overlap of chunks), so any layout loads any other's checkpoint.

:class:`Piece` ties one tensor the optimizer updates to its boxes; the optimizer's state of
that tensor (same shape) has the same boxes. What each layout holds:

- a whole tensor (replicated strategies, pipeline stages, experts): one box, offsets 0;
- a DTensor (FSDP2, DTensor tensor parallel): its local shard's box, from its placements;
- a ZeRO flat shard, a range of one flat vector of several parameters: for each parameter it
  overlaps, the range inside it, which is at most three boxes in each dim it spans (a partial
  first row, whole rows, a partial last row: :func:`range_boxes`);
- a Megatron column or row slice: contiguous runs of rows or columns (:func:`run_boxes`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass
class Box:
    """Values ``offsets .. offsets + sizes`` of the whole tensor ``name`` (shape ``shape``);
    ``take(local)`` is the view of a rank's local tensor (the parameter, or its optimizer
    state) that holds them, shaped ``sizes``."""

    name: str
    shape: tuple
    offsets: tuple
    sizes: tuple
    take: Callable[[torch.Tensor], torch.Tensor] = field(repr=False)


@dataclass
class Piece:
    """One tensor the optimizer updates (``param``) and the boxes of the whole model it holds."""

    param: torch.Tensor
    boxes: list


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard (shares its storage), or ``t`` itself."""
    return t._local_tensor if hasattr(t, "_local_tensor") else t


def canonical(name: str, aliases: dict) -> str:
    """The one-process model's name of a parameter called ``name`` in a wrapped model: wrapper
    prefixes (DDP's ``module.``, torch.compile's ``_orig_mod.``) dropped, a tied weight's other
    name (the pipeline's own ``head.weight``) mapped to its first one."""
    parts = [p for p in name.split(".") if p not in ("module", "_orig_mod")]
    name = ".".join(parts)
    return aliases.get(name, name)


def whole_box(name: str, shape) -> Box:
    shape = tuple(shape)
    return Box(name, shape, (0,) * len(shape), shape, lambda t: t)


def dtensor_box(name: str, p, shift: tuple | None = None, shape: tuple | None = None) -> Box:
    """The box of DTensor ``p``'s local shard; ``shift`` and ``shape`` place it inside a bigger
    whole tensor (DTensor TP's q, k, v inside the fused ``qkv``)."""
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    sizes, offsets = compute_local_shape_and_global_offset(p.shape, p.device_mesh, p.placements)
    offsets = tuple(o + s for o, s in zip(offsets, shift or (0,) * len(offsets)))
    return Box(name, tuple(shape or p.shape), offsets, tuple(sizes), lambda t: t)


def flat_shard_pieces(shard: torch.Tensor, layout, names: list) -> Piece:
    """A ZeRO rank's slice ``shard`` of a unit's flat vector (``sharding.flat.FlatShard``
    ``layout``), whose parameters are called ``names``: for each parameter the slice overlaps,
    the boxes of the overlap (:func:`range_boxes`)."""
    boxes, offset = [], 0
    end = layout.start + layout.shard_numel
    for name, shape, n in zip(names, layout.shapes, layout.numels):
        lo, hi = max(offset, layout.start), min(offset + n, end)
        if lo < hi:
            boxes += range_boxes(name, tuple(shape), lo - offset, hi - offset, lo - layout.start)
        offset += n
    return Piece(shard, boxes)


def default_pieces(model: torch.nn.Module, aliases: dict) -> list[Piece]:
    """Every parameter of ``model`` under its one-process name: whole, or a DTensor's shard."""
    out = []
    for name, p in model.named_parameters():
        name = canonical(name, aliases)
        box = dtensor_box(name, p) if hasattr(p, "device_mesh") else whole_box(name, p.shape)
        out.append(Piece(p, [box]))
    return out


def range_boxes(name: str, shape: tuple, start: int, stop: int, base: int = 0) -> list[Box]:
    """The boxes of flat elements ``start:stop`` of a tensor of ``shape`` (row-major), whose
    local values are elements ``base + ...`` of a 1-d local tensor. A range inside a 2-d
    tensor is at most three boxes (a partial first row, whole rows, a partial last row); in
    n dims this recurses into the partial rows."""
    shape = tuple(shape)

    def boxes(lo: int, hi: int, dims: tuple, prefix: tuple, flat0: int) -> list:
        # elements lo:hi (flat, inside the sub-tensor of shape dims at index prefix)
        if lo >= hi:
            return []
        if len(dims) <= 1:
            return [(prefix + (lo,), (1,) * len(prefix) + (hi - lo,), flat0 + lo)]
        row = math.prod(dims[1:])
        first, last = lo // row, (hi - 1) // row
        if first == last:   # inside one row: go one dim down
            return boxes(lo - first * row, hi - first * row, dims[1:], prefix + (first,),
                         flat0 + first * row)
        out = []
        first_full = first + 1 if lo % row else first
        if lo % row:                                      # a partial first row
            out += boxes(lo - first * row, row, dims[1:], prefix + (first,), flat0 + first * row)
        last_full = hi // row                             # whole rows first_full:last_full
        if last_full > first_full:
            out.append((prefix + (first_full,) + (0,) * (len(dims) - 1),
                        (1,) * len(prefix) + (last_full - first_full,) + dims[1:],
                        flat0 + first_full * row))
        if hi % row:                                      # a partial last row
            out += boxes(0, hi - last_full * row, dims[1:], prefix + (last_full,),
                         flat0 + last_full * row)
        return out

    made = []
    for offsets, sizes, flat in boxes(start, stop, shape or (1,), (), 0):
        if not shape:
            offsets, sizes = (), ()
        lo, n = base + flat - start, math.prod(sizes)
        made.append(Box(name, shape, offsets, sizes,
                        lambda t, lo=lo, n=n, sizes=sizes: t[lo:lo + n].view(sizes)))
    return made


def run_boxes(name: str, shape: tuple, dim: int, owned) -> list[Box]:
    """Boxes of a local tensor that holds indices ``owned`` (ascending) of ``dim`` of the whole
    tensor, in that order: one box per contiguous run (Megatron's fused q, k, v: three)."""
    owned = [int(i) for i in owned]
    runs, start = [], 0
    for k in range(1, len(owned) + 1):
        if k == len(owned) or owned[k] != owned[k - 1] + 1:
            runs.append((start, owned[start], k - start))
            start = k
    out = []
    for local, first, n in runs:
        offsets = tuple(first if d == dim else 0 for d in range(len(shape)))
        sizes = tuple(n if d == dim else s for d, s in enumerate(shape))
        out.append(Box(name, tuple(shape), offsets, sizes,
                       lambda t, local=local, n=n: t.narrow(dim, local, n)))
    return out


def model_names(model: torch.nn.Module) -> tuple[dict, dict]:
    """``(aliases, shapes)`` of a one-process model: each other name of a tied parameter ->
    its first name, and each parameter's first name -> its shape."""
    first, aliases, shapes = {}, {}, {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first:
            aliases[name] = first[id(p)]
        else:
            first[id(p)] = name
            shapes[name] = tuple(p.shape)
    return aliases, shapes
