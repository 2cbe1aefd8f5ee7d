"""Data parallel with PyTorch's ``DistributedDataParallel`` (the production API).

Every rank holds a full copy of the model and trains on its shard of the global batch. During
backward, DDP all-reduces gradients in buckets as soon as a bucket's gradients are ready, so
communication overlaps the rest of backward; after it, every rank holds the average gradient
and takes the same optimizer step. (Lesson 02 builds the same thing from scratch.)

What we measure: the bytes and duration of every bucket's all-reduce (through a communication
hook), and the *exposed* communication: the time between the last gradient being computed and
``backward()`` returning, when compute waits for the last buckets.
"""
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from .base import Strategy


class DataParallelDDP(Strategy):
    name = "ddp"
    description = "torch DistributedDataParallel: full replica per rank, gradients all-reduced"

    def wrap(self, model, ctx):
        device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        ddp = DDP(model, device_ids=device_ids)
        ddp.register_comm_hook(ctx.comm, _timed_allreduce)
        _watch_last_gradient(ddp, ctx)
        return ddp

    def no_sync(self, model):
        return model.no_sync()


def _timed_allreduce(meter, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP's default all-reduce-and-average, timed from launch to completion."""
    tensor = bucket.buffer()
    world = dist.get_world_size()
    start = time.perf_counter()
    work = dist.all_reduce(tensor.div_(world), async_op=True)

    def done(fut):
        meter.add(tensor.numel() * tensor.element_size(), time.perf_counter() - start)
        return fut.value()[0]

    return work.get_future().then(done)


def _watch_last_gradient(ddp: DDP, ctx) -> None:
    """Record when each parameter's gradient is ready, and backward's end, to get exposed comm."""
    state = {"last_grad": None}

    def grad_ready(_param):
        state["last_grad"] = time.perf_counter()

    for p in ddp.module.parameters():
        if p.requires_grad:
            p.register_post_accumulate_grad_hook(grad_ready)

    def backward_done():
        if state["last_grad"] is not None:
            ctx.comm.exposed_s += max(0.0, time.perf_counter() - state["last_grad"])
            state["last_grad"] = None

    ctx.after_backward = backward_done
