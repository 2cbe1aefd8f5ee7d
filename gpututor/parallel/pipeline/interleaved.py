"""Interleaved 1F1B from scratch (Narayanan et al. 2021, Megatron-LM, §2.2.2).

[ref: narayanan2021-interleaved]

Each of the p ranks holds v *model chunks* (virtual stages) instead of one stage: with p=2 and
v=2 the model is cut into 4 pieces, rank 0 holds pieces 0 and 2, rank 1 pieces 1 and 3 (rank r
holds virtual stages r, r+p, r+2p, ...). A micro-batch goes around the ranks v times. Each
piece is v times shorter, so filling and draining the pipeline costs v times less: the bubble
is (p-1)/(v·m) of the ideal time instead of (p-1)/m, paid for with v times as many messages.

    rank 0:  F0 F1 f0 f1 F2 b0 F3 b1 f2 B0 f3 B1 b2 b3 B2 B3     (p=2, v=2, m=4;
    rank 1:  F0 F1 f0 b0 f1 b1 F2 B0 F3 B1 f2 b2 f3 b3 B2 B3      capitals: chunk 0,
                                                                 lower case: chunk 1)

The order is Megatron's: forwards go through the chunks in groups of p micro-batches (chunk 0
for micro-batches 0..p-1, chunk 1 for the same ones, ..., then the next p micro-batches),
backwards the same way from the last chunk down; hence m must be a multiple of p.

Communication happens only at the schedule's *exchange* points, as in Megatron
(``send_forward_backward_recv_forward_backward``): what was just computed is sent, and the inputs
of the next forward and the next backward are received, all posted together and then waited.
Receiving one step early matters: on gloo (and NCCL) a send completes only once its receiver
has posted the receive, and the simpler "receive right before computing" of ``schedules.py``
deadlocks here (``tests/parallel/test_pipeline_schedules.py`` simulates both).
"""
from __future__ import annotations

import torch
import torch.distributed as dist


def forward_unit(k: int, p: int, v: int) -> tuple[int, int]:
    """The k-th forward of a rank: ``(chunk, micro-batch)``. Groups of p micro-batches go
    through chunk 0, then chunk 1, ..., then the next group of p starts at chunk 0 again."""
    return (k // p) % v, (k // (p * v)) * p + k % p


def backward_unit(k: int, p: int, v: int) -> tuple[int, int]:
    """The k-th backward of a rank: the same order, from the last chunk down."""
    chunk, micro = forward_unit(k, p, v)
    return v - 1 - chunk, micro


def interleaved_1f1b(worker: "InterleavedWorker", m: int) -> None:
    """Interleaved 1F1B (Megatron's ``forward_backward_pipelining_with_interleaving``)."""
    p, v, rank = worker.count, worker.v, worker.index
    units = m * v    # each (chunk, micro-batch) once forward and once backward
    # warm-up: the first backward of rank r needs micro-batch 0 through all (v-1)p forwards of
    # the earlier chunks' groups, plus a round trip to the last rank and back: 2(p-r-1)
    warmup = min((p - rank - 1) * 2 + (v - 1) * p, units)
    F = [forward_unit(k, p, v) for k in range(units)] + [None]    # None: nothing comes next
    B = [backward_unit(k, p, v) for k in range(units)] + [None]
    worker.exchange(F[0], B[0] if warmup == 0 else None)
    for k in range(warmup):
        worker.forward(*F[k])
        # the last warm-up exchange also receives the gradient the steady state starts with
        worker.exchange(F[k + 1], B[0] if k == warmup - 1 else None)
    # steady state: one forward, one backward, then one exchange sending both results
    for k in range(units - warmup):
        worker.forward(*F[warmup + k])
        worker.backward(*B[k])
        worker.exchange(F[warmup + k + 1], B[k + 1])
    # cool-down: no forwards left, drain the backwards
    for k in range(units - warmup, units):
        worker.backward(*B[k])
        worker.exchange(None, B[k + 1])


class InterleavedWorker:
    """Rank r's v chunks (``GPTChunks``): one ``StageWorker`` per chunk (virtual stage r + j·p
    among p·v, made with ``flush_before_compute=False``), all sending through ``p2p``."""

    def __init__(self, model, chunk_workers: list, p2p):
        self.stage, self.chunks, self.p2p = model, chunk_workers, p2p   # stage: the GPTChunks
        self.index, self.count, self.v = model.pp.rank, model.pp.size, len(model.chunks)
        self.d_model = model.d_model

    def forward(self, chunk: int, i: int) -> None:
        self.chunks[chunk].forward(i)

    def backward(self, chunk: int, i: int) -> None:
        self.chunks[chunk].backward(i)

    def exchange(self, forward: tuple | None, backward: tuple | None) -> None:
        """Send what the last computes queued; receive the input of the ``(chunk, micro)``
        forward and the output gradient of the ``(chunk, micro)`` backward that come next
        (neither where it is the first or the last virtual stage); all together."""
        receives = []
        for kind, unit in (("F", forward), ("B", backward)):
            if unit is None:
                continue
            worker = self.chunks[unit[0]]
            nothing_to_receive = worker.stage.is_first if kind == "F" else worker.stage.is_last
            if nothing_to_receive:   # the first stage reads tokens; the last starts at the loss
                continue
            src = worker.peer(worker.index - 1 if kind == "F" else worker.index + 1)
            inputs, _ = worker.micro_batches[unit[1]]
            tensor = torch.empty((*inputs.shape, self.d_model), device=inputs.device)
            worker.inbox[(kind, unit[1])] = tensor
            receives.append(dist.P2POp(dist.irecv, tensor, src))
        if receives or self.p2p.queued:
            self.p2p.exchange(receives)

    @property
    def losses(self) -> list:
        return [loss for worker in self.chunks for loss in worker.losses]
