"""Pipeline parallel from scratch: cut the model into stages, pass micro-batches along.

Stage s of p holds consecutive transformer blocks (stage 0 also the embeddings; the last stage
also the final norm, the head and the loss). Forward sends each micro-batch's activations
``B/m x T x d`` to the next stage; backward sends the gradient with respect to them back. Those
point-to-point messages (``dist.isend`` / ``dist.recv``) are all the communication there is.

While stage 1 computes, stage 0 waits: the *bubble*. Schedules, for p stages and m micro-batches:

- ``naive``: the whole batch in one piece. Stage 0 forward, stage 1 forward, ..., then
  backward in reverse: at any moment one stage works and the others wait.
- ``gpipe`` (Huang et al. 2019, GPipe): split the batch into m micro-batches; run all m
  forwards, then all m backwards. Stages overlap; each is idle (p-1)/(m+p-1) of the time. Every
  micro-batch's activations are alive at the end of the forwards: memory grows with m.
- ``1f1b`` (Narayanan et al. 2021, PipeDream-Flush): warm-up with p-s-1 forwards, then
  alternate one forward and one backward, then cool down with the remaining backwards. Same
  bubble as GPipe, but stage s never holds more than p-s micro-batches' activations.

The gradients of all micro-batches add up in ``.grad``, and each micro-batch's loss is divided by
m, so a step equals one process's step on the whole batch. The token embedding is tied to the
head (GPT-2), and they now live on the first and the last stage: each keeps a copy, and after
backward the two copies' gradients are summed (Megatron's "embedding group"), so both take the
same step. The production version is ``pp_torch.py``.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from ..models import GPT, MODEL_SIZES
from ..timeline import StageTimeline
from .base import Strategy, _autocast

SCHEDULES = ("naive", "gpipe", "1f1b")
DEFAULT_SCHEDULE, DEFAULT_MICROBATCHES = "1f1b", 4


# ---- the stages --------------------------------------------------------------------------------

def block_range(n_layer: int, stage: int, stages: int) -> range:
    """The blocks stage ``stage`` holds: consecutive, as even as they go (the first get more)."""
    per, extra = divmod(n_layer, stages)
    start = stage * per + min(stage, extra)
    return range(start, start + per + (stage < extra))


class GPTStage(nn.Module):
    """Stage ``index`` of ``count`` of a :class:`~gpututor.models.GPT`: the pieces it owns,
    under the names they have in the whole model (so state dicts can be merged back)."""

    def __init__(self, model: GPT, index: int, count: int):
        super().__init__()
        self.is_first, self.is_last = index == 0, index == count - 1
        self.d_model = model.cfg.d_model   # width of the activations passed between stages
        self.activation_checkpointing = model.activation_checkpointing
        if self.is_first:
            self.tok_emb, self.pos_emb = model.tok_emb, model.pos_emb
        self.blocks = nn.ModuleDict({str(i): model.blocks[i]
                                     for i in block_range(model.cfg.n_layer, index, count)})
        if self.is_last:
            self.ln_f = model.ln_f
            if self.is_first:   # one stage: the tie stays as it is
                self.head = model.head
            else:               # the head's own copy of the tied weight (see tied_weight_sync)
                self.head = nn.Linear(model.cfg.d_model, model.cfg.vocab_size, bias=False)
                self.head.weight = nn.Parameter(model.tok_emb.weight.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Token ids (first stage) or activations in; activations or logits (last stage) out."""
        if self.is_first:
            x = self.tok_emb(x) + self.pos_emb(torch.arange(x.shape[1], device=x.device))
        for block in self.blocks.values():
            if self.activation_checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.head(self.ln_f(x)) if self.is_last else x

    def tied_weight(self) -> torch.Tensor | None:
        """This stage's copy of the embedding/head weight, if it holds one."""
        if self.is_first:
            return self.tok_emb.weight
        return self.head.weight if self.is_last else None


def embedding_group(stages: int):
    """The process group of the first and the last stage (every rank must call this)."""
    return dist.new_group([0, stages - 1]) if stages > 2 else None  # None: all ranks


