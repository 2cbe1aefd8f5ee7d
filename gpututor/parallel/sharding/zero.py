"""ZeRO from scratch: shard the optimizer state, then the gradients, then the parameters.

Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models" (SC'20). Data parallel keeps on each of N ranks a full copy of the *model states*:
parameters, gradients and optimizer state. ZeRO (Zero Redundancy Optimizer) keeps a single copy
in all, cut into N shards, one per rank. The paper's three stages, and our strategies:

    stage  paper      each rank keeps only its 1/N of           strategy
    1      P_os       optimizer state                            zero1
    2      P_os+g     optimizer state, gradients                 zero2
    3      P_os+g+p   optimizer state, gradients, parameters     zero3  (PyTorch: FSDP, fsdp.py)

The shard layout (:class:`FlatShard`): a *unit*'s parameters (one transformer block, or what
is left at the root) are laid end to end in one flat vector, padded to a multiple of N; rank r
owns the r-th of N equal slices. A reduce-scatter of the unit's flat gradient gives rank r the
average gradient of its slice; an all-gather puts all slices back together.

Communication per step, per rank, in units of Ψ (the parameter count; ring algorithms, the
paper's section 7): DDP all-reduces the gradients: 2Ψ. Stages 1 and 2 reduce-scatter the
gradients (Ψ) and all-gather the updated parameters (Ψ): 2Ψ, the same as DDP. Stage 3
all-gathers each unit's parameters before its forward (Ψ) and again before its backward (Ψ,
because forward freed them), and reduce-scatters its gradients (Ψ): 3Ψ, 1.5x DDP. The meter
counts each collective's data size and, in ``wire_bytes``, what the ring algorithm sends.

This is a teaching version: every collective is blocking (production code overlaps them with
compute), every unit's parameters must receive a gradient in every backward, and gradient
accumulation reduces every micro-batch in stage 2 and 3 (no ``no_sync``).
"""
from __future__ import annotations

import time
from collections import defaultdict
from functools import partial

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.func import functional_call

from ...measure.collectives import all_gather_into_tensor, reduce_scatter_tensor
from ...measure.timing import synchronize
from ..base import Strategy
from ..data_parallel.scratch import broadcast_parameters


# ---- the pieces every stage uses ---------------------------------------------------------------

