"""ZeRO from scratch: shard the optimizer state, then the gradients, then the parameters.

Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models" (SC'20) [ref: rajbhandari2020-stages]. Data parallel keeps on each of N ranks a full copy of the *model states*:
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

Communication per step, per rank, in units of Ψ (the parameter count), counted as the paper
counts it [ref: rajbhandari2020-volume]: what each rank sends with the ring algorithms, before
their (N-1)/N factor. DDP all-reduces the gradients: 2Ψ (a reduce-scatter and an all-gather). Stages 1 and 2 reduce-scatter the
gradients (Ψ) and all-gather the updated parameters (Ψ): 2Ψ, the same as DDP. Stage 3
all-gathers each unit's parameters before its forward (Ψ) and again before its backward (Ψ,
because forward freed them), and reduce-scatters its gradients (Ψ): 3Ψ, 1.5x DDP. The meter
counts each collective's data size and, in ``wire_bytes``, what the ring algorithm sends.

This is a teaching version: every collective is blocking (production code overlaps them with
compute), every trainable parameter must receive a gradient in every backward (a clear error
names the ones that did not), and gradient accumulation reduces every micro-batch in stage 2 and
3 (no ``no_sync``). Frozen parameters (``requires_grad=False``) are in no shard: whole on every
rank, never sent, never updated.
"""
from __future__ import annotations

from functools import partial

import torch
import torch.nn as nn

from ...checks import InvalidValue
from ...config import RUN_PRECISIONS
from ..base import MemoryLayout, Strategy, parameter_names, unused_error
from ..data_parallel.buckets import broadcast_parameters
from ..pieces import canonical, flat_shard_pieces
from .flat import FlatShard, all_gather, padded_unit_bytes, reduce_scatter_mean, unit_parameters
from .zero3 import ZeRO3, this_rank_context


# ---- stage 1: optimizer state sharded ---------------------------------------------------------

class ZeRO1(nn.Module):
    """P_os: every rank keeps full parameters and gradients; the optimizer sees only its shard.

    The model's parameters become views of one flat vector per unit, and so do their
    gradients (a flat gradient buffer, as DDP's buckets). After backward each unit's gradient is
    reduce-scattered: this rank's slice of the buffer receives the average. The optimizer
    updates only this rank's slice of the parameters (``shards``, views: no copy), and an
    all-gather brings every rank's updated slice to all ranks.
    """

    stage = "zero1"

    def __init__(self, module: nn.Module, ctx):
        super().__init__()
        self.module, self.meter = module, ctx.comm
        self.names = parameter_names(module)
        self.seen: set[int] = set()   # parameters that received a gradient this step
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
                p.register_post_accumulate_grad_hook(lambda p: self.seen.add(id(p)))

    def start_step(self) -> None:
        self.seen.clear()
        for flat_grad in self.flat_grads:
            flat_grad.zero_()

    def check_all_used(self) -> None:
        """Raise, naming them, if trainable parameters received no gradient this step: a zero
        in the flat buffer would be averaged and stepped on (weight decay, momentum) where one
        process skips a parameter without a gradient."""
        unused = [self.names[id(p)] for unit in self.units for p in unit.params
                  if id(p) not in self.seen]
        if unused:
            raise unused_error(self.stage, unused)

    def finish_gradients(self) -> None:
        """After backward: this rank's slice of each unit's gradient becomes the average."""
        self.check_all_used()
        for unit, flat_grad in zip(self.units, self.flat_grads):
            for p, view in zip(unit.params, unit.unflatten(flat_grad)):
                if p.grad is not view:   # set to None (model.zero_grad()) and made anew
                    view.copy_(p.grad)
                    p.grad = view
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

    stage = "zero2"

    def setup_gradients(self) -> None:
        self.waiting = [len(unit.params) for unit in self.units]
        for i, unit in enumerate(self.units):
            for p in unit.params:
                p.register_post_accumulate_grad_hook(partial(self._gradient_ready, i))

    def _gradient_ready(self, i: int, param) -> None:
        self.seen.add(id(param))
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
        self.seen.clear()
        self.waiting = [len(unit.params) for unit in self.units]

    def finish_gradients(self) -> None:
        self.check_all_used()   # (a unit with one unused parameter was never reduce-scattered)


# ---- any module, any optimizer ---------------------------------------------------------------

