"""fp16 loss scaling across ranks: when one rank's gradients overflow, every rank skips the step
and halves the scale (gpututor.parallel.base.agree_found_inf), instead of only that rank.

Checked on CPU ranks with ``torch.amp.GradScaler("cpu")`` on fp32 gradients, since fp16 training
itself needs CUDA here: the scaler's skip/grow logic and the agreement are the same code."""
from __future__ import annotations

import torch
import torch.distributed as dist

from gpututor import RunSpec, launch
from gpututor.parallel.base import agree_found_inf


def one_overflowing_step(agree: bool):
    def task(spec, rank, world, device, emit):
        torch.manual_seed(0)
        layer = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
        before = layer.weight.detach().clone()
        scaler.scale(layer(torch.ones(2, 4)).sum()).backward()
        if rank == 1:   # only this rank's piece of the gradients overflows
            layer.weight.grad[0, 0] = float("inf")
        scaler.unscale_(optimizer)
        if agree:
            agree_found_inf(scaler, optimizer)
        scaler.step(optimizer)
        scaler.update()
        emit({"step": 0, "stepped": not torch.equal(before, layer.weight.detach()),
              "scale": scaler.get_scale()})
        dist.barrier()
    return task


def _by_rank(records):
    return {r["rank"]: (r["stepped"], r["scale"]) for r in records}


def test_one_rank_overflowing_makes_every_rank_skip():
    spec = RunSpec(world_size=2, device="cpu", timeout=20)
    assert _by_rank(launch(spec, task=one_overflowing_step(agree=True)).wait()) == {
        0: (False, 2.0**9), 1: (False, 2.0**9)}


def test_without_agreement_the_ranks_diverge():
    """The bug the agreement removes: rank 0 steps with the old scale, rank 1 skips."""
    spec = RunSpec(world_size=2, device="cpu", timeout=20)
    assert _by_rank(launch(spec, task=one_overflowing_step(agree=False)).wait()) == {
        0: (True, 2.0**10), 1: (False, 2.0**9)}
