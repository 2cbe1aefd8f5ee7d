"""The pieces every ZeRO stage uses: which modules become units, a unit's parameters as one
flat vector cut into N equal slices (:class:`FlatShard`), and the two blocking collectives on
it, timed and counted (:func:`all_gather`, :func:`reduce_scatter_mean`)."""
from __future__ import annotations

import time

import torch
import torch.distributed as dist
import torch.nn as nn

from ...checks import InvalidValue
from ...measure.collectives import all_gather_into_tensor, reduce_scatter_tensor
from ...measure.timing import synchronize


UNITS_ALLOWED = ("None (the model's .blocks), a module class or a tuple of them, or a function "
                 "(name, module) -> bool")


def sharding_units(model: nn.Module, units=None) -> list[tuple[str, nn.Module]]:
    """The modules that get a shard unit of their own (the root keeps the rest), outermost
    first found, never the root itself and never one inside another.

    ``units`` None: the GPT's ``blocks`` (a model without them has the root unit only); a module
    class or tuple of classes: every submodule of that class; a function ``(name, module) ->
    bool``: every submodule it says yes to (as FSDP2 is called on each module the caller
    chooses) [ref: pytorch-fsdp2-contract].
    """
    if units is None:
        return [(f"blocks.{i}", block) for i, block in enumerate(getattr(model, "blocks", []))]
    if isinstance(units, type) or (isinstance(units, tuple) and units
                                   and all(isinstance(u, type) for u in units)):
        classes = units
        chosen = lambda name, module: isinstance(module, classes)   # noqa: E731
    elif callable(units):
        chosen = units
    else:
        raise InvalidValue("units", units, UNITS_ALLOWED)
    found = []
    for name, module in model.named_modules():
        if name and not any(name.startswith(f"{outer}.") for outer, _ in found) \
                and chosen(name, module):
            found.append((name, module))
    return found


def unit_parameters(model: nn.Module, units=None, keep_whole=()) -> list[list[nn.Parameter]]:
    """The parameters the optimizer trains, grouped by unit (:func:`sharding_units`): one list
    per unit, then the root's remaining ones. A frozen parameter (``requires_grad=False``), or
    one in ``keep_whole``, is in no unit: it stays whole on every rank. Tied weights once."""
    whole = {id(p) for p in keep_whole}
    groups, inside = [], set(whole)
    for _, block in sharding_units(model, units):
        group = [p for p in dict.fromkeys(block.parameters())
                 if p.requires_grad and id(p) not in inside]
        inside.update(id(p) for p in group)
        groups.append(group)
    groups.append([p for p in model.parameters()
                   if p.requires_grad and id(p) not in inside])
    return [group for group in groups if group]


def padded_unit_bytes(model: nn.Module, world_size: int) -> list[int]:
    """Bytes of each unit's flat vector (blocks, then the root) padded to ``world_size`` equal
    slices: what one all-gather or reduce-scatter of that unit moves (its full buffer)."""
    return [-(-sum(p.numel() for p in group) // world_size) * world_size * group[0].element_size()
            for group in unit_parameters(model)]


class FlatShard:
    """A unit's parameters as one flat vector cut into N equal slices; this rank owns one."""

    def __init__(self, params: list[torch.Tensor], rank: int, world_size: int):
        self.shapes = [p.shape for p in params]
        self.numels = [p.numel() for p in params]
        self.used = sum(self.numels)
        self.shard_numel = -(-self.used // world_size)      # ceil: the padding goes at the end
        self.numel = self.shard_numel * world_size
        self.start = rank * self.shard_numel

    def flatten(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        """A new flat vector holding ``tensors`` end to end, zero-padded to N equal slices."""
        flat = tensors[0].new_zeros(self.numel)
        torch.cat([t.reshape(-1) for t in tensors], out=flat[:self.used])
        return flat

    def unflatten(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Views of ``flat`` shaped like the parameters (no copy; the padding is left out)."""
        return [piece.view(shape) for piece, shape in
                zip(flat[:self.used].split(self.numels), self.shapes)]

    def my_slice(self, flat: torch.Tensor) -> torch.Tensor:
        return flat[self.start:self.start + self.shard_numel]

    def my_slice_from(self, whole) -> torch.Tensor:
        """This rank's slice, made parameter by parameter: ``whole(i)`` is parameter i's value,
        asked only for the parameters that overlap the slice (a model built on meta)."""
        out, offset = torch.zeros(self.shard_numel), 0
        end = self.start + self.shard_numel
        for i, n in enumerate(self.numels):
            lo, hi = max(offset, self.start), min(offset + n, end)
            if lo < hi:
                out[lo - self.start:hi - self.start] = whole(i).reshape(-1)[lo - offset:hi - offset]
            offset += n
        return out


def all_gather(shard: torch.Tensor, meter, out: torch.Tensor | None = None) -> torch.Tensor:
    """Every rank's ``shard`` end to end, in rank order (blocking, timed, counted)."""
    world = dist.get_world_size()
    full = out if out is not None else shard.new_empty(shard.numel() * world)
    synchronize(shard.device)   # on a GPU: the compute queued before is not the collective's
    start = time.perf_counter()
    all_gather_into_tensor(full, shard)
    synchronize(shard.device)
    _count(meter, "all_gather", full, time.perf_counter() - start)
    return full


def reduce_scatter_mean(full: torch.Tensor, meter) -> torch.Tensor:
    """This rank's slice of the average of ``full`` over all ranks (blocking, timed, counted)."""
    world = dist.get_world_size()
    mine = full.new_empty(full.numel() // world)
    synchronize(full.device)    # the backward that made ``full`` finishes first, untimed
    start = time.perf_counter()
    reduce_scatter_tensor(mine, full)    # sum over ranks, each rank receives its slice
    synchronize(full.device)
    _count(meter, "reduce_scatter", full, time.perf_counter() - start)
    return mine.div_(world)


def _count(meter, op: str, full: torch.Tensor, seconds: float) -> None:
    meter.add(full.nbytes, seconds, op=op)
    meter.exposed_s += seconds  # blocking: compute waits for every second of it