def sharding_units(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The modules that get a shard unit of their own: the GPT's blocks (the root keeps the rest).

    Other models have no ``blocks``: the root unit then holds every parameter.
    """
    return [(f"blocks.{i}", block) for i, block in enumerate(getattr(model, "blocks", []))]


def unit_parameters(model: nn.Module) -> list[list[nn.Parameter]]:
    """Parameters grouped by unit: one list per block, then the root's remaining parameters."""
    groups = [list(block.parameters()) for _, block in sharding_units(model)]
    inside = {id(p) for group in groups for p in group}
    groups.append([p for p in model.parameters() if id(p) not in inside])  # tied weights once
    return [group for group in groups if group]


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


def all_gather(shard: torch.Tensor, meter, out: torch.Tensor | None = None) -> torch.Tensor:
    """Every rank's ``shard`` end to end, in rank order (blocking, timed, counted)."""
    world = dist.get_world_size()
    full = out if out is not None else shard.new_empty(shard.numel() * world)
    start = time.perf_counter()
    all_gather_into_tensor(full, shard)
    synchronize(shard.device)
    _count(meter, "all_gather", full, time.perf_counter() - start)
    return full


def reduce_scatter_mean(full: torch.Tensor, meter) -> torch.Tensor:
    """This rank's slice of the average of ``full`` over all ranks (blocking, timed, counted)."""
    world = dist.get_world_size()
    mine = full.new_empty(full.numel() // world)
    start = time.perf_counter()
    reduce_scatter_tensor(mine, full)    # sum over ranks, each rank receives its slice
    synchronize(full.device)
    _count(meter, "reduce_scatter", full, time.perf_counter() - start)
    return mine.div_(world)


def _count(meter, op: str, full: torch.Tensor, seconds: float) -> None:
    meter.add(full.numel() * full.element_size(), seconds, op=op)
    meter.exposed_s += seconds  # blocking: compute waits for every second of it


# ---- stage 1: optimizer state sharded ---------------------------------------------------------

class ZeRO1(nn.Module):
    """P_os: every rank keeps full parameters and gradients; the optimizer sees only its shard.

    The model's parameters become views of one flat vector per unit, and so do their
    gradients (a flat gradient buffer, as DDP's buckets). After backward each unit's gradient is
    reduce-scattered: this rank's slice of the buffer receives the average. The optimizer
    updates only this rank's slice of the parameters (``shards``, views: no copy), and an
    all-gather brings every rank's updated slice to all ranks.
    """

    def __init__(self, module: nn.Module, ctx):
        super().__init__()
        self.module, self.meter = module, ctx.comm
        self.units, self.flat_params = [], []
        self.shards = nn.ParameterList()  # this rank's slices: what the optimizer updates
        for params in unit_parameters(module):
            unit = FlatShard(params, ctx.rank, ctx.world_size)
            unit.params = params
            flat = unit.flatten([p.detach() for p in params])
            for p, view in zip(params, unit.unflatten(flat)):
                p.data = view                      # the model now reads the flat vector
            self.units.append(unit)
            self.flat_params.append(flat)
            self.shards.append(nn.Parameter(unit.my_slice(flat)))
        self.setup_gradients()

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def setup_gradients(self) -> None:
        """Full gradients in one flat buffer per unit; each ``p.grad`` is a view into it."""
        self.flat_grads = [torch.zeros_like(flat) for flat in self.flat_params]
        for i, (unit, flat_grad) in enumerate(zip(self.units, self.flat_grads)):
            # a buffer of this module: state kept between steps, as the memory probe sees it
            self.register_buffer(f"flat_grad{i}", flat_grad, persistent=False)
            for p, view in zip(unit.params, unit.unflatten(flat_grad)):
                p.grad = view

    def start_step(self) -> None:
        for flat_grad in self.flat_grads:
            flat_grad.zero_()

    def finish_gradients(self) -> None:
        """After backward: this rank's slice of each unit's gradient becomes the average."""
        for unit, flat_grad, shard in zip(self.units, self.flat_grads, self.shards):
            mine = unit.my_slice(flat_grad)
            mine.copy_(reduce_scatter_mean(flat_grad, self.meter))
            shard.grad = mine

    @torch.no_grad()
    def all_gather_parameters(self) -> None:
        """After the optimizer step: every rank receives every rank's updated slice."""
        for flat, shard in zip(self.flat_params, self.shards):
            all_gather(shard.detach().clone(), self.meter, out=flat)

    def shard_parameters(self) -> list[nn.Parameter]:
        return list(self.shards)


# ---- stage 2: gradients sharded too -----------------------------------------------------------

class ZeRO2(ZeRO1):
    """P_os+g: as stage 1, but no rank ever keeps the full gradient of the whole model.

    As soon as backward has produced every gradient of a unit, the unit's gradient is
    reduce-scattered and the full copy freed: only this rank's averaged slice is kept. Full
    gradients exist only for the units whose backward is still going on (blocks finish one after
    the other; the root, whose tied embedding is used first and last, finishes at the very end).
    """

    def setup_gradients(self) -> None:
        self.waiting = [len(unit.params) for unit in self.units]
        for i, unit in enumerate(self.units):
            for p in unit.params:
                p.register_post_accumulate_grad_hook(partial(self._gradient_ready, i))

    def _gradient_ready(self, i: int, _param) -> None:
        self.waiting[i] -= 1
        if self.waiting[i]:
            return
        unit, shard = self.units[i], self.shards[i]
        self.waiting[i] = len(unit.params)
        full = unit.flatten([p.grad for p in unit.params])
        for p in unit.params:
            p.grad = None                              # the full gradient is gone ...
        mine = reduce_scatter_mean(full, self.meter)   # ... only this rank's slice remains
        shard.grad = mine if shard.grad is None else shard.grad.add_(mine)  # accumulation

    def start_step(self) -> None:
        pass

    def finish_gradients(self) -> None:
        if any(w != len(u.params) for w, u in zip(self.waiting, self.units)):
            raise RuntimeError("zero2: a parameter received no gradient in backward; every "
                               "parameter must take part in the loss")


# ---- stage 3: parameters sharded too ----------------------------------------------------------

class GatherParameters(torch.autograd.Function):
    """ZeRO-3's operator: forward all-gathers a unit's shards, backward reduce-scatters the grad.

    forward:  shard (Ψ_unit/N)  --all-gather-->       full flat parameters (Ψ_unit)
    backward: full flat grad    --reduce-scatter-->   this rank's slice of the average gradient
    """

    @staticmethod
    def forward(ctx, shard: torch.Tensor, unit: "ShardedUnit") -> torch.Tensor:
        ctx.unit = unit
        return all_gather(shard.detach(), unit.meter)

    @staticmethod
    def backward(ctx, grad_full: torch.Tensor):
        unit = ctx.unit                     # the unit's backward is over: free its parameters
        if unit.full_for_backward is not None:
            unit.full_for_backward.untyped_storage().resize_(0)
            unit.full_for_backward = None
        return reduce_scatter_mean(grad_full.contiguous(), unit.meter), None


class _SavedParameter:
    """What autograd keeps instead of a view of a unit's gathered parameters: where it was."""

    def __init__(self, t: torch.Tensor):
        self.size, self.stride, self.offset = t.size(), t.stride(), t.storage_offset()


class ShardedUnit(nn.Module):
    """Holds only this rank's slice of a module's parameters; gathers the rest for each use.

    ``forward`` all-gathers the unit (:class:`GatherParameters`) and runs the module with the
    gathered parameters (``torch.func.functional_call``). Autograd would keep those parameters
    alive until backward, because operations save their weights; a saved-tensor hook stores
    *where* a weight was instead, so the full parameters are freed when forward returns and
    all-gathered again when backward first needs them.
    """

    def __init__(self, module: nn.Module, params: dict[str, nn.Parameter], ctx):
        super().__init__()
        self.module, self.meter, self.names = module, ctx.comm, list(params)
        self.layout = FlatShard(list(params.values()), ctx.rank, ctx.world_size)
        flat = self.layout.flatten([p.detach() for p in params.values()])
        self.shard = nn.Parameter(self.layout.my_slice(flat).clone())
        for p in params.values():
            p.data = p.data.new_empty(0)   # the module's own full copy is freed
        self.gathered = None               # the full parameters while forward runs
        self.full_for_backward = None      # ... and again while backward runs

    def forward(self, *args, **kwargs):
        self.gathered = GatherParameters.apply(self.shard, self)
        params = dict(zip(self.names, self.layout.unflatten(self.gathered)))
        try:
            with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
                return functional_call(self.module, params, args, kwargs)
        finally:
            # Free the gathered parameters now. Autograd kept only where they were; freeing the
            # storage itself (as FSDP does) does not wait for Python to drop the last reference.
            self.gathered.untyped_storage().resize_(0)
            self.gathered = None

    def _pack(self, t: torch.Tensor):
        full = self.gathered
        if full is not None and t.untyped_storage().data_ptr() == full.untyped_storage().data_ptr():
            return _SavedParameter(t)
        return t

    def _unpack(self, saved):
        if not isinstance(saved, _SavedParameter):
            return saved
        if self.full_for_backward is None:  # first use in backward: all-gather again
            self.full_for_backward = all_gather(self.shard.detach(), self.meter)
        return self.full_for_backward.as_strided(saved.size, saved.stride, saved.offset)

    @torch.no_grad()
    def gathered_parameters(self) -> list[torch.Tensor]:
        return [t.clone() for t in self.layout.unflatten(all_gather(self.shard, self.meter))]


class ZeRO3(nn.Module):
    """P_os+g+p: each block is a :class:`ShardedUnit`, and the root holds the rest in one more."""

    def __init__(self, module: nn.Module, ctx):
        super().__init__()
        names = defaultdict(list)  # id(parameter) -> all its names (a tied weight has two)
        for name, p in module.named_parameters(remove_duplicate=False):
            names[id(p)].append(name)
        self.units = []            # (unit, the original names of each of its parameters)
        for path, block in sharding_units(module):
            params = dict(block.named_parameters())
            unit = ShardedUnit(block, params, ctx)
            parent, _, child = path.rpartition(".")
            setattr(module.get_submodule(parent), child, unit)
            self.units.append((unit, [names[id(p)] for p in params.values()]))
        inner = {id(p) for unit, _ in self.units for p in unit.parameters()}
        rest = {n: p for n, p in module.named_parameters() if id(p) not in inner}
        self.root = ShardedUnit(module, rest, ctx)
        self.units.append((self.root, [names[id(p)] for p in rest.values()]))

    def forward(self, *args, **kwargs):
        return self.root(*args, **kwargs)

    def start_step(self) -> None:
        pass

    def finish_gradients(self) -> None:
        pass  # each unit's reduce-scatter already ran in backward (GatherParameters.backward)

    def shard_parameters(self) -> list[nn.Parameter]:
        return [unit.shard for unit, _ in self.units]

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """Every parameter under its original name(s): an all-gather per unit (all ranks call)."""
        state = {}
        for unit, names in self.units:
            for aliases, tensor in zip(names, unit.gathered_parameters()):
                state.update({name: tensor for name in aliases})
        return state


# ---- the strategies ---------------------------------------------------------------------------

class _ZeRO(Strategy):
    stage, wrapper = 0, None
    supports_checkpoint = False  # the optimizer state is sharded: no single-file checkpoint yet

    def validate(self, spec) -> None:
        super().validate(spec)
        if spec.activation_checkpointing and self.stage == 3:
            raise ValueError(f"activation_checkpointing=True is invalid with strategy="
                             f"{self.name!r}: allowed is False (use strategy='fsdp')")

    def wrap(self, model, ctx):
        broadcast_parameters(model)  # all ranks start equal (they do: same seed; this makes sure)
        return self.wrapper(model, ctx)

    def make_optimizer(self, model, spec):
        """The optimizer sees only this rank's shards: its state is 1/N of data parallel's."""
        return super().make_optimizer(nn.ParameterList(model.shard_parameters()), spec)

    def train_step(self, model, optimizer, micro_batches, ctx) -> float:
        model.start_step()
        loss = super().train_step(model, optimizer, micro_batches, ctx)
        if self.stage < 3:
            with ctx.phase("gather"):
                model.all_gather_parameters()
        return loss

    def sync_gradients(self, model, ctx) -> None:
        model.finish_gradients()

    def full_state_dict(self, model) -> dict:
        if self.stage < 3:  # parameters are whole on every rank after each step
            return {k: v.clone() for k, v in model.module.state_dict().items()}
        return model.full_state_dict()


class ZeROStage1(_ZeRO):
    name, stage, wrapper = "zero1", 1, ZeRO1
    description = "ZeRO-1 from scratch: optimizer state sharded, parameters all-gathered"


class ZeROStage2(_ZeRO):
    name, stage, wrapper = "zero2", 2, ZeRO2
    description = "ZeRO-2 from scratch: optimizer state and gradients sharded"


class ZeROStage3(_ZeRO):
    name, stage, wrapper = "zero3", 3, ZeRO3
    description = "ZeRO-3 from scratch: parameters sharded too, gathered block by block"
