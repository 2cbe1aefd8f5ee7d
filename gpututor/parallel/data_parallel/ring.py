"""Ring all-reduce from point-to-point messages (the exercise checker is in ``gpututor.lessons``).

Each of ``n`` ranks splits its tensor into ``n`` chunks and only ever talks to its two
neighbours. Phase 1, *reduce-scatter*: in ``n-1`` steps each rank sends one chunk to the right
and adds the chunk arriving from the left; afterwards rank ``r`` holds the full sum of chunk
``(r+1) % n``. Phase 2, *all-gather*: ``n-1`` more steps pass the finished chunks around. Every
rank sends ``2(n-1)/n`` of the tensor in total, whatever ``n`` is: that is why the ring is
bandwidth-optimal and why nccl-tests' "bus bandwidth" multiplies by ``2(n-1)/n``.
"""
from __future__ import annotations

import torch
import torch.distributed as dist


def _exchange(send: torch.Tensor, recv_like: torch.Tensor, right: int, left: int) -> torch.Tensor:
    """Send to the right neighbour while receiving from the left one. The send and the receive
    are posted together (``batch_isend_irecv``): with gloo an ``isend`` then a ``recv`` works
    too, but NCCL can hang when every rank of a ring sends before it receives."""
    incoming = torch.empty_like(recv_like)
    ops = [dist.P2POp(dist.isend, send.contiguous(), right), dist.P2POp(dist.irecv, incoming, left)]
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    return incoming


def ring_schedule(world: int) -> list[dict]:
    """The ring's schedule, the one :func:`ring_allreduce` follows (and lesson 02 draws): a step
    per entry, ``phase`` ("reduce-scatter" or "all-gather"), ``step`` (from 0 in its phase) and,
    per rank, the chunk it sends to its right neighbour and the chunk it receives from its left
    one (``send``, ``recv``: lists indexed by rank). In the reduce-scatter the received chunk is
    added; in the all-gather it is copied."""
    steps = []
    for phase, shift in (("reduce-scatter", 0), ("all-gather", 1)):
        for step in range(world - 1):
            steps.append({"phase": phase, "step": step,
                          "send": [(r - step + shift) % world for r in range(world)],
                          "recv": [(r - step - 1 + shift) % world for r in range(world)]})
    return steps


def ring_allreduce(tensor: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Sum ``tensor`` over all ranks, in place, with a ring of sends and receives
    (:func:`ring_schedule`' schedule)."""
    if world == 1:
        return tensor
    chunks = list(tensor.view(-1).tensor_split(world))   # views into tensor
    right, left = (rank + 1) % world, (rank - 1) % world
    for step in ring_schedule(world):
        send, recv = step["send"][rank], step["recv"][rank]
        incoming = _exchange(chunks[send], chunks[recv], right, left)
        if step["phase"] == "reduce-scatter":            # phase 1: add what arrives
            chunks[recv] += incoming
        else:                                            # phase 2: pass finished chunks on
            chunks[recv].copy_(incoming)
    return tensor