class ShardedOptimizer:
    """ZeRO-1 or ZeRO-2 from scratch around any ``torch.optim.Optimizer`` class, used as torch's
    ``ZeroRedundancyOptimizer`` is [ref: pytorch-zero-redundancy-optimizer-wraps]::

        opt = ShardedOptimizer(model, torch.optim.AdamW, stage=2, lr=1e-3, weight_decay=0.1)
        loss_fn(model(x), y).backward()
        opt.step()        # reduce-scatter (stage 1), step this rank's shard, all-gather
        opt.zero_grad()

    The model's trainable parameters become views of one flat vector per unit (the GPT's
    blocks, else one for the whole model); every rank starts from rank 0's weights. The inner
    optimizer gets only this rank's slices, with the same arguments for all of them (one param
    group), so it must update element by element, as SGD, Adam(W), RMSprop, Adagrad do; one
    that looks at a whole tensor (LAMB's trust ratio, Adafactor's factored moments, Muon's
    orthogonalisation, gradient-norm clipping) would see slices and differ from one process.
    Frozen parameters are in no shard and never change; an unused one is named in an error.
    (torch's packs whole parameters onto ranks; this one cuts each unit's flat vector into equal
    slices, as the ZeRO paper does.)
    """

    def __init__(self, module: nn.Module, optimizer_class, stage: int = 1, *, meter=None,
                 **defaults):
        if stage not in (1, 2):
            raise InvalidValue("stage", stage, (1, 2), "(stage 3 shards the parameters: ZeRO3)")
        if not (isinstance(optimizer_class, type)
                and issubclass(optimizer_class, torch.optim.Optimizer)):
            given = optimizer_class if isinstance(optimizer_class, type) \
                else f"a {type(optimizer_class).__name__} object"   # (not its long repr)
            raise InvalidValue("optimizer_class", given, "a torch.optim.Optimizer subclass, e.g. "
                               "torch.optim.AdamW (the class: ShardedOptimizer makes it)")
        ctx = this_rank_context(module, meter)
        broadcast_parameters(module)
        self.sharded = (ZeRO1 if stage == 1 else ZeRO2)(module, ctx)
        self.meter = ctx.comm
        self.optimizer = optimizer_class(self.sharded.shard_parameters(), **defaults)
        self.sharded.start_step()

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def step(self) -> None:
        self.sharded.finish_gradients()
        self.optimizer.step()
        self.sharded.all_gather_parameters()

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)
        self.sharded.start_step()

    def state_dict(self) -> dict:
        """This rank's shard of the optimizer state (each rank holds 1/N of it)."""
        return self.optimizer.state_dict()


# ---- the strategies ---------------------------------------------------------------------------

class _ZeRO(Strategy):
    zero_stage, wrapper = 0, None
    precisions = RUN_PRECISIONS   # fp8: torchao's Float8 Linears; the gathers stay float32

    def step_collectives(self, spec, model):
        """Stages 1 and 2: each unit's gradients reduce-scattered, its parameters all-gathered
        after the step. Stage 3: each block gathered for forward and again for backward and
        its gradients reduce-scattered; the root gathered twice too: 3Ψ against data parallel's
        2Ψ, 1.5x [ref: rajbhandari2020-volume]."""
        if spec.world_size == 1:
            return []
        units = padded_unit_bytes(model, self.data_parallel_size(spec))
        if self.zero_stage < 3:
            return [op for u in units for op in (("reduce_scatter", u), ("all_gather", u))]
        return [op for u in units for op in
                (("all_gather", u), ("all_gather", u), ("reduce_scatter", u))]

    def validate(self, spec) -> None:
        super().validate(spec)
        if spec.activation_checkpointing and self.zero_stage == 3:
            raise InvalidValue("activation_checkpointing", spec.activation_checkpointing,
                               "False (use strategy='fsdp')", f"with strategy={self.name!r}")

    def wrap(self, model, ctx):
        if self.zero_stage < 3:   # (zero3 gets the model on meta: nothing to broadcast yet)
            broadcast_parameters(model)  # all ranks start equal (same seed; this makes sure)
        return self.wrapper(model, ctx)

    def make_optimizer(self, model, spec):
        """The optimizer sees only this rank's shards: its state is 1/N of data parallel's."""
        return super().make_optimizer(nn.ParameterList(model.shard_parameters()), spec)

    def train_step(self, model, optimizer, micro_batches, ctx) -> float:
        model.start_step()
        loss = super().train_step(model, optimizer, micro_batches, ctx)
        if self.zero_stage < 3:
            with ctx.phase("gather"):
                model.all_gather_parameters()
        return loss

    def sync_gradients(self, model, ctx) -> None:
        model.finish_gradients()

    def checkpoint_pieces(self, model, aliases):
        """Each unit's slice of its flat vector: the boxes of the parameters it overlaps."""
        if self.zero_stage < 3:
            names = {id(p): n for n, p in model.module.named_parameters()}
            units = [(unit, shard, [names[id(p)] for p in unit.params])
                     for unit, shard in zip(model.units, model.shards)]
        else:
            units = [(unit.layout, unit.shard, [aliases_[0] for aliases_ in original])
                     for unit, original in model.units]
        return [flat_shard_pieces(shard, layout, [canonical(n, aliases) for n in names])
                for layout, shard, names in units]

    def after_load(self, model) -> None:
        if self.zero_stage < 3:   # every rank's parameters whole again, from all shards
            model.all_gather_parameters()

    def full_state_dict(self, model) -> dict:
        if self.zero_stage < 3:  # parameters are whole on every rank after each step
            return {k: v.clone() for k, v in model.module.state_dict().items()}
        return model.full_state_dict()


class ZeROStage1(_ZeRO):
    name, zero_stage, wrapper = "zero1", 1, ZeRO1
    description = "ZeRO-1 from scratch: optimizer state sharded, parameters all-gathered"
    memory_layout = MemoryLayout(grad_buffers=True, per_tensor_state=False,
                                 note="full gradients in flat buffers; optimizer state 1/N")


class ZeROStage2(_ZeRO):
    name, zero_stage, wrapper = "zero2", 2, ZeRO2
    description = "ZeRO-2 from scratch: optimizer state and gradients sharded"
    memory_layout = MemoryLayout(per_tensor_state=False,
                                 note="a unit's full gradient lives until its reduce-scatter")


class ZeROStage3(_ZeRO):
    name, zero_stage, wrapper = "zero3", 3, ZeRO3
    builds_on_meta = True   # each rank makes only its slices
    description = "ZeRO-3 from scratch: parameters sharded too, gathered block by block"
    memory_layout = MemoryLayout(gathered_blocks=1, gathered_root=True, per_tensor_state=False,
                                 note="the top block and the root gathered at the backward peak")
