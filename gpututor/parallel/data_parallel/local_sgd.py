"""Fewer messages: ranks that train on their own for H steps, then meet (local SGD, DiLoCo).

Data parallel averages gradients after every backward: one all-reduce of the whole model per
step. The two methods here average once every ``sync_every`` (H) optimizer steps, so a step
sends 1/H of that on average; between meetings the ranks' weights drift apart.

- :class:`LocalSGD` [ref: stich2019-local-sgd]: each rank steps its own optimizer on its own
  data; every H steps the ranks replace their weights by the average of all ranks' weights.
- :class:`DiLoCo` [ref: douillard2023-diloco-algorithm]: each rank runs H steps of an *inner*
  optimizer (AdamW in the paper) starting from the shared weights θ; then the ranks average
  their *pseudo-gradient* Δ = θ − θ_rank (how far each moved, pointing back), and an *outer*
  optimizer (SGD with Nesterov momentum) steps θ with Δ as its gradient; every rank restarts from
  the new θ. The outer optimizer defaults to the values torchft's DiLoCo tests use
  [ref: torchft-local-sgd-test-diloco] (learning rate 0.7, momentum 0.9, Nesterov).

Both wrap any module and any inner optimizer, used as torchft's are: ``step()`` after
``backward()``, ``zero_grad()``. The strategies ``local-sgd`` and ``diloco`` run them in the
worker (option ``sync_every``; DiLoCo's ``outer_lr`` and ``outer_momentum``; an emulated link). Only trainable parameters are averaged (frozen ones never
change); buffers (a norm's running statistics) are left as each rank has them. Every meeting is
one all-reduce of every trainable parameter, flattened into one buffer, blocking, counted in
``meter`` like the other strategies' collectives.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist
import torch.nn as nn

from ... import checks
from ...checks import InvalidValue
from ...config import RUN_PRECISIONS
from ...measure.timing import CommMeter, synchronize
from ..base import Strategy
from ..link import LINK_ALLOWED, LINK_OPTIONS
from ..mesh import DimGroup, dim_group
from .buckets import broadcast_parameters


class LocalSGD:
    """Each rank steps on its own; every ``sync_every`` steps all ranks average their weights."""

    name = "local SGD"

    def __init__(self, module: nn.Module, optimizer: torch.optim.Optimizer, sync_every: int, *,
                 meter=None, dp: DimGroup | None = None, broadcast_from_first: bool = True,
                 link=None):
        checks.where("sync_every", sync_every, checks.int_in(1), "an integer >= 1")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise InvalidValue("optimizer", type(optimizer).__name__,
                               "a torch.optim.Optimizer over the module's parameters")
        if not dist.is_initialized():
            raise RuntimeError(f"{self.name}: no process group: call "
                               "torch.distributed.init_process_group first (or run in %%ranks)")
        self.module, self.optimizer, self.sync_every = module, optimizer, sync_every
        self.link = link   # an emulated interconnect (parallel/link.py), or None
        self.world = dp.size if dp is not None else dist.get_world_size()
        self.group = dp.group if dp is not None else None
        self.meter = meter if meter is not None else CommMeter(world_size=self.world)
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.local_step, self.meetings = 0, 0
        if broadcast_from_first:   # every rank starts from the same weights
            broadcast_parameters(module, dp)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self) -> bool:
        """One local step; a meeting after every ``sync_every``-th. True if the ranks met."""
        self.optimizer.step()
        return self.after_step()

    def after_step(self) -> bool:
        """Count a local step just taken; meet after every ``sync_every``-th."""
        self.local_step += 1
        if self.local_step % self.sync_every:
            return False
        self.meet()
        self.meetings += 1
        return True

    @torch.no_grad()
    def meet(self) -> None:
        averaged = self.average(torch.cat([p.detach().reshape(-1) for p in self.params]))
        _copy_into(self.params, averaged)

    def average(self, flat: torch.Tensor) -> torch.Tensor:
        """The mean of ``flat`` over the ranks: one blocking all-reduce, timed and counted."""
        synchronize(flat.device)
        start = time.perf_counter()
        dist.all_reduce(flat, group=self.group)
        if self.link is not None:
            self.link.delay_allreduce(flat.nbytes, self.world, self.meter, flat.device)
        flat /= self.world
        synchronize(flat.device)
        seconds = time.perf_counter() - start
        self.meter.add(flat.nbytes, seconds, group_size=self.world)
        self.meter.exposed_s += seconds
        return flat


class DiLoCo(LocalSGD):
    """Inner steps on each rank's own data; every ``sync_every`` steps an outer step on the
    shared weights with the ranks' average pseudo-gradient (see the module docstring)."""

    name = "DiLoCo"

    def __init__(self, module: nn.Module, inner_optimizer: torch.optim.Optimizer,
                 sync_every: int, *, outer_lr: float = 0.7, outer_momentum: float = 0.9,
                 nesterov: bool = True, meter=None, dp: DimGroup | None = None,
                 broadcast_from_first: bool = True, link=None):
        super().__init__(module, inner_optimizer, sync_every, meter=meter, dp=dp,
                         broadcast_from_first=broadcast_from_first, link=link)
        checks.where("outer_lr", outer_lr, checks.number_in(0, 100, low_open=True),
                     "a number in (0, 100]")
        checks.where("outer_momentum", outer_momentum, checks.number_in(0, 1),
                     "a number in [0, 1)")
        if outer_momentum >= 1:
            raise InvalidValue("outer_momentum", outer_momentum, "a number in [0, 1)")
        # θ: the weights every rank shares at a meeting (the paper's outer parameters)
        self.shared = [nn.Parameter(p.detach().clone()) for p in self.params]
        self.outer = torch.optim.SGD(self.shared, lr=outer_lr, momentum=outer_momentum,
                                     nesterov=nesterov and outer_momentum > 0)

    @torch.no_grad()
    def meet(self) -> None:
        """Δ = mean over ranks of (θ − θ_rank); θ ← outer step with Δ as its gradient;
        every rank's weights ← θ."""
        moved = torch.cat([(s - p.detach()).reshape(-1) for s, p in zip(self.shared,
                                                                        self.params)])
        delta = self.average(moved)
        _copy_into(self.shared, delta, grad=True)
        self.outer.step()
        for s, p in zip(self.shared, self.params):
            p.copy_(s)


