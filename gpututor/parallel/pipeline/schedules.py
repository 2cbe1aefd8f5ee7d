"""Pipeline parallel from scratch: cut the model into stages, pass micro-batches along.

Stage s of p holds consecutive transformer blocks (stage 0 also the embeddings; the last stage
also the final norm, the head and the loss). Forward sends each micro-batch's activations
``B/m x T x d`` to the next stage; backward sends the gradient with respect to them back. Those
point-to-point messages (``dist.isend`` / ``dist.recv``) are all the communication there is.

While stage 1 computes, stage 0 waits: the *bubble*. Schedules, for p stages and m micro-batches:

- ``naive``: the whole batch in one piece. Stage 0 forward, stage 1 forward, ..., then
  backward in reverse: at any moment one stage works and the others wait.
- ``gpipe`` (Huang et al. 2019, GPipe): split the batch into m micro-batches; run all m
  forwards, then all m backwards. Stages overlap; each is idle (p-1)/(m+p-1) of the time
  [ref: huang2019-bubble]. Every
  micro-batch's activations are alive at the end of the forwards: memory grows with m.
- ``1f1b`` (Narayanan et al. 2021, §2.2.1, PipeDream-Flush [ref: narayanan2021-1f1b]): warm-up
  with p-s-1 forwards, then
  alternate one forward and one backward, then cool down with the remaining backwards. Same
  bubble as GPipe, but stage s never holds more than p-s micro-batches' activations.
- ``interleaved-1f1b`` (Narayanan et al. 2021, §2.2.2 [ref: narayanan2021-interleaved]): each
  rank holds ``virtual_stages`` = v
  model chunks; the bubble shrinks to (p-1)/(v·m) of the ideal time (``interleaved.py``).

The gradients of all micro-batches add up in ``.grad``, and each micro-batch's loss is divided by
m, so a step equals one process's step on the whole batch. The stages themselves (and the tied
embedding's two copies) are in ``stages.py``; the production version is ``torch_pipelining.py``.
"""
from __future__ import annotations

import time
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.nn.parallel.distributed import _find_tensors

from ... import checks
from ...measure.timing import synchronize
from ..base import autocast_for
from .interleaved import InterleavedWorker, interleaved_1f1b
from .stages import (DEFAULT_SCHEDULE, DEFAULT_SENDS, SCHEDULES, SENDS, GPTChunks, PipelineStrategy, embedding_group,
                     microbatches, pipeline_options, share_loss, split_micro_batches,
                     tied_weight_sync)
from .timeline import StageTimeline


# ---- point-to-point messages and one stage's work ----------------------------------------------