def tied_weight_sync(stage: GPTStage, group, ctx) -> None:
    """Sum the gradients of the embedding's two copies, so both take the same step."""
    if stage.is_first == stage.is_last:   # one stage (nothing to do) or a middle stage
        return
    grad = stage.tied_weight().grad
    start = time.perf_counter()
    dist.all_reduce(grad, group=group)
    seconds = time.perf_counter() - start
    # an all-reduce of two ranks: each sends its copy's gradient once ("send" bus factor 1)
    ctx.comm.add(grad.numel() * grad.element_size(), seconds, op="send")
    ctx.comm.exposed_s += seconds


def gather_stages(stage: nn.Module) -> dict[str, torch.Tensor]:
    """The whole model's state dict, merged from every stage's (a collective)."""
    mine = {k: v.detach().cpu() for k, v in stage.state_dict().items()}
    parts = [None] * dist.get_world_size()
    dist.all_gather_object(parts, mine)
    merged = {k: v for part in parts for k, v in part.items()}
    if "head.weight" not in merged or "tok_emb.weight" not in merged:
        raise RuntimeError("the stages do not hold the whole model")
    return merged


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
    """

    def __init__(self, ctx):
        self.ctx, self.queued = ctx, []

    def send(self, tensor: torch.Tensor, dst: int) -> None:
        tensor = tensor.contiguous()
        self.queued.append(dist.P2POp(dist.isend, tensor, dst))
        self.ctx.comm.add(tensor.numel() * tensor.element_size(), 0.0, op="send")

    def recv(self, shape, src: int, dtype=torch.float32) -> torch.Tensor:
        """The tensor ``src`` sends (the queued sends go out with it)."""
        tensor = torch.empty(shape, dtype=dtype, device=self.ctx.device)
        self._exchange([dist.P2POp(dist.irecv, tensor, src)])
        return tensor

    def flush(self) -> None:
        """Send what is queued now, before computing (the neighbour may be waiting for it)."""
        if self.queued:
            self._exchange([])

    def _exchange(self, receives: list) -> None:
        """Post the queued sends and ``receives`` together; wait for all of them. The wait counts
        as exposed communication: it holds the transfer and any time the neighbour was still
        computing (the bubble)."""
        ops, self.queued = self.queued + receives, []
        start = time.perf_counter()
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        seconds = time.perf_counter() - start
        self.ctx.comm.busy_s += seconds
        self.ctx.comm.exposed_s += seconds


class StageWorker:
    """What one stage does for micro-batch ``i``: :meth:`forward` and :meth:`backward`. The
    schedules below only decide the order of these calls."""

    def __init__(self, stage: GPTStage, index: int, count: int, micro_batches: list, ctx,
                 timeline: StageTimeline):
        self.stage, self.index, self.count = stage, index, count
        self.micro_batches, self.ctx, self.timeline = micro_batches, ctx, timeline
        self.p2p = PointToPoint(ctx)
        self.autocast = _autocast(ctx.spec.precision, ctx.device)
        self.saved = {}     # micro-batch -> (its input, its output), kept for backward
        self.losses = []    # last stage: each micro-batch's loss (already divided by m)

    def forward(self, i: int) -> None:
        inputs, targets = self.micro_batches[i]
        if self.stage.is_first:
            x = inputs
        else:   # the previous stage's activations; we will send their gradient back
            x = self.p2p.recv((*inputs.shape, self.stage.d_model), self.index - 1).requires_grad_()
        self.p2p.flush()
        with self.timeline.interval("F", i), self.autocast:
            out = self.stage(x)
            if self.stage.is_last:   # the loss of this micro-batch, a 1/m share of the step's
                out = F.cross_entropy(out.flatten(0, 1).float(), targets.flatten())
                out = out / len(self.micro_batches)
                self.losses.append(out.detach())
        self.saved[i] = (x, out)
        if not self.stage.is_last:
            self.p2p.send(out.detach().float(), self.index + 1)

    def backward(self, i: int) -> None:
        x, out = self.saved.pop(i)
        grad = None if self.stage.is_last else \
            self.p2p.recv(out.shape, self.index + 1).to(out.dtype)
        self.p2p.flush()
        with self.timeline.interval("B", i):
            torch.autograd.backward(out, grad)
        if not self.stage.is_first:
            self.p2p.send(x.grad, self.index - 1)


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


SCHEDULE_FUNCTIONS = {"naive": naive, "gpipe": gpipe, "1f1b": one_f_one_b}


# ---- the strategy ------------------------------------------------------------------------------

def microbatches(spec) -> int:
    return 1 if spec.option("schedule", DEFAULT_SCHEDULE) == "naive" else \
        spec.option("microbatches", DEFAULT_MICROBATCHES)


def check_pipeline(spec, strategy: str) -> None:
    """Raise ``ValueError`` unless ``spec`` can be cut into ``world_size`` stages."""
    if spec.model != "gpt":
        raise ValueError(f"model={spec.model!r} is invalid for strategy={strategy!r}: allowed "
                         "is 'gpt' (a stack of blocks to cut into stages)")
    n_layer = MODEL_SIZES["gpt"][spec.resolved_model_size].n_layer
    if spec.world_size > n_layer:
        raise ValueError(f"world_size={spec.world_size} is invalid for strategy={strategy!r} "
                         f"with model_size={spec.resolved_model_size!r}: each stage needs at "
                         f"least one of its {n_layer} blocks (allowed: 1 to {n_layer})")
    if spec.precision == "fp16":
        raise ValueError(f"precision='fp16' is invalid for strategy={strategy!r}: loss scaling "
                         "across stages is not implemented; allowed: 'fp32' or 'bf16'")
    if spec.option("schedule") == "naive" and spec.option("microbatches", 1) != 1:
        raise ValueError(f"option microbatches={spec.option('microbatches')!r} is invalid with "
                         "schedule='naive' (it runs the whole batch at once): allowed is 1; "
                         "use schedule 'gpipe' or '1f1b' for micro-batches")
    m = microbatches(spec)
    if spec.batch_size % m:
        raise ValueError(f"batch_size={spec.batch_size} is invalid with microbatches={m}"
                         f"{' (the default)' if spec.option('microbatches') is None else ''}: "
                         f"allowed is a multiple of {m}")


def split_micro_batches(micro_batches: list, m: int) -> list:
    """The step's batch (as the worker chunked it) cut into the pipeline's m micro-batches."""
    inputs = torch.cat([x for x, _ in micro_batches])
    targets = torch.cat([y for _, y in micro_batches])
    return list(zip(inputs.chunk(m), targets.chunk(m)))


def share_loss(loss: float, ctx) -> float:
    """Only the last stage computed the loss: broadcast it, so every rank reports it."""
    value = torch.tensor([loss], dtype=torch.float64, device=ctx.device)
    dist.broadcast(value, src=ctx.world_size - 1)
    return value.item()


class PipelineParallel(Strategy):
    name = "pp"
    description = "from scratch: stages, send/recv, schedules naive / GPipe / 1F1B"
    options = {"schedule": lambda v: v in SCHEDULES,
               "microbatches": lambda v: isinstance(v, int) and not isinstance(v, bool)
               and 1 <= v <= 1024}
    allowed = {"schedule": "one of " + ", ".join(SCHEDULES),
               "microbatches": "an integer in [1, 1024]"}
    supports_checkpoint = False  # each rank holds its stage: no single-file checkpoint here yet

    def validate(self, spec) -> None:
        super().validate(spec)
        check_pipeline(spec, self.name)

    def data_parallel_size(self, spec) -> int:
        return 1   # every stage sees the whole batch (only the first uses the inputs)

    def data_parallel_rank(self, rank: int, spec) -> int:
        return 0

    def wrap(self, model, ctx):
        stage = GPTStage(model, ctx.rank, ctx.world_size).to(ctx.device)
        ctx.embedding_group = embedding_group(ctx.world_size)
        return stage

    def train_step(self, model, optimizer, micro_batches, ctx) -> float:
        optimizer.zero_grad(set_to_none=True)
        spec = ctx.spec
        m = microbatches(spec)
        timeline = StageTimeline(ctx)
        worker = StageWorker(model, ctx.rank, ctx.world_size,
                             split_micro_batches(micro_batches, m), ctx, timeline)
        timeline.start()
        SCHEDULE_FUNCTIONS[spec.option("schedule", DEFAULT_SCHEDULE)](worker, m)
        worker.p2p.flush()
        timeline.finish()
        with ctx.phase("sync"):
            tied_weight_sync(model, ctx.embedding_group, ctx)
        with ctx.phase("optimizer"):
            optimizer.step()
        return share_loss(float(sum(worker.losses)) if worker.losses else 0.0, ctx)

    def full_state_dict(self, model) -> dict:
        return gather_stages(model)
