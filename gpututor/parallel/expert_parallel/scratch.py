"""Expert parallel from scratch: the experts split over the ranks, the batch too.

A MoE layer (``gpututor.moe``) has ``n_expert`` expert MLPs, and each token uses only
``top_k`` of them. Expert parallel (GShard, Lepikhin et al. 2021 [ref: lepikhin2021-alltoall];
Switch, Fedus et al. 2021 [ref: fedus2021-expert-parallel]) gives each of the ``n`` ranks
``n_expert / n`` experts and its own slice of the global batch, as data parallel does; tokens
travel to the ranks of their experts and back (``all_to_all.py``: dispatch, experts, combine).
With ``n_expert=4`` on 2 ranks:

    rank 0: experts 0, 1   rows 0 .. B/2-1 of the batch
    rank 1: experts 2, 3   rows B/2 .. B-1

What each parameter's gradient needs, so that a step equals one process on the global batch
(whose loss is the mean of the ranks' losses, each rank's the mean over its tokens):

- everything but the experts (embeddings, attention, norms, routers) is replicated: each rank
  has the gradient of its own loss, so average them over the ranks (one all-reduce), as data
  parallel does;
- an expert's gradient already holds every rank's tokens that used it: the all-to-all's
  backward brought their gradients to its rank and they were summed there. It is the sum of the
  ranks' losses' gradients, so divide it by ``n``.

Capacity and the balancing loss are counted over the global batch in its token order
(``ExpertExchange.token_counts``), so which tokens are dropped, and the loss, are one process's.

``ddp+ep`` puts expert-parallel groups side by side (``RunSpec.mesh = {"dp": 2, "ep": 2}``):
the ranks of a ``dp`` group hold the same experts; DDP averages every gradient over ``dp``,
then expert parallel averages over ``ep`` as above. Every rank still trains on its own slice of
the batch, and capacity still spans the whole run, so this equals one process too.

There is no expert-parallel API in core PyTorch; libraries build it from the same
``all_to_all_single`` (torchtitan's MoE, Megatron-Core's token dispatcher, DeepSpeed-MoE).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ...checks import InvalidValue
from ...measure.timing import CollectiveTimer
from ...moe import moe_layers
from ..base import Strategy
from ..composed import Composed, _unwrap
from ..data_parallel.ddp import DataParallelDDP
from ..exchange import all_gather_tensors
from ..mesh import DimGroup, degree_field, degree_of, dim_group
from ..meta import materialize
from .all_to_all import ExpertExchange


def check_expert_parallel(spec, strategy: str) -> None:
    """Raise ``ValueError`` unless ``spec`` is a MoE whose experts split over the ep ranks."""
    if spec.model != "moe":
        raise InvalidValue("model", spec.model, "'moe' (a model with experts to split over the "
                           "ranks)", f"for strategy={strategy!r}")
    n_expert = spec.model_config.n_expert
    ep, _ = degree_of(spec, "ep")
    if n_expert % ep:
        raise InvalidValue(degree_field(spec, "ep"), ep,
                           [d for d in range(1, n_expert + 1) if n_expert % d == 0],
                           f"for strategy={strategy!r} with model_size="
                           f"{spec.resolved_model_size!r}: its {n_expert} experts (n_expert) "
                           "must split evenly over the ep ranks")
    if spec.grad_accum != 1:
        raise InvalidValue("grad_accum", spec.grad_accum, "1 (capacity and the balancing loss "
                           "are counted per micro-batch; the ranks' micro-batches are not one "
                           "process's)", f"for strategy={strategy!r}")


def keep_local_experts(model: torch.nn.Module, ctx) -> DimGroup:
    """Drop the experts other ep ranks own (on ``meta``: they were never made) and give every
    MoE layer an :class:`ExpertExchange`. Returns this rank's ep group."""
    ep = dim_group(ctx, "ep")
    ctx.expert_timer = CollectiveTimer(ctx.comm, ctx.device)
    for layer in moe_layers(model):
        exchange = ExpertExchange(ep, ctx.rank, ctx.world_size, layer.n_expert, ctx.expert_timer)
        mine = range(exchange.first, exchange.first + exchange.local)
        for e in range(layer.n_expert):
            if e not in mine:
                del layer.experts[str(e)]
        layer.exchange = exchange
    return ep