class PointToPoint:
    """Activations forward to ``index+1``, gradients backward to ``index-1``.

    A send is queued, then goes out together with the stage's next receive
    (``dist.batch_isend_irecv``), or on its own just before the stage computes again,
    whichever comes first; either way it is complete before that compute starts (Megatron's
    default too). Why pair them: on NCCL a send holds its GPU stream until the neighbour
    receives it, and in 1F1B's steady state stage 0 sends an activation then waits for a
    gradient while stage 1 sends that gradient then waits for the activation: posted one by one,
    each would wait for the other. Megatron (``send_forward_recv_backward``) and torch's
    schedules pair them the same way.

    ``sends="post"`` (option ``sends``) changes one thing: a stage waits for what it receives,
    but not for what it sends; the sends' handles (and their tensors) are kept and waited for
    at the end of the step (:meth:`wait_posted`), as ``torch.distributed.pipelining``'s
    schedules do. With gloo a send completes only once the neighbour has received it, so under
    ``"wait"`` a stage can sit idle until its neighbour takes a message.
    """

    def __init__(self, ctx, sends: str = DEFAULT_SENDS):
        self.ctx, self.queued, self.posted = ctx, [], []
        self.wait_for_sends = sends == "wait"

    def send(self, tensor: torch.Tensor, dst: int) -> None:
        """Queue ``tensor`` for ``dst``; it goes out with the next exchange."""
        tensor = tensor.contiguous()
        self.queued.append(dist.P2POp(dist.isend, tensor, dst))
        self.ctx.comm.add(tensor.nbytes, 0.0, op="send", span=False)   # its time: exchange's

    def recv(self, shape, src: int, dtype=torch.float32) -> torch.Tensor:
        """The tensor ``src`` sends (the queued sends go out with it)."""
        tensor = torch.empty(shape, dtype=dtype, device=self.ctx.device)
        self.exchange([dist.P2POp(dist.irecv, tensor, src)])
        return tensor

    def flush(self) -> None:
        """Send what is queued now, before computing (the neighbour may be waiting for it)."""
        if self.queued:
            self.exchange([])

    def exchange(self, receives: list) -> None:
        """Post the queued sends and ``receives`` together; wait for all of them. The wait counts
        as exposed communication: it holds the transfer and any time the neighbour was still
        computing (the bubble)."""
        ops, self.queued = self.queued + receives, []
        synchronize(self.ctx.device)    # the compute queued before is not the wait's (GPU)
        start = time.perf_counter()
        works = dist.batch_isend_irecv(ops)
        # one handle per op (gloo); NCCL coalesces the batch into one handle, and then the
        # receives cannot be waited without the sends: wait for all
        apart = len(works) == len(ops) and not self.wait_for_sends
        for op, work in zip(ops, works) if apart else ((None, w) for w in works):
            if op is not None and op.op is dist.isend:
                self.posted.append((work, op.tensor))   # keep both: gloo loses a dropped send
            else:
                work.wait()             # on a GPU this only makes the stream wait: so
        synchronize(self.ctx.device)    # the clock stops when the messages are really here
        seconds = time.perf_counter() - start
        self.ctx.comm.busy_s += seconds
        self.ctx.comm.exposed_s += seconds
        if self.ctx.comm.timeline is not None:   # the hand-off and the wait for it, one span,
            #   with the bytes it waited for (posted sends: their wait_posted span's)
            waited_for = [op for op in ops if not (apart and op.op is dist.isend)]
            self.ctx.comm.timeline.add_ending_now(
                "collective", "send_recv", seconds, sum(op.tensor.nbytes for op in waited_for), 2)

    def wait_posted(self) -> None:
        """Send what is queued, then wait for every send posted without waiting (the end of a
        step); the wait counts as exposed communication."""
        self.flush()
        start = time.perf_counter()
        for work, _ in self.posted:
            work.wait()
        synchronize(self.ctx.device)
        nbytes = sum(tensor.nbytes for _, tensor in self.posted)
        self.posted = []
        seconds = time.perf_counter() - start
        self.ctx.comm.busy_s += seconds
        self.ctx.comm.exposed_s += seconds
        if self.ctx.comm.timeline is not None and nbytes:
            self.ctx.comm.timeline.add_ending_now("collective", "send_wait", seconds, nbytes, 2)


