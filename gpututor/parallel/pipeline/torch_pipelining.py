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
    interleaved_1f1b() with GPTChunks           ScheduleInterleaved1F1B: one PipelineStage per
                                                  chunk (stage_index r + j·p of p·v)
    (none)                                      ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble
    loss / m on the last stage                  loss_fn per micro-batch; gradients divided by
                                                  n_microbatches afterwards (scale_grads=True)

Zero bubble (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", §2 [ref: qi2024-split-backward])
splits each backward in two:
the gradient of the stage's input ("B", which the previous stage waits for) and of its weights
("W", which nobody waits for), and schedules the W passes into what would be the bubble.
``interleaved-zero-bubble`` is torch's ZB1P on Megatron's loop of chunks; ``zbv`` is ZB-V: two
chunks per rank in a V (rank r holds stages r and 2p-1-r, so rank 0 holds the first and the last
and computes the loss). Both run on CPU with gloo (torch 2.13) and equal one process.

What stays ours: the tied embedding's two copies (first and last stage) are summed after the
step exactly as in ``schedules.py``, and the timeline is measured by timing the stage's
``forward_one_chunk`` / ``backward_one_chunk`` and the loss, so this run reports a measured
``bubble_fraction`` too. PyTorch's own messages are not metered: ``comm_bytes_per_step``
counts only the tied embedding's sum.
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext

import torch
import torch.nn.functional as F

from ..base import autocast_for
from ..meta import materialize
from .stages import (DEFAULT_MICROBATCHES, GPTChunks, GPTStage, PipelineStrategy,
                     embedding_group, pipeline_options, share_loss, split_micro_batches,
                     tied_weight_sync)
from .timeline import StageTimeline

# schedule option -> the class in torch.distributed.pipelining, imported by the rank that runs
# one, not by ``import gpututor`` (the module imports torch._dynamo: over a second here)
TORCH_SCHEDULES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B",
                   "interleaved-1f1b": "ScheduleInterleaved1F1B",     # several stages per rank
                   "interleaved-zero-bubble": "ScheduleInterleavedZeroBubble",
                   "zbv": "ScheduleZBVZeroBubble"}
SPLIT_BACKWARD = ("interleaved-zero-bubble", "zbv")   # backward as input ("B") + weights ("W")


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


@contextmanager
def flop_counter_module_tracking_paused():
    """torch 2.13: the module tracker of an active ``FlopCounterMode`` (the worker counts one
    step's FLOPs) hooks into autograd at every module's inputs, and a zero-bubble schedule's
    input-only backward (``autograd.grad`` on the stage's received input, a leaf) then fails:
    "A leaf node was passed to _will_engine_execute_node but we are currently running
    autograd.grad(). This is currently not supported." Pause the tracker meanwhile: FLOPs are
    still counted, only their split by module (which the worker does not read) is lost."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    trackers = [mode.counter.mod_tracker for mode in _get_current_dispatch_mode_stack()
                if hasattr(getattr(mode, "counter", None), "mod_tracker")]
    for tracker in trackers:
        tracker.__exit__()
    try:
        yield
    finally:
        for tracker in trackers:
            tracker.__enter__()


def _timed(method, timeline: StageTimeline, kind: str, stage: int):
    """``method(chunk_id, ...)`` run inside a timeline interval of that micro-batch (torch
    calls a micro-batch a chunk) on stage ``stage``."""
    def run(chunk_id, *args, **kwargs):
        with timeline.interval(kind, chunk_id, stage):
            return method(chunk_id, *args, **kwargs)
    return run


def pipeline_stages(module, ctx, timeline: StageTimeline) -> list:
    """One ``PipelineStage`` per stage this rank holds (several with a chunked schedule), its
    forward and backward passes timed."""
    from torch.distributed import pipelining
    chunks = module.chunks if isinstance(module, GPTChunks) else [module]
    stages = []
    for chunk in chunks:
        stage = pipelining.PipelineStage(chunk, chunk.pp.rank, chunk.pp.size, ctx.device,
                              group=module.pp.group)
        # time the stage's compute (the schedule waits for messages outside these calls)
        for name, kind in (("forward_one_chunk", "F"), ("backward_one_chunk", "B"),
                           ("backward_weight_one_chunk", "W")):
            setattr(stage, name, _timed(getattr(stage, name), timeline, kind, chunk.pp.rank))
        stages.append(stage)
    return stages


class PipelineTorch(PipelineStrategy):
    name = "pp-torch"
    description = ("torch.distributed.pipelining: PipelineStage with ScheduleGPipe / 1F1B / "
                   "Interleaved1F1B / InterleavedZeroBubble / ZBVZeroBubble")
    meters_comm = False     # the stages' send/recv run inside torch, unmetered
    options, allowed = pipeline_options(tuple(TORCH_SCHEDULES))

    def wrap(self, model, ctx):
        spec = ctx.spec
        module = materialize(self.cut(model, ctx), ctx.device, spec.seed)  # PipelineStage: real
        m = spec.option("microbatches", DEFAULT_MICROBATCHES)
        timeline = StageTimeline(ctx)
        stages = pipeline_stages(module, ctx, timeline)

        def loss_fn(logits, targets):   # the last stage's loss belongs to its forward
            with timeline.interval("F", *timeline.last_event("F")):
                return micro_batch_loss(logits, targets)

        from torch.distributed import pipelining   # imported by pipeline_stages above
        schedule = getattr(pipelining, TORCH_SCHEDULES[spec.option("schedule", "1f1b")])
        ctx.pipe_schedule = schedule(stages if isinstance(module, GPTChunks) else stages[0],
                                     n_microbatches=m, loss_fn=loss_fn)
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
        split = ctx.spec.option("schedule") in SPLIT_BACKWARD
        with autocast_for(ctx.spec.precision, ctx.device), \
                (flop_counter_module_tracking_paused() if split else nullcontext()):
            ctx.pipe_schedule.step(*args, target=target, losses=losses)
        ctx.pipe_timeline.finish()
        with ctx.phase("sync"):
            tied_weight_sync(model, ctx.embedding_group, ctx)
        with ctx.phase("optimizer"):
            optimizer.step()
        loss = torch.stack(losses).mean().item() if losses else 0.0
        return share_loss(loss, ctx)
