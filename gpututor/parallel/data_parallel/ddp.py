"""Data parallel with PyTorch's ``DistributedDataParallel`` (the production API).

Every rank holds a full copy of the model and trains on its shard of the global batch. During
backward, DDP all-reduces gradients in buckets as soon as a bucket's gradients are ready, so
communication can overlap the rest of backward; after it, every rank holds the average gradient
and takes the same optimizer step. ``scratch.py`` builds the same thing from scratch
(``buckets.DataParallel``), and a test shows both match one process.

Buckets (torch 2.13, ``torch/nn/parallel/distributed.py``): on the first iteration every
gradient is in one bucket; after it DDP rebuilds the buckets in the order the gradients became
ready, the first one capped at ``dist._DEFAULT_FIRST_BUCKET_BYTES`` (1 MiB) and the others at
25 MiB, when ``bucket_cap_mb`` is left unset (our default). Set ``bucket_cap_mb`` and every
bucket, the first included, is capped at it. The hook records each step's buckets (bytes, and
how long before the last gradient each was launched: its chance to overlap backward) in the
step's record, ``ddp_buckets``.

Options (``RunSpec.options``): ``bucket_cap_mb``, ``comm_hook`` — "none", "fp16" or "bf16"
(torch's ``default_hooks``: each bucket cast to 16 bits, all-reduced, cast back: half the bytes
[ref: pytorch-ddp-comm-hooks-bf16]) or "powersgd" (torch's ``powerSGD_hook``: low-rank
compression, Vogels et al. 2019 [ref: vogels2019-powersgd], with ``powersgd_rank`` as its
``matrix_approximation_rank`` [ref: pytorch-ddp-comm-hooks-powersgd]) — and gradient
accumulation via the spec's ``grad_accum`` (DDP's ``no_sync`` on all but the last micro-batch).
Each hook runs inside the timed hook below, which counts the bytes the hook really all-reduces:
16-bit hooks 2 bytes an element; PowerSGD, once started, its ``P`` and ``Q`` matrices and the
tensors it leaves uncompressed (:func:`powersgd_bytes`, torch's own rule for which to compress).
All run on gloo (CPU) as on NCCL: the tests run each on CPU ranks. On an emulated link a bucket is
charged as a ring all-reduce per collective the hook runs: one, or, for PowerSGD once it
compresses, three one after another (the tensors it sends whole, the Ps, the Qs), each with its
own latency (``_HookState.collectives``).

Buffers: DDP broadcasts every buffer from rank 0 at each forward by default (for state such as
BatchNorm's running statistics). Our models' only buffers are constant causal masks, kept out of
the state dict (``persistent=False``): :func:`sync_buffers_kwargs` turns that per-step broadcast
off for a model whose buffers are all non-persistent: for the small GPT it was a blocking
collective of 256 KiB (four 256x256 masks) every step, measured against the default in
benchmarks/bench_efficiency.py.

What we measure: the bytes and duration of every bucket's communication (through the hook), and
the *exposed* communication: the time between the last gradient being computed and
``backward()`` returning, when compute waits for the last buckets.
"""

import inspect

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.nn.parallel import DistributedDataParallel as DDP

from ... import checks
from ...config import RUN_PRECISIONS
from ..base import MemoryLayout, Strategy
from ..link import LINK_ALLOWED, LINK_OPTIONS
from .buckets import BUCKET_CAP_MB, BUCKET_CAP_MB_ALLOWED
from .scratch import bucketed_all_reduces
from ...measure.timing import DeviceMark
from ..mesh import dim_group

COMM_HOOKS = ("none", "fp16", "bf16", "powersgd")
# PowerSGD all-reduces whole gradients for its first steps (torch's start_powerSGD_iter): steps
# 0 and 1 here, so a run's losses can differ from plain DDP's only from step 3 on
POWERSGD_START_ITER = 2


