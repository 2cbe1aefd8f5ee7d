"""Tensor parallel's communication: the ranks a layer is split over, and Megatron's f and g.

Megatron-LM puts all of tensor parallel's communication into two small operators
[ref: shoeybi2019-f-g], written here as autograd Functions (the layers that use them are in
``megatron.py``):

    f  forward: identity      backward: all-reduce    (in front of a column-parallel layer)
    g  forward: all-reduce    backward: identity      (behind a row-parallel layer)

:class:`TensorParallelGroup` does the collectives they call: the all-reduce, and the all-gather
and reduce-scatter along the sequence that sequence parallel uses instead (``sequence.py``),
each counted and timed into the step's CommMeter when it has a timer.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from ...measure.collectives import all_gather_into_tensor, reduce_scatter_tensor
from ...measure.timing import CollectiveTimer


@dataclass
class TensorParallelGroup:
    """Who this rank is among the ``size`` ranks that share each layer, and what they talk over.

    ``timer`` (optional) counts and times every collective into the step's CommMeter; ``link``
    (optional) delays each all-reduce as an emulated interconnect would (``parallel/link.py``).
    """

    rank: int
    size: int
    group: object = None          # a torch.distributed ProcessGroup; None = all ranks
    timer: CollectiveTimer | None = None
    link: object = None

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum ``tensor`` over the group, in place; return it."""
        if self.size == 1:
            return tensor
        if self.timer is None:
            dist.all_reduce(tensor, group=self.group)
            return tensor
        nbytes = tensor.nbytes

        def collective():
            dist.all_reduce(tensor, group=self.group)
            if self.link is not None:  # then wait as long as the emulated link would need
                self.link.delay_allreduce(nbytes, self.size, self.timer.meter, tensor.device)

        self.timer.run("all_reduce", nbytes, collective, group_size=self.size)
        return tensor

    # sequence parallel (sequence.py): the same bytes as an all-reduce, in two halves
    def all_gather_sequence(self, x: torch.Tensor) -> torch.Tensor:
        """Every rank's slice of the sequence (dim 1), end to end: ``B x T x ...``."""
        if self.size == 1:
            return x
        local = x.transpose(0, 1).contiguous()               # the sequence first
        full = local.new_empty((local.shape[0] * self.size, *local.shape[1:]))
        self._meter("all_gather", full, lambda: all_gather_into_tensor(full, local,
                                                                       group=self.group))
        return full.transpose(0, 1)

    def reduce_scatter_sequence(self, x: torch.Tensor) -> torch.Tensor:
        """The sum over ranks of ``x`` (``B x T x ...``), this rank's slice of the sequence."""
        if self.size == 1:
            return x
        full = x.transpose(0, 1).contiguous()
        mine = full.new_empty((full.shape[0] // self.size, *full.shape[1:]))
        self._meter("reduce_scatter", full, lambda: reduce_scatter_tensor(mine, full,
                                                                          group=self.group))
        return mine.transpose(0, 1)

    def _meter(self, op: str, full: torch.Tensor, collective) -> None:
        if self.timer is None:
            collective()
        else:
            self.timer.run(op, full.nbytes, collective,
                           group_size=self.size)


# ---- Megatron's f and g ------------------------------------------------------------------------

class CopyToTensorParallelRegion(torch.autograd.Function):
    """``f``: the input goes to every rank unchanged; in backward, each rank holds only the
    gradient through *its* slice of the next layer, so the slices' gradients are summed."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, tp: TensorParallelGroup) -> torch.Tensor:
        ctx.tp = tp
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return ctx.tp.all_reduce(grad.clone()), None  # a copy: autograd may still use `grad`


class ReduceFromTensorParallelRegion(torch.autograd.Function):
    """``g``: each rank holds a partial sum of the output; add them up. The sum's gradient
    with respect to each part is the output's gradient itself: identity in backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, tp: TensorParallelGroup) -> torch.Tensor:
        return tp.all_reduce(x.contiguous().clone())

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, None


def copy_to_tensor_parallel_region(x: torch.Tensor, tp: TensorParallelGroup) -> torch.Tensor:
    """``f(x)``: ``x`` itself; its gradient is summed over ``tp`` in backward."""
    return CopyToTensorParallelRegion.apply(x, tp)


def reduce_from_tensor_parallel_region(x: torch.Tensor, tp: TensorParallelGroup) -> torch.Tensor:
    """``g(x)``: the sum of every rank's ``x`` over ``tp``; its gradient passes through as is."""
    return ReduceFromTensorParallelRegion.apply(x, tp)