def _copy_into(params: list, flat: torch.Tensor, grad: bool = False) -> None:
    """``flat``'s pieces into each parameter (or, with ``grad``, into its ``.grad``)."""
    for p, piece in zip(params, flat.split([p.numel() for p in params])):
        if grad:
            p.grad = piece.view_as(p).clone()
        else:
            p.copy_(piece.view_as(p))


# ---- the strategies: the worker's loop with a meeting every sync_every steps ------------------

SYNC_EVERY = {"sync_every": checks.int_in(1)}


class PeriodicAveraging(Strategy):
    """``local-sgd``: no gradient sync; after every ``sync_every``-th optimizer step the ranks
    average their weights (:class:`LocalSGD`)."""

    name = "local-sgd"
    precisions = RUN_PRECISIONS   # fp8: torchao's Float8 Linears (precision/fp8_training.py)
    description = "from scratch: each rank steps alone, weights averaged every sync_every steps"
    options = {**SYNC_EVERY, **LINK_OPTIONS}
    allowed = {"sync_every": "an integer >= 1", **LINK_ALLOWED}
    defaults = {"sync_every": 4}
    supports_checkpoint = False   # between meetings the ranks' weights differ
    trains_as_one_process = False  # the ranks drift apart between meetings
    memory_layout = None   # the planner does not price it (a step's collectives vary: see below)
    wrapper = LocalSGD

    def step_collectives(self, spec, model):
        return None   # one all-reduce of every weight every sync_every steps, not every step

    def wrap(self, model, ctx):
        broadcast_parameters(model, dim_group(ctx, "dp"))
        return model

    def extra_arguments(self, spec) -> dict:
        return {}

    def train_step(self, model, optimizer, micro_batches, ctx) -> float:
        meeting = getattr(optimizer, "gpututor_meeting", None)
        if meeting is None:   # made once, before the first step: DiLoCo's shared θ is the
            #                   weights every rank starts from (after wrap's broadcast)
            meeting = optimizer.gpututor_meeting = self.wrapper(
                model, optimizer, int(self.option(ctx.spec, "sync_every")), meter=ctx.comm,
                dp=dim_group(ctx, "dp"), broadcast_from_first=False, link=ctx.link,
                **self.extra_arguments(ctx.spec))
        loss = super().train_step(model, optimizer, micro_batches, ctx)
        with ctx.phase("sync"):
            ctx.extra["met"] = meeting.after_step()
        return loss


class DiLoCoStrategy(PeriodicAveraging):
    """``diloco``: the run's optimizer is the inner one; every ``sync_every`` steps the outer
    Nesterov step on the averaged pseudo-gradient (:class:`DiLoCo`)."""

    name = "diloco"
    description = ("from scratch: inner steps alone, every sync_every steps an outer Nesterov "
                   "step on the ranks' mean pseudo-gradient")
    options = {**SYNC_EVERY, "outer_lr": checks.number_in(0, 100, low_open=True),
               "outer_momentum": lambda v: checks.number_in(0, 1)(v) and v < 1, **LINK_OPTIONS}
    allowed = {"sync_every": "an integer >= 1", "outer_lr": "a number in (0, 100]",
               "outer_momentum": "a number in [0, 1)", **LINK_ALLOWED}
    defaults = {"sync_every": 4, "outer_lr": 0.7, "outer_momentum": 0.9}
    memory_layout = None   # the shared weights and the outer momentum: two more copies
    wrapper = DiLoCo

    def extra_arguments(self, spec) -> dict:
        return {"outer_lr": float(self.option(spec, "outer_lr")),
                "outer_momentum": float(self.option(spec, "outer_momentum"))}
