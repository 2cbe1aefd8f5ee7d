"""Composed layouts: several strategies at once, each on its own dim of the rank grid.

A layout is named by its parts, outermost first: ``ddp+tp`` is data parallel (DDP over the
``dp`` groups) around Megatron tensor parallel (over the ``tp`` groups); ``ddp+pp`` is DDP around
a pipeline; ``ddp+tp+pp`` all three. With ``RunSpec.mesh = {"dp": 2, "tp": 2}`` on 4 ranks:

    rank grid dp=2 x tp=2:        rank 0 and 1 hold the two halves of every layer (a tp group)
    [[0, 1],                      and train on the first half of the batch; ranks 2 and 3 do
     [2, 3]]                      the same with the second half; 0 and 2 (and 1 and 3) are dp
                                  groups: they average the gradients of the same slices.

Each part only talks over its own dim's groups (:func:`gpututor.parallel.mesh.dim_group`), so
composing them is applying them in order: cut the model into pipeline stages, split each
stage's layers over ``tp``, then wrap the result for ``dp``. The data-parallel part decides
how gradients are averaged; the pipeline part, when there is one, runs the step.

``fsdp+tp`` is PyTorch's own 2-D layout: DTensor tensor parallel on ``mesh["tp"]``
(``parallelize_module``) and then FSDP2 on ``mesh["dp"]`` (``fully_shard``), one ``DeviceMesh``.
"""
from __future__ import annotations

from contextlib import nullcontext

from ..checks import InvalidValue
from .base import Strategy
from .meta import materialize
from .pipeline.stages import embedding_group, gather_stages
from .tensor_parallel.megatron import gather_full_state


class Composed(Strategy):
    """The strategies ``parts`` (outermost first, at most one per dim) on one rank grid."""


    def __init__(self, *parts: Strategy, name: str | None = None, description: str = "",
                 planned: bool = False):
        self.builds_on_meta = any(p.builds_on_meta for p in parts if p.dim != "dp")
        dims = [p.dim for p in parts]
        if len(set(dims)) != len(dims):
            raise InvalidValue("parts", [p.name for p in parts], "at most one strategy per dim "
                               "of the grid")
        self.parts = parts
        self.name = name or "+".join(p.name for p in parts)
        self.description = description
        self.part = {p.dim: p for p in parts}
        self.options = {k: v for p in parts for k, v in p.options.items()}
        self.allowed = {k: v for p in parts for k, v in p.allowed.items()}
        self.defaults = {k: v for p in parts for k, v in p.defaults.items()}
        self.planned = planned
        # what its data-parallel part shards (0 without one); precisions all parts train in
        self.zero_stage = self.part["dp"].zero_stage if "dp" in self.part else 0
        self.precisions = tuple(x for x in parts[0].precisions
                                if all(x in p.precisions for p in parts))

    @property
    def meters_comm(self) -> bool:   # read in a rank: fsdp's answer imports torch's FSDP
        return all(p.meters_comm for p in self.parts)   # one unmetered part: not measured

    def check_device(self, spec, device: str) -> None:
        for part in self.parts:
            part.check_device(spec, device)

    @property
    def data_part(self) -> Strategy | None:
        return self.part.get("dp")

    def validate(self, spec) -> None:
        if spec.mesh is None:
            raise InvalidValue("mesh", spec.mesh, f"a grid with the dims {', '.join(self.dims())}"
                               ", e.g. " + ", ".join(f"{d}=2" for d in self.dims()),
                               f"for strategy={self.name!r}")
        for part in self.parts:
            part.validate(spec)

    def wrap(self, model, ctx):
        if "pp" in self.part:       # 1. this rank's pipeline stage
            model = self.part["pp"].cut(model, ctx)
            ctx.embedding_group = embedding_group(ctx)
        if "tp" in self.part:       # 2. its layers split over the tp group
            model = self.part["tp"].wrap(model, ctx)
        dp = self.data_part
        if dp is not None and not dp.builds_on_meta:   # DDP & co. need real tensors: make
            model = materialize(model, ctx.device, ctx.spec.seed)   # this rank's part now
        if dp is not None:          # 3. wrapped for the dp group
            model = dp.wrap(model, ctx)
        return model   # (still on meta if FSDP2 sharded it: the worker makes it then)

    def make_optimizer(self, model, spec):
        return (self.data_part or super()).make_optimizer(model, spec)

    def no_sync(self, model):
        return self.data_part.no_sync(model) if self.data_part else nullcontext()

    def sync_gradients(self, model, ctx) -> None:
        if "tp" in self.part:   # (sequence parallel: gradients of the sequence-split regions)
            self.part["tp"].sync_gradients(model, ctx)
        if self.data_part is not None:
            self.data_part.sync_gradients(model, ctx)

    def train_step(self, model, optimizer, micro_batches, ctx) -> float:
        if "pp" in self.part:
            loss = self.part["pp"].train_step(
                model, optimizer, micro_batches, ctx,
                sync_data_parallel=lambda: self.sync_gradients(model, ctx))
        else:
            loss = super().train_step(model, optimizer, micro_batches, ctx)
        inner = _unwrap(model)
        for timer in (getattr(getattr(inner, "tp", None), "timer", None),
                      getattr(model, "comm_timer", None)):
            if timer is not None:
                timer.flush()   # CUDA: read the timing events (a no-op on CPU)
        return loss

    def checkpoint_pieces(self, model, aliases):
        """What the tensor-parallel part holds (Megatron slices, DTensor shards, also sharded
        again by FSDP2); else what the data-parallel part does; else whole parameters."""
        inner = self.part.get("tp") or self.data_part or super()
        return inner.checkpoint_pieces(model, aliases)

    def full_state_dict(self, model) -> dict:
        """The whole model's state dict: tensor-parallel slices gathered within each tp group,
        then stages merged within each pipeline (collectives: every rank calls this)."""
        tp = self.part.get("tp")
        if tp is not None and tp.name == "tp-dtensor":
            state = tp.full_state_dict(model)       # DTensors (also FSDP2's) gather themselves
        elif tp is not None:
            state = gather_full_state(_unwrap(model))
        else:
            state = {k: v.detach() for k, v in _unwrap(model).state_dict().items()}
        if "pp" in self.part:
            state = gather_stages(state, _unwrap(model).pp)
        return state


def _unwrap(model):
    """The module inside a data-parallel wrapper (DDP, DataParallel), or ``model`` itself."""
    return getattr(model, "module", model)
