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
"""
from __future__ import annotations

import math
import time
from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.nn as nn

from ... import checks
from ..base import MemoryLayout, Strategy, parameter_names, unused_error
from ..link import LINK_ALLOWED, LINK_OPTIONS
from ..mesh import DimGroup, dim_group
from ...measure.timing import DeviceMark, synchronize


def broadcast_parameters(model: nn.Module, dp: DimGroup | None = None) -> None:
    """Make every rank of the data-parallel group start from its first rank's weights (they
    already match; this makes sure). ``dp`` None: all ranks."""
    src, group = (dp.global_rank(0), dp.group) if dp is not None else (0, None)
    for tensor in list(model.parameters()) + list(model.buffers()):
        dist.broadcast(tensor.data, src=src, group=group)


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


# the bucket size option, the same here and in DDP (ddp.py): MiB of gradients per all-reduce
BUCKET_CAP_MB = checks.number_in(0, 1024, low_open=True)
BUCKET_CAP_MB_ALLOWED = "a number of MiB in (0, 1024]"


def bucketed_all_reduces(model, bucket_cap_mb: float) -> list:
    """A step's all-reduces when the gradients go in buckets of at most ``bucket_cap_mb`` MiB:
    ``ceil(S / cap)`` of them, each of ``S / count`` bytes (``S`` all gradients' bytes)."""
    total = sum(p.nbytes for p in model.parameters() if p.requires_grad)
    count = max(1, math.ceil(total / (bucket_cap_mb * 2 ** 20)))
    return [("all_reduce", total / count)] * count


class NaiveDataParallel(Strategy):
    name = "dp-naive"
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


class GradientBuckets(nn.Module):
    """Wraps a model; all-reduces its gradients bucket by bucket while backward still runs."""

    def __init__(self, module: nn.Module, meter, bucket_cap_mb: float = 1.0, link=None,
                 dp: DimGroup | None = None):
        super().__init__()
        self.module, self.meter, self.link = module, meter, link
        self.world = dp.size if dp is not None else dist.get_world_size()
        self.group = dp.group if dp is not None else None
        self.sync_enabled = True
        self.names = parameter_names(module)
        self.buckets = self._plan_buckets(bucket_cap_mb * 2**20)
        self.bucket_of = {p: i for i, bucket in enumerate(self.buckets) for p in bucket}
        self.ready = [0] * len(self.buckets)
        self.in_flight = []   # (future, flat buffer, params, start mark, [end mark])
        self.seen: set[int] = set()   # parameters whose gradient arrived in this backward
        for p in self.bucket_of:
            p.register_post_accumulate_grad_hook(self._grad_ready)

    def _plan_buckets(self, cap_bytes: float) -> list[list[nn.Parameter]]:
        """Group parameters in reverse definition order (≈ the order backward produces them)."""
        buckets, current, size = [], [], 0
        for p in reversed([p for p in self.module.parameters() if p.requires_grad]):
            current.append(p)
            size += p.nbytes
            if size >= cap_bytes:
                buckets.append(current)
                current, size = [], 0
        if current:
            buckets.append(current)
        return buckets

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @contextmanager
    def no_sync(self):
        """Accumulate gradients locally (no communication) inside this context."""
        self.sync_enabled = False
        try:
            yield
        finally:
            self.sync_enabled = True

    def _grad_ready(self, param: nn.Parameter) -> None:
        if not self.sync_enabled:
            return
        self.seen.add(id(param))
        index = self.bucket_of[param]
        self.ready[index] += 1
        if self.ready[index] == len(self.buckets[index]):  # the whole bucket is ready: send it
            params = self.buckets[index]
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            start = DeviceMark(flat.device)
            future = dist.all_reduce(flat, group=self.group, async_op=True).get_future()
            if self.link is not None:  # emulated slow link: completes later, by the model's time
                future = self.link.then_delay(future, flat.nbytes,
                                              self.world, self.meter, flat.device)
            done = []    # the bucket's end on the device's timeline (a mark made in `then`)
            future = future.then(lambda fut, done=done: done.append(DeviceMark(flat.device))
                                 or fut.value())
            self.in_flight.append((future, flat, params, start, done))

    def finish_gradient_sync(self) -> None:
        """Wait for the buckets still in flight and write the averaged gradients back.

        Timed on the device's timeline (``DeviceMark``): on a GPU ``Future.wait()`` only makes
        the current stream wait, so host clocks would see the launch, not the transfer. A
        bucket's busy time runs from its launch to its completion; the exposed wait, from the
        end of backward to the last bucket written back."""
        unused = [self.names[id(p)] for p in self.bucket_of if id(p) not in self.seen]
        self.seen.clear()
        if unused:   # their buckets were never sent: the rest of those buckets not averaged
            for future, *_ in self.in_flight:
                future.wait()
            self.in_flight.clear()
            self.ready = [0] * len(self.buckets)
            raise unused_error("dp-bucketed", unused)
        if not self.in_flight:
            self.ready = [0] * len(self.buckets)
            return
        wait_start = DeviceMark(self.in_flight[0][1].device)
        for future, flat, params, start, done in self.in_flight:
            future.wait()
            self.meter.add(flat.nbytes, done[0].seconds_since(start),
                           group_size=self.world)
            flat /= self.world
            offset = 0
            for p in params:
                n = p.grad.numel()
                p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
                offset += n
        self.meter.exposed_s += DeviceMark(wait_start.device).seconds_since(wait_start)
        self.in_flight.clear()
        self.ready = [0] * len(self.buckets)


class BucketedDataParallel(Strategy):
    name = "dp-bucketed"
    description = "from scratch: gradients all-reduced in buckets, overlapping backward"
    options = {"bucket_cap_mb": BUCKET_CAP_MB, **LINK_OPTIONS}
    allowed = {"bucket_cap_mb": BUCKET_CAP_MB_ALLOWED, **LINK_ALLOWED}
    defaults = {"bucket_cap_mb": 1.0}
    memory_layout = MemoryLayout(note="buckets in flight during backward are left out")

    def step_collectives(self, spec, model):
        if spec.world_size == 1:
            return []
        return bucketed_all_reduces(model, self.option(spec, "bucket_cap_mb"))

    def wrap(self, model, ctx):
        dp = dim_group(ctx, "dp")
        broadcast_parameters(model, dp)
        return GradientBuckets(model, ctx.comm, float(self.option(ctx.spec, "bucket_cap_mb")),
                               ctx.link, dp)

    def no_sync(self, model):
        return model.no_sync()

    def sync_gradients(self, model, ctx) -> None:
        model.finish_gradient_sync()