class DataParallelDDP(Strategy):
    name = "ddp"
    description = "torch DistributedDataParallel: full replica per rank, gradients all-reduced"
    options = {
        "bucket_cap_mb": BUCKET_CAP_MB,
        "comm_hook": checks.one_of(COMM_HOOKS),
        "powersgd_rank": checks.int_in(1, 64),
        **LINK_OPTIONS,
    }
    allowed = {"bucket_cap_mb": BUCKET_CAP_MB_ALLOWED,
               "comm_hook": "one of " + ", ".join(COMM_HOOKS),
               "powersgd_rank": "an integer in [1, 64]", **LINK_ALLOWED}
    # bucket_cap_mb unset: DDP's own default (a first bucket of 1 MiB, then 25 MiB)
    defaults = {"comm_hook": "none", "powersgd_rank": 1}
    precisions = RUN_PRECISIONS   # fp8: torchao's Float8 Linears (precision/fp8_training.py)
    memory_layout = MemoryLayout(bucket_copy=True,
                                 note="DDP's buckets are a second copy of the gradients "
                                      "(gradient_as_bucket_view=False, PyTorch's default)")
    planned = True

    def step_collectives(self, spec, model):
        if spec.world_size == 1:
            return []
        cap = self.option(spec, "bucket_cap_mb")
        if cap is not None:
            return bucketed_all_reduces(model, cap)
        return [("all_reduce", nbytes) for nbytes in default_bucket_bytes(model)]

    def wrap(self, model, ctx):
        spec = ctx.spec
        device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        dp = dim_group(ctx, "dp")
        ddp = DDP(model, device_ids=device_ids, bucket_cap_mb=self.option(spec, "bucket_cap_mb"),
                  process_group=dp.group, **sync_buffers_kwargs(model))   # None: DDP's default
        hook_state = _HookState(ctx.comm, spec, ctx.link, dp)
        ddp.register_comm_hook(hook_state, _timed_hook)
        _watch_last_gradient(ddp, ctx, hook_state)
        return ddp

    def no_sync(self, model):
        return model.no_sync()


FIRST_BUCKET_BYTES = getattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES", 2**20)   # 1 MiB in torch 2.13
BUCKET_BYTES = 25 * 2**20                                                  # bucket_cap_mb's 25


def default_bucket_bytes(model: torch.nn.Module) -> list[int]:
    """The buckets DDP rebuilds after its first iteration when ``bucket_cap_mb`` is unset, in
    the order they are sent: gradients taken in about the order backward makes them (the
    reverse of ``model.parameters()``), a bucket closed once it holds at least its cap (1 MiB
    for the first, 25 MiB after). An estimate for planning: the run records the real ones."""
    sizes, current = [], 0
    for p in reversed([p for p in model.parameters() if p.requires_grad]):
        current += p.nbytes
        if current >= (FIRST_BUCKET_BYTES if not sizes else BUCKET_BYTES):
            sizes.append(current)
            current = 0
    return sizes + [current] if current else sizes


def sync_buffers_kwargs(model: torch.nn.Module) -> dict:
    """DDP's arguments for syncing buffers: every forward if ``model`` has a persistent buffer
    (state that training may change), else never after DDP's start. torch 2.13 names this
    ``forward_sync_buffers``; before it, ``broadcast_buffers`` (which also skips the start)."""
    persistent = set(model.state_dict())
    if any(name in persistent for name, _ in model.named_buffers()):
        return {}
    if "forward_sync_buffers" in inspect.signature(DDP.__init__).parameters:
        return {"forward_sync_buffers": False}
    return {"broadcast_buffers": False}


class _HookState:
    """What the timed hook needs: the meter, the inner hook and its own state."""

    def __init__(self, meter, spec, link=None, dp=None):
        self.meter, self.link = meter, link
        self.pending = []   # (bytes, start mark, end mark) of this step's buckets
        self.launched = []  # (bucket index, its gradients' bytes, launch mark), in launch order
        self.group = dp.group if dp is not None else None
        self.size = dp.size if dp is not None else dist.get_world_size()
        self.kind = spec.option("comm_hook", "none")
        self.previous = None   # PowerSGD: the last bucket's future (see launch)
        self.rank = spec.option("powersgd_rank", 1)
        if self.kind == "powersgd":
            self.powersgd = powerSGD_hook.PowerSGDState(
                process_group=self.group, matrix_approximation_rank=self.rank,
                start_powerSGD_iter=POWERSGD_START_ITER)

    def launch(self, bucket) -> torch.futures.Future:
        if self.kind == "fp16":
            return default_hooks.fp16_compress_hook(self.group, bucket)
        if self.kind == "bf16":
            return default_hooks.bf16_compress_hook(self.group, bucket)
        if self.kind == "powersgd":
            # PowerSGD starts its P and Q all-reduces from callbacks; on gloo a callback runs
            # when the all-reduce before it has finished, so two buckets' chains could start
            # their collectives in a different order on each rank, and the ranks would wait
            # for each other forever: each bucket's chain starts after the last one has ended
            if self.previous is not None:
                self.previous.wait()
            self.previous = powerSGD_hook.powerSGD_hook(self.powersgd, bucket)
            return self.previous
        return default_hooks.allreduce_hook(self.group, bucket)

    def collectives(self, bucket) -> list[int]:
        """The bytes of each all-reduce the hook chains for ``bucket``, in order: one, except
        PowerSGD once it compresses, which all-reduces the tensors it sends whole, then every
        P, then every Q (torch's ``powerSGD_hook``): three, each paying the link's latency."""
        if not (self.kind == "powersgd"
                and self.powersgd.iter >= self.powersgd.start_powerSGD_iter):
            return [self.bytes_sent(bucket)]
        rate, whole, p, q = self.powersgd.min_compression_rate, 0, 0, 0
        for g in bucket.gradients():
            n = g.shape[0] if g.ndim > 1 else 0
            m = g.numel() // n if n else 0
            r = min(n, m, self.rank)
            if g.ndim > 1 and (n + m) * r * rate < n * m:
                p, q = p + n * r * g.element_size(), q + m * r * g.element_size()
            else:
                whole += g.nbytes
        return [whole, p, q]

    def bytes_sent(self, bucket) -> int:
        """Bytes this rank contributes to the collective(s) for ``bucket``."""
        numel = bucket.buffer().numel()
        if self.kind in ("fp16", "bf16"):
            return numel * 2
        if self.kind == "powersgd" and self.powersgd.iter >= self.powersgd.start_powerSGD_iter:
            rate = self.powersgd.min_compression_rate
            return sum(powersgd_bytes(g, self.rank, rate) for g in bucket.gradients())
        return numel * bucket.buffer().element_size()


