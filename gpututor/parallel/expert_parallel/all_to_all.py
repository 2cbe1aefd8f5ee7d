"""Expert parallel's communication: an all-to-all that autograd can run backwards, and the
dispatch and combine of a MoE layer built from it (GShard, Lepikhin et al. 2021, §3
[ref: lepikhin2021-alltoall]; Switch, Fedus et al. 2021, §5.4 [ref: fedus2021-expert-parallel]).

    dispatch   every rank sends each routed token to the rank that owns its expert  all-to-all
    experts    each rank runs its experts on what it received
    combine    the outputs go back to the ranks their tokens came from              all-to-all

An all-to-all with splits: rank r sends ``send_splits[s]`` rows to rank s and receives
``recv_splits[s]`` rows from it (``dist.all_to_all_single``). Its backward is the same exchange
the other way: a row's gradient goes back to the rank the row came from (:class:`AllToAll`).

How many rows travel is data-dependent (it is the router's choice), so before each dispatch the
ranks tell each other the counts, per expert, with a small all-to-all of integers.

Communication is metered as the point-to-point traffic it is: the bytes of rows that leave this
rank (rows for its own experts stay), each crossing one link once.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn as nn

from ...measure.collectives import all_gather_into_tensor
from ...measure.timing import CollectiveTimer
from ...moe import run_experts
from ..mesh import DimGroup


def all_to_all(x: torch.Tensor, send_splits: list[int], recv_splits: list[int], ep: DimGroup,
               timer: CollectiveTimer) -> torch.Tensor:
    """Send ``send_splits[s]`` consecutive rows of ``x`` to member s of ``ep``; return the rows
    received, ``recv_splits[s]`` from member s, in member order."""
    x = x.contiguous()
    # zeros, not empty: under a fake process group (--dry-run) nothing arrives, and counts of
    # 0 keep the rest of the layer consistent
    out = x.new_zeros((sum(recv_splits), *x.shape[1:]))
    row_bytes = math.prod(x.shape[1:]) * x.element_size()
    leaving = (sum(send_splits) - send_splits[ep.rank]) * row_bytes
    timer.run("send", leaving, lambda: dist.all_to_all_single(
        out, x, output_split_sizes=recv_splits, input_split_sizes=send_splits, group=ep.group),
        group_size=ep.size)
    return out


class AllToAll(torch.autograd.Function):
    """Forward: :func:`all_to_all` with these splits. Backward: the reverse all-to-all, so each
    row's gradient returns to the rank that sent the row."""

    @staticmethod
    def forward(ctx, x, send_splits, recv_splits, ep, timer):
        ctx.splits, ctx.ep, ctx.timer = (send_splits, recv_splits), ep, timer
        return all_to_all(x, send_splits, recv_splits, ep, timer)

    @staticmethod
    def backward(ctx, grad):
        send_splits, recv_splits = ctx.splits
        return all_to_all(grad, recv_splits, send_splits, ctx.ep, ctx.timer), None, None, None, None


class ExpertExchange:
    """A MoE layer's ``exchange`` under expert parallel (the one-rank one is
    ``gpututor.moe.LocalExperts``).

    Member i of the ``ep`` group holds experts ``i·E/n .. (i+1)·E/n - 1``. Every rank of the
    run trains on its own slice of the global batch, rank r's rows after those of ranks < r
    (``gpututor.data.shard``), so the run's token order is rank order; queue places, capacity and
    the balancing loss's f_e are counted over that whole batch, as one process would."""

    def __init__(self, ep: DimGroup, rank: int, world_size: int, n_expert: int,
                 timer: CollectiveTimer):
        self.ep, self.rank, self.world_size, self.timer = ep, rank, world_size, timer
        self.local = n_expert // ep.size          # experts per ep rank
        self.first = ep.rank * self.local         # this rank's first expert

    def token_counts(self, routed: torch.Tensor, tokens: int):
        """``(earlier, total, tokens)`` over the whole run: slots per expert routed by the ranks
        before this one, by all ranks, and the global batch's tokens (one all-gather)."""
        every = routed.new_zeros(self.world_size * routed.numel())
        self.timer.run("all_gather", every.nbytes,
                       lambda: all_gather_into_tensor(every, routed), group_size=self.world_size)
        every = every.view(self.world_size, -1)
        return every[:self.rank].sum(dim=0), every.sum(dim=0), tokens * self.world_size

    def run(self, x: torch.Tensor, counts: list[int], experts: nn.ModuleDict) -> torch.Tensor:
        """Rows of ``x`` sorted by expert, ``counts[e]`` for expert e (all E of them) -> their
        outputs, computed on the ranks that own the experts: dispatch, experts, combine."""
        n, local = self.ep.size, self.local
        send = torch.tensor(counts, device=x.device)          # rows for each expert
        # first the counts: rank s learns how many rows for each of its experts come from us
        recv = all_to_all(send, [local] * n, [local] * n, self.ep, self.timer)
        rows = recv.view(n, local).tolist()                   # rows[s][j]: from rank s, expert j
        send_splits = send.view(n, local).sum(dim=1).tolist()
        recv_splits = [sum(r) for r in rows]
        received = AllToAll.apply(x, send_splits, recv_splits, self.ep, self.timer)  # dispatch
        # received is (rank, expert)-major; each expert takes its rows from rank 0, 1, ... in
        # turn: the global batch's token order, the order one process would feed it
        pieces = received.split(sum(rows, []))
        per_expert = [torch.cat([pieces[s * local + j] for s in range(n)]) for j in range(local)]
        outputs = run_experts(torch.cat(per_expert), [len(p) for p in per_expert], experts,
                              self.first)
        by_expert = [out.split([rows[s][j] for s in range(n)])
                     for j, out in enumerate(outputs.split([len(p) for p in per_expert]))]
        back = torch.cat([by_expert[j][s] for s in range(n) for j in range(local)])
        return AllToAll.apply(back, recv_splits, send_splits, self.ep, self.timer)   # combine
