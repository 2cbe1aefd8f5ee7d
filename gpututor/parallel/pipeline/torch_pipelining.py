"""Pipeline parallel with ``torch.distributed.pipelining`` (the production API).

The same stages as ``schedules.py`` (:class:`~gpututor.parallel.pipeline.stages.GPTStage`), handed to
PyTorch:

    from scratch (schedules.py)                 torch.distributed.pipelining
    GPTStage: the blocks this rank owns         PipelineStage(module, stage_index, num_stages,
                                                  device): the same module; the shapes to send
                                                  are found by running one micro-batch
    PointToPoint isend / recv                   the stage's batched P2P ops, waited by the schedule
    StageWorker.forward / backward              stage.forward_one_chunk / backward_one_chunk
    gpipe(), one_f_one_b()                      ScheduleGPipe, Schedule1F1B (schedule.step(...)
                                                  cuts the batch into n_microbatches itself)
    loss / m on the last stage                  loss_fn per micro-batch; gradients divided by
                                                  n_microbatches afterwards (scale_grads=True)

What stays ours: the tied embedding's two copies (first and last stage) are summed after the
step exactly as in ``schedules.py``, and the timeline is measured by timing the stage's
``forward_one_chunk`` / ``backward_one_chunk`` and the loss, so this run reports a measured
``bubble_fraction`` too. PyTorch's own messages are not metered: ``comm_bytes_per_step``
counts only the tied embedding's sum.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from ..base import autocast_for
from ..meta import materialize
from .stages import (DEFAULT_MICROBATCHES, GPTStage, PipelineStrategy, embedding_group,
                     pipeline_options, share_loss, split_micro_batches, tied_weight_sync)
from .timeline import StageTimeline

TORCH_SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}


def micro_batch_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def find_shapes(schedule, module: GPTStage, spec, device: torch.device) -> None:
    """PipelineStage learns what it will send and receive by running the first micro-batch,
    forward and backward, in the first ``step()``. Do that now, on a batch of zeros (gradients
    dropped, no optimizer step), so training step 0 is a step like the others; PyTorch's FLOP
    counter, which also hooks into autograd, fails if it meets that first run (torch 2.13)."""
    zeros = torch.zeros(spec.batch_size, spec.seq_len, dtype=torch.long, device=device)
    schedule.step(*((zeros,) if module.is_first else ()),
                  target=zeros if module.is_last else None, losses=[] if module.is_last else None)
    module.zero_grad(set_to_none=True)


def _timed(method, timeline: StageTimeline, kind: str):
    """``method(chunk_id, ...)`` run inside a timeline interval of that micro-batch."""
    def run(chunk_id, *args, **kwargs):
        with timeline.interval(kind, chunk_id):
            return method(chunk_id, *args, **kwargs)
    return run


class PipelineTorch(PipelineStrategy):
    name = "pp-torch"
    description = "torch.distributed.pipelining: PipelineStage with ScheduleGPipe / Schedule1F1B"
    meters_comm = False     # the stages' send/recv run inside torch, unmetered
    options, allowed = pipeline_options(tuple(TORCH_SCHEDULES))

    def wrap(self, model, ctx):
        spec = ctx.spec
        module = materialize(self.cut(model, ctx), ctx.device, spec.seed)  # PipelineStage: real
        m = spec.option("microbatches", DEFAULT_MICROBATCHES)
        stage = PipelineStage(module, module.pp.rank, module.pp.size, ctx.device,
                              group=module.pp.group)
        timeline = StageTimeline(ctx)
        # time the stage's compute (the schedule waits for messages outside these calls)
        stage.forward_one_chunk = _timed(stage.forward_one_chunk, timeline, "F")
        stage.backward_one_chunk = _timed(stage.backward_one_chunk, timeline, "B")

        def loss_fn(logits, targets):   # the last stage's loss belongs to its forward
            with timeline.interval("F", timeline.last_micro("F")):
                return micro_batch_loss(logits, targets)

        schedule = TORCH_SCHEDULES[spec.option("schedule", "1f1b")]
        ctx.pipe_schedule = schedule(stage, n_microbatches=m, loss_fn=loss_fn)
        ctx.pipe_timeline, ctx.embedding_group = timeline, embedding_group(ctx)
        find_shapes(ctx.pipe_schedule, module, spec, ctx.device)
        return module

    def train_step(self, model, optimizer, micro_batches, ctx) -> float:
        optimizer.zero_grad(set_to_none=True)
        (inputs, targets), = split_micro_batches(micro_batches, 1)
        args = (inputs,) if model.is_first else ()
        losses = [] if model.is_last else None
        target = targets if model.is_last else None
        ctx.pipe_timeline.start()
        with autocast_for(ctx.spec.precision, ctx.device):
            ctx.pipe_schedule.step(*args, target=target, losses=losses)
        ctx.pipe_timeline.finish()
        with ctx.phase("sync"):
            tied_weight_sync(model, ctx.embedding_group, ctx)
        with ctx.phase("optimizer"):
            optimizer.step()
        loss = torch.stack(losses).mean().item() if losses else 0.0
        return share_loss(loss, ctx)