def powersgd_bytes(grad: torch.Tensor, rank: int, min_rate: float = 2.0) -> int:
    """The bytes torch's ``powerSGD_hook`` all-reduces for one gradient once it has started: a
    tensor of 2+ dimensions seen as an n×m matrix (n its first dimension) is sent as P (n×r) and
    Q (m×r), r = min(n, m, rank), when that is smaller than n·m by more than ``min_rate``
    (torch's ``_should_compress``: (n+m)·r·min_rate < n·m); any other tensor, and every vector,
    is sent whole. Elements in the gradient's own dtype."""
    size = grad.element_size()
    if grad.ndim <= 1:
        return grad.numel() * size
    n, m = grad.shape[0], grad.numel() // grad.shape[0]
    r = min(n, m, rank)
    return (n + m) * r * size if (n + m) * r * min_rate < n * m else grad.numel() * size


def _timed_hook(state: _HookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Run the chosen hook, timed from launch to completion on the device's timeline (see
    ``DeviceMark``: on CUDA, events read after backward), and count its bytes."""
    nbytes = state.bytes_sent(bucket)
    start = DeviceMark(bucket.buffer().device)
    state.launched.append((bucket.index(), bucket.buffer().nbytes, start))

    def done(fut):
        state.pending.append((nbytes, start, DeviceMark(start.device)))
        result = fut.value()
        return result[0] if isinstance(result, list) else result

    future = state.launch(bucket)
    if state.link is not None:  # emulated slow link: complete later, by the modelled time,
        for part in state.collectives(bucket):   # one ring all-reduce (one latency) each
            future = state.link.then_delay(future, part, state.size, state.meter,
                                            start.device)
    return future.then(done)


WAIT_SPAN = "waiting on all-reduce"   # a timeline span inside backward: its last gradient to its end


def _watch_last_gradient(ddp: DDP, ctx, hook_state: _HookState) -> None:
    """Mark when each parameter's gradient is ready and when backward (with DDP's wait for
    the all-reduces) has ended: the span between the last gradient and that end is the
    communication compute waited for (with a timeline, a span :data:`WAIT_SPAN` inside
    ``backward``). Both are marks on the device's timeline."""
    state = {"last_grad": None}

    def grad_ready(_param):
        state["last_grad"] = DeviceMark(ctx.device)

    for p in ddp.module.parameters():
        if p.requires_grad:
            p.register_post_accumulate_grad_hook(grad_ready)

    def backward_done():
        end = DeviceMark(ctx.device)
        if state["last_grad"] is not None:
            ctx.comm.exposed_s += max(0.0, end.seconds_since(state["last_grad"]))
            if getattr(ctx, "timeline", None) is not None:   # backward's tail: no compute left
                ctx.timeline.add("compute", WAIT_SPAN, state["last_grad"], end)
            if hook_state.launched:   # this step's buckets, as DDP made them (see the top)
                # before_last_grad_s: 0 for a bucket launched at or after the last gradient;
                # launch_s: its launch mark, signed, from the last gradient's (the start of its
                # bar on the timeline: DDP launches the last bucket a little after that gradient)
                ctx.extra["ddp_buckets"] = [
                    {"index": index, "bytes": nbytes,
                     "before_last_grad_s": max(0.0, state["last_grad"].seconds_since(start)),
                     "launch_s": start.seconds_since(state["last_grad"])}
                    for index, nbytes, start in hook_state.launched]
            state["last_grad"] = None
        hook_state.launched.clear()
        for nbytes, start, finish in hook_state.pending:   # the buckets' own durations
            hook_state.meter.add(nbytes, finish.seconds_since(start), group_size=hook_state.size,
                                 start=start, end=finish)
        hook_state.pending.clear()

    ctx.after_backward = backward_done