def average_gradients(model: torch.nn.Module, ep: DimGroup, timer: CollectiveTimer) -> None:
    """Replicated parameters: all-reduce over ``ep`` (one flat buffer) and divide by its size.
    Experts' parameters: divide by its size (their gradient is already the sum over ranks)."""
    experts = {id(p) for layer in moe_layers(model) for p in layer.experts.parameters()}
    replicated = [p for p in model.parameters() if id(p) not in experts and p.grad is not None]
    if ep.size > 1 and replicated:
        flat = torch.cat([p.grad.reshape(-1) for p in replicated])
        timer.run("all_reduce", flat.nbytes,
                  lambda: dist.all_reduce(flat, group=ep.group), group_size=ep.size)
        offset = 0
        for p in replicated:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p.grad) / ep.size)
            offset += p.numel()
    for p in model.parameters():
        if id(p) in experts and p.grad is not None:
            p.grad /= ep.size


def gather_experts(model: torch.nn.Module) -> dict:
    """The whole model's state dict: every rank's experts gathered within its ep group
    (collective: every rank calls it)."""
    state = {k: v.detach() for k, v in model.state_dict().items()}
    layers = moe_layers(model)
    if not layers:
        return state
    ep = layers[0].exchange.ep
    mine = {k: v for k, v in state.items() if ".experts." in k}
    parts = all_gather_tensors(mine, group=ep.group)   # tensors, not pickles (exchange.py)
    return {**state, **{k: v for part in parts for k, v in part.items()}}


class ExpertParallel(Strategy):
    name = "ep"
    dim = "ep"
    needs_model = "moe"
    description = "from scratch: experts split over ranks, tokens sent to them by all-to-all"
    builds_on_meta = True        # each rank makes only its own experts (parallel/meta.py)

    def validate(self, spec) -> None:
        super().validate(spec)
        check_expert_parallel(spec, self.name)

    def data_parallel_size(self, spec) -> int:
        return spec.world_size   # every rank trains on its own slice of the batch

    def data_parallel_rank(self, rank: int, spec) -> int:
        return rank              # in rank order: the run's token order is rank order

    def wrap(self, model, ctx):
        keep_local_experts(model, ctx)
        return model

    def sync_gradients(self, model, ctx) -> None:
        average_gradients(_unwrap(model), dim_group(ctx, "ep"), ctx.expert_timer)

    def train_step(self, model, optimizer, micro_batches, ctx) -> float:
        loss = super().train_step(model, optimizer, micro_batches, ctx)
        ctx.expert_timer.flush()   # CUDA: read the timing events (a no-op on CPU)
        return loss

    def full_state_dict(self, model) -> dict:
        return gather_experts(_unwrap(model))


class DataExpertParallel(Composed):
    """``ddp+ep``: DDP over ``dp`` (ranks with the same experts) x expert parallel over ``ep``."""

    needs_model = "moe"

    def __init__(self):
        super().__init__(DataParallelDDP(), ExpertParallel(), description=(
            "DDP over dp x expert parallel (from scratch, all-to-all) over ep"))

    def data_parallel_size(self, spec) -> int:
        return spec.world_size   # dp and ep ranks alike: each its own slice of the batch

    def data_parallel_rank(self, rank: int, spec) -> int:
        return rank

    def wrap(self, model, ctx):
        keep_local_experts(model, ctx)
        model = materialize(model, ctx.device, ctx.spec.seed)   # DDP needs real tensors
        return self.data_part.wrap(model, ctx)

    def sync_gradients(self, model, ctx) -> None:
        self.data_part.sync_gradients(model, ctx)   # DDP averaged over dp during backward
        self.part["ep"].sync_gradients(model, ctx)

    def train_step(self, model, optimizer, micro_batches, ctx) -> float:
        loss = super().train_step(model, optimizer, micro_batches, ctx)
        ctx.expert_timer.flush()
        return loss

    def full_state_dict(self, model) -> dict:
        return gather_experts(_unwrap(model))
