"""Data parallel from scratch: first naive, then bucketed and overlapped with backward.

Every rank holds the whole model and trains on its shard of the global batch. After backward,
each rank has the gradient of *its* shard; data parallel makes every rank hold the *average*
gradient, so all ranks take the same optimizer step and stay identical. That is the whole idea:

    for each parameter p:  all_reduce(p.grad);  p.grad /= world_size

``NaiveDataParallel`` does exactly that, after backward, one collective per parameter: simple,
correct, and slow (many small messages, and nothing else happens while they travel).

``BucketedDataParallel`` is what DDP does: gradients are grouped into buckets of about
``bucket_cap_mb``, in the order backward produces them (roughly last layer first). As soon as a
bucket's gradients are all ready, its all-reduce starts *asynchronously*, so communication of
late layers overlaps backward of early layers. At the end we only wait for what is still in flight.
The buckets are :class:`~.buckets.DataParallel`, which also wraps any module outside the worker.
"""
from __future__ import annotations

import math
import time

import torch.distributed as dist
import torch.nn as nn

from ... import checks
from ...config import RUN_PRECISIONS
from ..base import MemoryLayout, Strategy
from ..link import LINK_ALLOWED, LINK_OPTIONS
from ..mesh import DimGroup, dim_group
from ...measure.timing import synchronize
from .buckets import BUCKET_CAP_MB, BUCKET_CAP_MB_ALLOWED, DataParallel, broadcast_parameters


def allreduce_gradients(model: nn.Module, meter, link=None, dp: DimGroup | None = None) -> None:
    """The naive sync: one blocking all-reduce per gradient over the data-parallel group, then
    divide by its size. ``dp`` None: all ranks."""
    world, group = (dp.size, dp.group) if dp is not None else (dist.get_world_size(), None)
    for p in model.parameters():
        if p.grad is None:
            continue
        # on a GPU, NCCL returns once the all-reduce is queued: the clock starts after the
        # backward queued before it and stops when the all-reduce is done (blocking, as the
        # naive sync means to be); on CPU both synchronisations do nothing
        synchronize(p.grad.device)
        start = time.perf_counter()
        dist.all_reduce(p.grad, group=group)
        if link is not None:
            link.delay_allreduce(p.grad.nbytes, world, meter,
                                 p.grad.device)
        p.grad /= world
        synchronize(p.grad.device)
        seconds = time.perf_counter() - start
        meter.add(p.grad.nbytes, seconds, group_size=world)
        meter.exposed_s += seconds  # nothing overlaps: every second of it is waited for




def bucketed_all_reduces(model, bucket_cap_mb: float) -> list:
    """A step's all-reduces when the gradients go in buckets of at most ``bucket_cap_mb`` MiB:
    ``ceil(S / cap)`` of them, each of ``S / count`` bytes (``S`` all gradients' bytes)."""
    total = sum(p.nbytes for p in model.parameters() if p.requires_grad)
    count = max(1, math.ceil(total / (bucket_cap_mb * 2 ** 20)))
    return [("all_reduce", total / count)] * count


class NaiveDataParallel(Strategy):
    name = "dp-naive"
    precisions = RUN_PRECISIONS   # fp8: torchao's Float8 Linears (precision/fp8_training.py)
    description = "from scratch: one all-reduce per gradient after backward"
    options, allowed = LINK_OPTIONS, LINK_ALLOWED
    memory_layout = MemoryLayout(note="all-reduces gradients in place after backward")

    def step_collectives(self, spec, model):
        if spec.world_size == 1:
            return []
        return [("all_reduce", p.nbytes) for p in model.parameters() if p.requires_grad]

    def wrap(self, model, ctx):
        broadcast_parameters(model, dim_group(ctx, "dp"))
        return model

    def sync_gradients(self, model, ctx) -> None:
        allreduce_gradients(model, ctx.comm, ctx.link, dim_group(ctx, "dp"))


class BucketedDataParallel(Strategy):
    name = "dp-bucketed"
    precisions = RUN_PRECISIONS   # fp8: torchao's Float8 Linears (precision/fp8_training.py)
    description = "from scratch: gradients all-reduced in buckets, overlapping backward"
    options = {"bucket_cap_mb": BUCKET_CAP_MB, "overlap": checks.is_bool, **LINK_OPTIONS}
    allowed = {"bucket_cap_mb": BUCKET_CAP_MB_ALLOWED, "overlap": "True or False",
               **LINK_ALLOWED}
    defaults = {"bucket_cap_mb": 1.0, "overlap": True}   # overlap False: all after backward
    memory_layout = MemoryLayout(note="buckets in flight during backward are left out")

    def step_collectives(self, spec, model):
        if spec.world_size == 1:
            return []
        return bucketed_all_reduces(model, self.option(spec, "bucket_cap_mb"))

    def wrap(self, model, ctx):
        dp = dim_group(ctx, "dp")
        broadcast_parameters(model, dp)
        return DataParallel(model, float(self.option(ctx.spec, "bucket_cap_mb")),
                            overlap=bool(self.option(ctx.spec, "overlap")),
                            broadcast_from_first=False, sync_when_backward_ends=False,
                            meter=ctx.comm, link=ctx.link, dp=dp)

    def no_sync(self, model):
        return model.no_sync()

    def sync_gradients(self, model, ctx) -> None:
        model.finish_gradient_sync()
