"""The ring of a context-parallel group: each rank sends to the next and receives from the previous.

Ring attention's only communication is this shift: rank r of n sends a block to ``r+1`` and
receives the one ``r-1`` held, all ranks at once. :meth:`Ring.shift` *starts* it (a paired
``isend``/``irecv``, posted together with ``dist.batch_isend_irecv`` as Megatron's and torch's
pipeline schedules pair theirs, so that no rank's send waits for a receive that its
neighbour has not posted yet) and returns at once; the caller computes on the block it already
has and only then calls :meth:`Transfer.wait`. While it computes, the next block is on its way:
communication hidden behind compute, the point of the ring [ref: liu2023-ring].

Every shift is metered into the step's ``CommMeter`` (``measure/timing.py``): the bytes this rank
sends, how long the transfer took from post to arrival (``busy_s``) and how long compute stood
still waiting for it (``exposed_s``, the part the overlap did not hide). On CUDA the wait is only
the stream's, not the host's: the exposed share is then not known (``exposed_unknown``), and
the transfer times are read from device marks at the end of the step (:meth:`Ring.flush`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from ...measure.timing import CommMeter, DeviceMark

KV_TAG, GRAD_TAG = 0, 1   # keys/values and their gradients travel at the same time: two tags


@dataclass
class Transfer:
    """A shift in flight: :meth:`wait` returns the block the previous rank sent."""

    received: torch.Tensor
    works: list
    ring: "Ring"
    nbytes: int
    start: object = None   # a DeviceMark when the ring is metered

    def wait(self) -> torch.Tensor:
        waited = time.perf_counter()
        for work in self.works:
            work.wait()
        self.ring.arrived(self, time.perf_counter() - waited)
        return self.received


@dataclass
class Ring:
    """Rank ``rank`` of the ``size`` ranks of a cp group (``group``; None = every rank), in ring
    order. ``meter`` (optional) counts every shift; ``device`` is where the blocks live."""

    rank: int
    size: int
    group: object = None
    meter: CommMeter | None = None
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    def __post_init__(self):
        self.pending = []   # (bytes, start mark, end mark) of shifts not yet added to the meter

    @property
    def next(self) -> int:
        return (self.rank + 1) % self.size

    @property
    def prev(self) -> int:
        return (self.rank - 1) % self.size

    def shift(self, block: torch.Tensor, tag: int = KV_TAG) -> Transfer:
        """Start sending ``block`` to the next rank and receiving the previous rank's block of
        the same shape; return at once (one rank alone: the block comes straight back)."""
        if self.size == 1:
            return Transfer(block, [], self, 0)
        block = block.contiguous()
        received = torch.empty_like(block)
        ops = [dist.P2POp(dist.isend, block, group=self.group, group_peer=self.next, tag=tag),
               dist.P2POp(dist.irecv, received, group=self.group, group_peer=self.prev, tag=tag)]
        nbytes = block.nbytes
        start = DeviceMark(self.device) if self.meter is not None else None
        return Transfer(received, dist.batch_isend_irecv(ops), self, nbytes, start)

    def arrived(self, transfer: Transfer, waited_s: float) -> None:
        """Meter a finished shift: its bytes and times (see the module's docstring)."""
        if self.meter is None or transfer.nbytes == 0:
            return
        self.pending.append((transfer.nbytes, transfer.start, DeviceMark(self.device)))
        if self.device.type == "cuda":
            self.meter.exposed_unknown = True
        else:
            self.meter.exposed_s += waited_s
            self.flush()

    def flush(self) -> None:
        """Add the finished shifts to the meter (on CUDA: call once the step's work is done)."""
        for nbytes, start, end in self.pending:
            self.meter.add(nbytes, end.seconds_since(start), op="send", group_size=self.size,
                           start=start, end=end)
        self.pending.clear()
