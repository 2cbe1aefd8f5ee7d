"""ZeRO stage 3 from scratch (the ZeRO paper's P_os+g+p): the parameters sharded too.
[ref: rajbhandari2020-stages]

Each transformer block (and the root, for the rest) becomes a :class:`ShardedUnit` that holds
only this rank's slice of its flat parameter vector (``flat.py``'s :class:`FlatShard`), and
all-gathers the rest just before each use (:class:`GatherParameters`): once for forward, once
more in backward, then reduce-scatters the gradient. The strategy ``zero3`` is in ``zero.py``;
PyTorch's version is FSDP2 (``fsdp.py``).

Frozen parameters (``requires_grad=False``) are in no unit: whole on every rank, never
gathered, sent or updated. A trainable parameter the loss does not use is named in an error
when backward ends (its zero gradient would otherwise be stepped on).

Used on any module, as FSDP2 is [ref: pytorch-fsdp2-contract]::

    model = ZeRO3(module, units=nn.TransformerEncoderLayer)   # or a function (name, module)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    loss_fn(model(x), y).backward(); optimizer.step(); optimizer.zero_grad()

``units`` chooses which submodules get a unit of their own (the root keeps the rest);
``compute_dtype`` (e.g. ``torch.bfloat16``) casts each unit's shard before the all-gather, so
forward and backward compute in it while the optimizer updates fp32 shards (master weights), and
the floating-point inputs of the root's forward; gradients are cast back to fp32 before their
reduce-scatter (FSDP2's ``MixedPrecisionPolicy(param_dtype=..., reduce_dtype=torch.float32)``).
``keep_whole`` parameters are not sharded: whole on every rank, their gradients all-reduced (mean)
as data parallel does. Parameters outside the units (frozen, kept whole) and buffers keep their
own dtype. A weight tied across two units is refused: choose units that keep it in one (or leave
its modules to the root).
"""
from __future__ import annotations

from collections import defaultdict

import torch
import torch.nn as nn
from torch.func import functional_call

import time
from types import SimpleNamespace

import torch.distributed as dist

from ...checks import InvalidValue
from ...measure.timing import CommMeter, synchronize
from ...models import init_kind, initial_value
from ..base import unused_error
from ..data_parallel.buckets import broadcast_parameters
from .flat import FlatShard, all_gather, reduce_scatter_mean, sharding_units


class GatherParameters(torch.autograd.Function):
    """ZeRO-3's operator: forward all-gathers a unit's shards, backward reduce-scatters the grad.

    forward:  shard (Ψ_unit/N)  --all-gather-->       full flat parameters (Ψ_unit)
    backward: full flat grad    --reduce-scatter-->   this rank's slice of the average gradient
    """

    @staticmethod
    def forward(ctx, shard: torch.Tensor, unit: "ShardedUnit") -> torch.Tensor:
        ctx.unit = unit
        return unit.gather()

    @staticmethod
    def backward(ctx, grad_full: torch.Tensor):
        unit = ctx.unit                     # the unit's backward is over: free its parameters
        if unit.full_for_backward is not None:
            unit.full_for_backward.untyped_storage().resize_(0)
            unit.full_for_backward = None
        if unit.on_backward is not None:
            unit.on_backward()
        grad = grad_full.contiguous().to(unit.shard.dtype)   # reduced in the master dtype
        return reduce_scatter_mean(grad, unit.meter), None


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

    def __init__(self, module: nn.Module, params: dict[str, nn.Parameter], ctx, whole=None,
                 compute_dtype: torch.dtype | None = None):
        super().__init__()
        self.module, self.meter, self.names = module, ctx.comm, list(params)
        self.compute_dtype = compute_dtype
        self.on_backward = None            # called in each backward (ZeRO3's end-of-backward check)
        self.layout = FlatShard(list(params.values()), ctx.rank, ctx.world_size)
        if whole is not None:   # built on meta: make only this rank's slice
            self.shard = nn.Parameter(self.layout.my_slice_from(whole).to(ctx.device))
        else:
            flat = self.layout.flatten([p.detach() for p in params.values()])
            self.shard = nn.Parameter(self.layout.my_slice(flat).clone())
        if whole is None:
            for p in params.values():
                p.data = p.data.new_empty(0)   # the module's own full copy is freed
        self.gathered = None               # the full parameters while forward runs
        self.full_for_backward = None      # ... and again while backward runs
        self.seen: set[str] = set()        # parameters that received a gradient this step

    def forward(self, *args, **kwargs):
        self.gathered = GatherParameters.apply(self.shard, self)
        params = dict(zip(self.names, self.layout.unflatten(self.gathered)))
        for name, view in params.items():   # backward reaches a view only if the loss used it
            view.register_hook(lambda grad, name=name: self.seen.add(name))
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
            self.full_for_backward = self.gather()
        return self.full_for_backward.as_strided(saved.size, saved.stride, saved.offset)

    def gather(self) -> torch.Tensor:
        """Every rank's slice end to end, in the compute dtype (cast before it is sent)."""
        shard = self.shard.detach()
        if self.compute_dtype is not None:
            shard = shard.to(self.compute_dtype)
        return all_gather(shard, self.meter)

    @torch.no_grad()
    def gathered_parameters(self) -> list[torch.Tensor]:
        """The unit's parameters whole, in the master dtype (all ranks call it)."""
        return [t.clone() for t in self.layout.unflatten(all_gather(self.shard, self.meter))]


