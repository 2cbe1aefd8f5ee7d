"""Data parallel from scratch around any ``nn.Module``, used as torch's DDP is used.

    model = DataParallel(module)                 # every rank starts from rank 0's weights
    loss_fn(model(x), y).backward()              # gradients averaged over the ranks ...
    optimizer.step()                             # ... by the time backward returns

Gradients go in buckets of about ``bucket_cap_mb`` MiB, in the order backward produces them
(reverse definition order, roughly last layer first). With ``overlap`` a bucket's all-reduce
starts as soon as its last gradient is ready and every bucket before it has been sent, while
backward goes on with earlier layers; without it, every bucket is sent after backward. Buckets
are sent in the same order on every rank, whatever order their gradients arrive in: collectives
pair up by their order, so a rank that sent bucket 3 while another sent bucket 2 would add
unrelated gradients. ``bucket_cap_mb=None`` gives each parameter its own
all-reduce (the naive sync). Inside ``no_sync()`` gradients only accumulate locally.

Parameters, as torch's DDP treats them [ref: pytorch-ddp-source-unused]:
- frozen (``requires_grad=False``): never sent;
- tied (one tensor under two names): counted and sent once;
- unused (a trainable parameter the loss did not reach in this backward): by default a
  ``RuntimeError`` names them, since their bucket would never fill and the other gradients in it
  would silently not be averaged. With ``find_unused_parameters=True`` they count as zero in
  their bucket, the ranks agree (one more all-reduce, of one flag per parameter) which were used
  on any rank: those get the average, those used on none keep ``grad`` None, so the optimizer
  skips them as one process would.

The strategy ``dp-bucketed`` (``scratch.py``) wraps the worker's model in this class with
``sync_when_backward_ends=False`` and calls :meth:`DataParallel.finish_gradient_sync` in its
own timed phase.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.nn as nn

from ... import checks
from ...checks import InvalidValue
from ...measure.timing import CommMeter, DeviceMark
from ..base import parameter_names, unused_error
from ..mesh import DimGroup


def broadcast_parameters(model: nn.Module, dp: DimGroup | None = None) -> None:
    """Make every rank of the data-parallel group start from its first rank's weights (they
    already match; this makes sure). ``dp`` None: all ranks."""
    src, group = (dp.global_rank(0), dp.group) if dp is not None else (0, None)
    for tensor in list(model.parameters()) + list(model.buffers()):
        dist.broadcast(tensor.data, src=src, group=group)


# the bucket size option, the same here and in DDP (ddp.py): MiB of gradients per all-reduce
BUCKET_CAP_MB = checks.number_in(0, 1024, low_open=True)
BUCKET_CAP_MB_ALLOWED = "a number of MiB in (0, 1024]"


class DataParallel(nn.Module):
    """Wraps a module; all-reduces its gradients bucket by bucket (see the module docstring).

    ``meter`` (a :class:`~gpututor.measure.timing.CommMeter`, made if not given) counts the bytes
    and time of every all-reduce; ``dp`` is the data-parallel group (None: every rank); ``link``
    an emulated interconnect (``parallel/link.py``)."""

    def __init__(self, module: nn.Module, bucket_cap_mb: float | None = 25.0, *,
                 overlap: bool = True, find_unused_parameters: bool = False,
                 broadcast_from_first: bool = True, sync_when_backward_ends: bool = True,
                 meter=None, link=None, dp: DimGroup | None = None):
        super().__init__()
        if bucket_cap_mb is not None:
            checks.where("bucket_cap_mb", bucket_cap_mb, BUCKET_CAP_MB,
                         f"None (one all-reduce per parameter) or {BUCKET_CAP_MB_ALLOWED}")
        for name, flag in (("overlap", overlap), ("find_unused_parameters", find_unused_parameters)):
            if not isinstance(flag, bool):
                raise InvalidValue(name, flag, "True or False")
        if not dist.is_initialized():
            raise RuntimeError("DataParallel: no process group: call "
                               "torch.distributed.init_process_group first (or run in %%ranks)")
        self.module, self.link = module, link
        self.meter = meter if meter is not None else CommMeter(world_size=dist.get_world_size())
        self.world = dp.size if dp is not None else dist.get_world_size()
        self.group = dp.group if dp is not None else None
        self.overlap, self.find_unused = overlap, find_unused_parameters
        self.auto = sync_when_backward_ends
        if broadcast_from_first:
            broadcast_parameters(module, dp)
        self.sync_enabled = True
        self.names = parameter_names(module)
        cap = 0.0 if bucket_cap_mb is None else bucket_cap_mb * 2**20   # 0: one per parameter
        self.buckets = self._plan_buckets(cap)
        self.bucket_of = {p: i for i, bucket in enumerate(self.buckets) for p in bucket}
        self.ready = [0] * len(self.buckets)
        self.in_flight = []   # (future, flat buffer, params, start mark, [end mark])
        self.next_send = 0            # buckets go in order (as DDP's): the next one to send
        self.seen: set[int] = set()   # parameters whose gradient arrived in this backward
        self.callback_queued = False
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
        if self.auto and not self.callback_queued:   # sync once this backward has finished
            self.callback_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self.finish_gradient_sync)
        self.seen.add(id(param))
        index = self.bucket_of[param]
        self.ready[index] += 1
        if self.overlap:   # send every bucket now ready, in bucket order
            while self.next_send < len(self.buckets) and \
                    self.ready[self.next_send] == len(self.buckets[self.next_send]):
                self._send(self.next_send)

    def _send(self, index: int) -> None:
        params = self.buckets[index]
        # a parameter this backward did not reach counts as zero (a stale .grad is not sent)
        flat = torch.cat([(p.grad if id(p) in self.seen else torch.zeros_like(p)).reshape(-1)
                          for p in params])
        start = DeviceMark(flat.device)
        future = dist.all_reduce(flat, group=self.group, async_op=True).get_future()
        if self.link is not None:  # emulated slow link: completes later, by the model's time
            future = self.link.then_delay(future, flat.nbytes, self.world, self.meter,
                                          flat.device)
        done = []    # the bucket's end on the device's timeline (a mark made in `then`)
        future = future.then(lambda fut, done=done: done.append(DeviceMark(flat.device))
                             or fut.value())
        self.in_flight.append((future, flat, params, start, done))
        self.next_send = index + 1

    def finish_gradient_sync(self) -> None:
        """Send what is left, wait for every bucket and write the averaged gradients back.

        Timed on the device's timeline (``DeviceMark``): on a GPU ``Future.wait()`` only makes
        the current stream wait, so host clocks would see the launch, not the transfer. A
        bucket's busy time runs from its launch to its completion; the exposed wait, from the
        end of backward to the last bucket written back."""
        self.callback_queued = False
        unused = [p for p in self.bucket_of if id(p) not in self.seen]
        if unused and not self.find_unused:   # their buckets would never be sent
            self._drain()
            raise unused_error("dp-bucketed", [self.names[id(p)] for p in unused])
        if not self.seen:
            self._drain()
            return
        wait_start = DeviceMark(next(iter(self.bucket_of)).device)
        for index in range(self.next_send, len(self.buckets)):
            self._send(index)
        used_somewhere = self._used_on_any_rank() if unused else None
        for future, flat, params, start, done in self.in_flight:
            future.wait()
            self.meter.add(flat.nbytes, done[0].seconds_since(start), group_size=self.world,
                           start=start, end=done[0])
            flat /= self.world
            for p, piece in zip(params, flat.split([p.numel() for p in params])):
                if id(p) in self.seen:
                    p.grad.copy_(piece.view_as(p))
                elif used_somewhere[p]:          # used on another rank: the average
                    p.grad = piece.view_as(p).clone()
                # used on no rank: .grad untouched (None after zero_grad), as DDP leaves it
        self.meter.exposed_s += DeviceMark(wait_start.device).seconds_since(wait_start)
        self._drain()

    def _used_on_any_rank(self) -> dict:
        """One flag per parameter, summed over the ranks: used by at least one (DDP's
        ``local_used_map``)."""
        params = list(self.bucket_of)
        flags = torch.tensor([float(id(p) in self.seen) for p in params],
                             device=params[0].device)
        dist.all_reduce(flags, group=self.group)
        return {p: bool(flag > 0) for p, flag in zip(params, flags.tolist())}

    def _drain(self) -> None:
        """Wait for what was launched and start the next backward afresh."""
        for future, *_ in self.in_flight:
            future.wait()
        self.in_flight.clear()
        self.next_send = 0
        self.seen.clear()
        self.ready = [0] * len(self.buckets)