class StageWorker:
    """What one stage does for micro-batch ``i``: :meth:`forward` and :meth:`backward`. The
    schedules below only decide the order of these calls.

    ``model`` is the stage, or a ``DistributedDataParallel`` around it (a ``ddp+pp`` layout).
    Then every forward and backward runs without DDP's gradient sync except the step's last
    backward, before which DDP is told to expect it: that backward all-reduces the gradients
    all micro-batches have added up (as ``torch.distributed.pipelining``'s stages do).

    ``index`` is the stage's place in the pipeline (a model chunk's: its virtual stage). A
    schedule that receives ahead (``interleaved.py``) puts what it got into ``inbox`` and sets
    ``flush_before_compute=False``: its sends then wait for the schedule's next exchange.
    """

    def __init__(self, model, micro_batches: list, ctx, timeline: StageTimeline,
                 p2p: PointToPoint | None = None, flush_before_compute: bool = True):
        self.model, self.stage = model, getattr(model, "module", model)
        self.ddp = model if isinstance(model, DistributedDataParallel) else None
        self.index, self.count, self.peer = self.stage.pp.rank, self.stage.pp.size, \
            self.stage.pp.global_rank
        self.micro_batches, self.ctx, self.timeline = micro_batches, ctx, timeline
        self.p2p = p2p if p2p is not None else PointToPoint(ctx)
        self.flush_before_compute = flush_before_compute
        self.inbox = {}     # ("F" | "B", micro-batch) -> what a schedule received ahead
        self.autocast = autocast_for(ctx.spec.precision, ctx.device)
        self.saved = {}     # micro-batch -> (its input, its output), kept for backward
        self.losses = []    # last stage: each micro-batch's loss (already divided by m)
        self.backwards_left = len(micro_batches)

    def forward(self, i: int) -> None:
        inputs, targets = self.micro_batches[i]
        if self.stage.is_first:
            x = inputs
        else:   # the previous stage's activations; we will send their gradient back
            x = self.inbox.pop(("F", i), None)
            if x is None:
                x = self.p2p.recv((*inputs.shape, self.stage.d_model), self.peer(self.index - 1))
            x.requires_grad_()
        if self.flush_before_compute:
            self.p2p.flush()
        with self.timeline.interval("F", i, self.index), self.autocast, self._no_sync():
            out = self.model(x)
            if self.stage.is_last:   # the loss of this micro-batch, a 1/m share of the step's
                out = F.cross_entropy(out.flatten(0, 1).float(), targets.flatten())
                out = out / len(self.micro_batches)
                self.losses.append(out.detach())
        self.saved[i] = (x, out)
        if not self.stage.is_last:
            self.p2p.send(out.detach().float(), self.peer(self.index + 1))

    def backward(self, i: int) -> None:
        x, out = self.saved.pop(i)
        grad = None
        if not self.stage.is_last:
            grad = self.inbox.pop(("B", i), None)
            if grad is None:
                grad = self.p2p.recv(out.shape, self.peer(self.index + 1))
            grad = grad.to(out.dtype)
        if self.flush_before_compute:
            self.p2p.flush()
        self.backwards_left -= 1
        last = self.backwards_left == 0
        if last and self.ddp is not None:   # DDP all-reduces during this backward
            self.ddp.reducer.prepare_for_backward(list(_find_tensors(out)))
        with self.timeline.interval("B", i, self.index), \
                (nullcontext() if last else self._no_sync()):
            torch.autograd.backward(out, grad)
        if not self.stage.is_first:
            self.p2p.send(x.grad, self.peer(self.index - 1))

    def _no_sync(self):
        return self.ddp.no_sync() if self.ddp is not None else nullcontext()


# ---- the schedules: only the order of forward and backward differs ---------------------------

def naive(worker: StageWorker, m: int) -> None:
    """The whole batch as one micro-batch: forward through all stages, then backward."""
    worker.forward(0)
    worker.backward(0)


def gpipe(worker: StageWorker, m: int) -> None:
    """All m forwards, then all m backwards (activations of all m alive in between)."""
    for i in range(m):
        worker.forward(i)
    for i in range(m):
        worker.backward(i)


def one_f_one_b(worker: StageWorker, m: int) -> None:
    """1F1B: start backwards as early as possible, so fewer activations wait for them."""
    warmup = min(worker.count - worker.index - 1, m)
    # warm-up: fill the pipeline; stage s is p-s-1 forwards ahead of its first backward
    for i in range(warmup):
        worker.forward(i)
    # steady state: one forward, one backward; at most p-s micro-batches in flight here
    for i in range(m - warmup):
        worker.forward(warmup + i)
        worker.backward(i)
    # cool-down: no forwards left, drain the backwards
    for i in range(m - warmup, m):
        worker.backward(i)


SCHEDULE_FUNCTIONS = {"naive": naive, "gpipe": gpipe, "1f1b": one_f_one_b,
                      "interleaved-1f1b": interleaved_1f1b}


class _CallOrder:
    """Stands in for a :class:`StageWorker`: records the order of its forward and backward calls."""

    def __init__(self, index: int, count: int):
        self.index, self.count, self.calls = index, count, []

    def forward(self, i: int) -> None:
        self.calls.append(("F", i))

    def backward(self, i: int) -> None:
        self.calls.append(("B", i))