class ZeRO3(nn.Module):
    """P_os+g+p: each block is a :class:`ShardedUnit`, and the root holds the rest in one more.

    Given a model built on ``meta``, each unit makes only this rank's slice of its flat vector
    from the parameters' first values (``models.initial_value``): no rank holds it whole."""

    def __init__(self, module: nn.Module, ctx=None, *, units=None,
                 compute_dtype: torch.dtype | None = None, keep_whole=(), meter=None):
        super().__init__()
        ctx = ctx if ctx is not None else this_rank_context(module, meter)
        self.compute_dtype = _checked_dtype(compute_dtype)
        names = defaultdict(list)  # id(parameter) -> all its names (a tied weight has two)
        for name, p in module.named_parameters(remove_duplicate=False):
            names[id(p)].append(name)
        on_meta = next(module.parameters()).is_meta
        if not on_meta:   # every rank starts from rank 0's weights (a meta model is made so)
            broadcast_parameters(module)
        whole_ids = _kept_whole(module, keep_whole)
        # frozen and kept-whole parameters stay whole, outside every unit (with their names)
        self.frozen = [(names[id(p)], p) for p in dict.fromkeys(module.parameters())
                       if not p.requires_grad or id(p) in whole_ids]
        self.meter = ctx.comm
        for _, p in self.frozen:
            if p.requires_grad:   # kept whole: its gradient averaged as data parallel does
                p.register_post_accumulate_grad_hook(self._average_whole)
        if on_meta and self.frozen:
            raise ValueError(f"zero3: a model built on meta with frozen parameters "
                             f"({names[id(self.frozen[0][1])][0]}, ...) is not supported: "
                             f"build it on the device")

        def whole(params: list):
            """Built on meta: parameter i's first value, made when its unit asks for it."""
            if not on_meta:
                return None
            return lambda i: _first_value(module, names[id(params[i])][0], params[i],
                                          ctx.spec.seed)

        def trainable(named):
            return {n: p for n, p in named if p.requires_grad and id(p) not in whole_ids}

        blocks = [(path, block) for path, block in sharding_units(module, units)
                  if trainable(block.named_parameters())]
        paths = [path for path, _ in blocks]
        _refuse_ties_across_units(module, blocks, names)
        self.units = []            # (unit, the original names of each of its parameters)
        for path, block in blocks:
            params = trainable(block.named_parameters())
            original = [names[id(p)] for p in params.values()]
            unit = ShardedUnit(block, params, ctx, whole(list(params.values())),
                               self.compute_dtype)
            parent, _, child = path.rpartition(".")
            setattr(module.get_submodule(parent), child, unit)
            self.units.append((unit, original))
        rest = {n: p for n, p in trainable(module.named_parameters()).items() if p.numel() > 0
                and not any(n.startswith(f"{path}.") for path in paths)}
        original = [names[id(p)] for p in rest.values()]
        self.root = ShardedUnit(module, rest, ctx, whole(list(rest.values())), self.compute_dtype)
        self.units.append((self.root, original))
        for unit, _ in self.units:
            unit.on_backward = self._queue_check
        if on_meta:   # placeholders for the module's own (meta) parameters, ties kept; masks
            made = {}
            for m in module.modules():
                for pname, p in list(m._parameters.items()):
                    if p is not None and p.is_meta:
                        m._parameters[pname] = made.setdefault(
                            id(p), nn.Parameter(torch.empty(0, device=ctx.device)))
                if isinstance(getattr(m, "mask", None), torch.Tensor) and m.mask.is_meta:
                    m.mask = torch.tril(torch.ones(m.mask.shape, dtype=torch.bool,
                                                   device=ctx.device))

    @property
    def module(self) -> nn.Module:
        """The wrapped module (its blocks replaced by their units), as DDP's and FSDP's
        ``.module`` is."""
        return self.root.module

    def forward(self, *args, **kwargs):
        self.start_step()
        self.check_queued = False
        if self.compute_dtype is not None:   # floating inputs in the compute dtype (FSDP2's too)
            cast = lambda t: t.to(self.compute_dtype) if isinstance(t, torch.Tensor) \
                and t.is_floating_point() else t   # noqa: E731
            args, kwargs = [cast(a) for a in args], {k: cast(v) for k, v in kwargs.items()}
        return self.root(*args, **kwargs)

    def start_step(self) -> None:
        for unit, _ in self.units:
            unit.seen = set()

    def _queue_check(self) -> None:
        """In backward (the first unit's reduce-scatter): check the units when it has ended."""
        if not getattr(self, "check_queued", False):
            self.check_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self.finish_gradients)

    def finish_gradients(self) -> None:
        """Each unit's reduce-scatter already ran in backward (GatherParameters.backward);
        here only the check that every trainable parameter received a gradient (run when each
        backward ends, and again by the strategy)."""
        self.check_queued = False
        unused = [aliases[0] for unit, original in self.units
                  for name, aliases in zip(unit.names, original) if name not in unit.seen]
        if unused:
            raise unused_error("zero3", unused)

    def _average_whole(self, p: torch.Tensor) -> None:
        """A kept-whole parameter's gradient: the mean over the ranks (blocking, timed, counted)."""
        synchronize(p.grad.device)
        start = time.perf_counter()
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()
        synchronize(p.grad.device)
        seconds = time.perf_counter() - start
        self.meter.add(p.grad.nbytes, seconds)
        self.meter.exposed_s += seconds

    def shard_parameters(self) -> list[nn.Parameter]:
        return [unit.shard for unit, _ in self.units]

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """Every parameter under its original name(s): an all-gather per unit (all ranks call)."""
        state = {}
        for unit, names in self.units:
            for aliases, tensor in zip(names, unit.gathered_parameters()):
                state.update({name: tensor for name in aliases})
        for aliases, p in self.frozen:   # whole on every rank
            state.update({name: p.detach().clone() for name in aliases})
        return state


