"""ZeRO stage 3 from scratch (the ZeRO paper's P_os+g+p): the parameters sharded too.
[ref: rajbhandari2020-stages]

Each transformer block (and the root, for the rest) becomes a :class:`ShardedUnit` that holds
only this rank's slice of its flat parameter vector (``flat.py``'s :class:`FlatShard`), and
all-gathers the rest just before each use (:class:`GatherParameters`): once for forward, once
more in backward, then reduce-scatters the gradient. The strategy ``zero3`` is in ``zero.py``;
PyTorch's version is FSDP2 (``fsdp.py``).

Frozen parameters (``requires_grad=False``) are in no unit: whole on every rank, never
gathered, sent or updated. A trainable parameter the loss does not use is named in an error
after backward (its zero gradient would otherwise be stepped on).
"""
from __future__ import annotations

from collections import defaultdict

import torch
import torch.nn as nn
from torch.func import functional_call

from ...models import init_kind, initial_value
from ..base import unused_error
from .flat import FlatShard, all_gather, reduce_scatter_mean, sharding_units


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

    def __init__(self, module: nn.Module, params: dict[str, nn.Parameter], ctx, whole=None):
        super().__init__()
        self.module, self.meter, self.names = module, ctx.comm, list(params)
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
            self.full_for_backward = all_gather(self.shard.detach(), self.meter)
        return self.full_for_backward.as_strided(saved.size, saved.stride, saved.offset)

    @torch.no_grad()
    def gathered_parameters(self) -> list[torch.Tensor]:
        return [t.clone() for t in self.layout.unflatten(all_gather(self.shard, self.meter))]


class ZeRO3(nn.Module):
    """P_os+g+p: each block is a :class:`ShardedUnit`, and the root holds the rest in one more.

    Given a model built on ``meta``, each unit makes only this rank's slice of its flat vector
    from the parameters' first values (``models.initial_value``): no rank holds it whole."""

    def __init__(self, module: nn.Module, ctx):
        super().__init__()
        names = defaultdict(list)  # id(parameter) -> all its names (a tied weight has two)
        for name, p in module.named_parameters(remove_duplicate=False):
            names[id(p)].append(name)
        on_meta = next(module.parameters()).is_meta
        # frozen parameters stay whole, outside every unit (the names of each, for the state)
        self.frozen = [(names[id(p)], p) for p in dict.fromkeys(module.parameters())
                       if not p.requires_grad]
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

        blocks = [(path, block) for path, block in sharding_units(module)
                  if any(p.requires_grad for p in block.parameters())]
        paths = [path for path, _ in blocks]
        self.units = []            # (unit, the original names of each of its parameters)
        for path, block in blocks:
            params = {n: p for n, p in block.named_parameters() if p.requires_grad}
            original = [names[id(p)] for p in params.values()]
            unit = ShardedUnit(block, params, ctx, whole(list(params.values())))
            parent, _, child = path.rpartition(".")
            setattr(module.get_submodule(parent), child, unit)
            self.units.append((unit, original))
        rest = {n: p for n, p in module.named_parameters() if p.numel() > 0 and p.requires_grad
                and not any(n.startswith(f"{path}.") for path in paths)}
        original = [names[id(p)] for p in rest.values()]
        self.root = ShardedUnit(module, rest, ctx, whole(list(rest.values())))
        self.units.append((self.root, original))
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

    def forward(self, *args, **kwargs):
        return self.root(*args, **kwargs)

    def start_step(self) -> None:
        for unit, _ in self.units:
            unit.seen = set()

    def finish_gradients(self) -> None:
        """Each unit's reduce-scatter already ran in backward (GatherParameters.backward);
        here only the check that every trainable parameter received a gradient."""
        unused = [aliases[0] for unit, original in self.units
                  for name, aliases in zip(unit.names, original) if name not in unit.seen]
        if unused:
            raise unused_error("zero3", unused)

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