def call_order(schedule: str, stage: int, stages: int, m: int) -> list[tuple[str, int]]:
    """The ``("F" | "B", micro-batch)`` calls the schedule's function makes on stage ``stage``
    of ``stages`` with ``m`` micro-batches, in order."""
    order = _CallOrder(stage, stages)
    SCHEDULE_FUNCTIONS[schedule](order, m)
    return order.calls


def ideal_timeline(schedule: str, stages: int, m: int, forward: float = 1.0,
                   backward: float = 2.0) -> dict[int, list]:
    """``{stage: [(kind, micro_batch, start, end)]}``: the calls the schedule's own function
    (GPipe's or 1F1B's, above) makes on each stage, each started as soon as the stage is free and
    its input has arrived (a forward after the previous stage's forward of that micro-batch, a
    backward after the next stage's backward), a forward taking ``forward`` and a backward
    ``backward``, hand-offs free. Lesson 05 draws it: the picture is the code's order."""
    checks.choice("schedule", schedule, ("gpipe", "1f1b"))
    orders = {s: call_order(schedule, s, stages, m) for s in range(stages)}
    done, free, at = {}, [0.0] * stages, [0] * stages
    events = {s: [] for s in range(stages)}
    while any(at[s] < len(orders[s]) for s in range(stages)):
        moved = False
        for s in range(stages):
            while at[s] < len(orders[s]):
                kind, i = orders[s][at[s]]
                needs = (("F", s - 1, i) if kind == "F" and s > 0 else
                         ("B", s + 1, i) if kind == "B" and s < stages - 1 else None)
                if needs is not None and needs not in done:
                    break
                start = max(free[s], done.get(needs, 0.0))
                free[s] = done[(kind, s, i)] = start + (forward if kind == "F" else backward)
                events[s].append((kind, i, start, free[s]))
                at[s], moved = at[s] + 1, True
        if not moved:
            raise RuntimeError(f"schedule {schedule!r} waits forever on {stages} stages, m={m}")
    return events


# ---- the strategy ------------------------------------------------------------------------------

class PipelineParallel(PipelineStrategy):
    name = "pp"
    description = "from scratch: stages, send/recv, schedules naive / GPipe / 1F1B / interleaved"
    options, allowed = pipeline_options(SCHEDULES)
    options = {**options, "sends": checks.one_of(SENDS)}
    allowed = {**allowed, "sends": "one of " + ", ".join(SENDS) + ": wait for each send before "
                                   "computing again (Megatron's), or post it and go on (torch's)"}
    planned = True

    def wrap(self, model, ctx):
        stage = self.cut(model, ctx)
        ctx.embedding_group = embedding_group(ctx)
        return stage

    def train_step(self, model, optimizer, micro_batches, ctx, sync_data_parallel=None) -> float:
        """One step of the schedule; ``sync_data_parallel`` (a composed layout's) then averages
        the gradients over the data-parallel group, before the optimizer step."""
        optimizer.zero_grad(set_to_none=True)
        spec = ctx.spec
        m = microbatches(spec)
        timeline = StageTimeline(ctx)
        micro = split_micro_batches(micro_batches, m)
        p2p = PointToPoint(ctx, spec.option("sends", DEFAULT_SENDS))
        if isinstance(model, GPTChunks):   # interleaved: one worker per chunk, one P2P for all
            worker = InterleavedWorker(model, [
                StageWorker(chunk, micro, ctx, timeline, p2p, flush_before_compute=False)
                for chunk in model.chunks], p2p)
        else:
            worker = StageWorker(model, micro, ctx, timeline, p2p)
        timeline.start()
        SCHEDULE_FUNCTIONS[spec.option("schedule", DEFAULT_SCHEDULE)](worker, m)
        worker.p2p.wait_posted()
        timeline.finish()
        with ctx.phase("sync"):
            if sync_data_parallel is not None:
                sync_data_parallel()
            tied_weight_sync(worker.stage, ctx.embedding_group, ctx)
        with ctx.phase("optimizer"):
            optimizer.step()
        return share_loss(float(sum(worker.losses)) if worker.losses else 0.0, ctx)