def _first_value(model: nn.Module, name: str, p: torch.Tensor, seed: int) -> torch.Tensor:
    """Parameter ``name``'s first value, whole (CPU), as one process would have made it."""
    owner, _, pname = name.rpartition(".")
    return initial_value(name, p.shape, init_kind(model.get_submodule(owner), pname), seed)


def this_rank_context(module: nn.Module, meter) -> SimpleNamespace:
    """What a unit needs of the rank when a from-scratch wrapper is used outside the worker."""
    if not dist.is_initialized():
        raise RuntimeError("no process group: call torch.distributed.init_process_group "
                           "first (or run in %%ranks)")
    world = dist.get_world_size()
    return SimpleNamespace(rank=dist.get_rank(), world_size=world, spec=None,
                           device=next(module.parameters()).device,
                           comm=meter if meter is not None else CommMeter(world_size=world))


def _checked_dtype(dtype):
    if dtype is None or (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        return dtype
    raise InvalidValue("compute_dtype", dtype, "None or a floating-point torch.dtype "
                       "(e.g. torch.bfloat16)")


def _kept_whole(module: nn.Module, keep_whole) -> set[int]:
    """The ids of ``keep_whole``'s parameters; each must be one of ``module``'s."""
    mine = {id(p) for p in module.parameters()}
    keep = list(keep_whole)
    for p in keep:
        if not isinstance(p, torch.Tensor) or id(p) not in mine:
            raise InvalidValue("keep_whole", type(p).__name__,
                               "parameters of the module being wrapped")
    return {id(p) for p in keep}


def _refuse_ties_across_units(module: nn.Module, blocks: list, names: dict) -> None:
    """A parameter shared by two units (or a unit and the root) would be sharded twice."""
    owner = {}
    for path, block in blocks:
        for p in block.parameters():
            if owner.setdefault(id(p), path) != path:
                raise InvalidValue("units", f"{owner[id(p)]} and {path}",
                                   "units that share no parameter",
                                   f"({' = '.join(names[id(p)])} is tied across them: leave "
                                   f"both modules to the root, or choose a unit holding both)")
    inside = {f"{path}." for path, _ in blocks}
    for name, p in module.named_parameters(remove_duplicate=False):
        if id(p) in owner and p.requires_grad and not any(name.startswith(i) for i in inside):
            raise InvalidValue("units", owner[id(p)], "units that share no parameter with "
                               "the root", f"({' = '.join(names[id(p)])} is also used outside "
                               f"it: leave that module to the root)")
