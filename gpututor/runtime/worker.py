"""The code every rank runs, the same under ``launch()`` and under ``torchrun``.

``train()`` builds data, model and optimizer, lets the strategy wrap them, runs the steps and
calls ``emit(record)`` after each one: one flat dict of numbers per step per rank. Only ``emit``
differs between the notebook launcher (a pipe per rank to the kernel) and torchrun (gathered at
the end). What a record says, field by field, is runtime/record_fields.py.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist
from torch.utils.flop_counter import FlopCounterMode

from ..data import batches, load_corpus
from ..files import write_atomically
from ..measure.capacity import (CapacityGuard, DeviceOutOfMemory, PhaseTracker, check_setup,
                                cuda_capacity, from_cuda_oom)
from ..measure.flops import device_peak_flops, model_flops_per_token
from ..precision.fp8_training import to_fp8_training
from ..measure.memory import LiveBytesProbe, optimizer_tensors
from ..measure.timeline import Timeline
from ..measure.timing import StepContext, synchronize
from ..models import build_model, count_parameters
from ..parallel import get_strategy
from ..parallel.link import EmulatedLink
from ..parallel.mesh import RankGrid, build_groups
from ..parallel.meta import materialize
from .checkpoint import Checkpointer
from .joining import (init_process_group, keep_off_gpus, leave_together, rank_device,
                      rank_threads, use_loopback_only)
from .rank_output import RankOutput, RecordPipe, dump_stack_on_request
from .record_fields import FlopFields, MemoryFields, step_record
from .scratch_dirs import remove_when_owner_gone, scratch_dir_of

load_corpus()  # read once here, so a forkserver that preloads this module has it in memory


SETTLE_S = 10.0   # a failing rank waits at most this for an asynchronous save in flight

# a step's checkpoint figures: the save it started (its step, the seconds training waited for
# it; None where it started none), and the saves that finished by its end, each with its step,
# the whole save's seconds and the bytes this rank wrote (an asynchronous save finishes later)
CHECKPOINT_FIELDS = {"checkpoint_step": None, "checkpoint_blocked_s": None,
                     "checkpoint_written": []}


class InjectedFault(RuntimeError):
    """Raised on purpose by ``--inject-fault``, to show how a failing rank is reported."""


def train(spec, rank: int, world_size: int, device: torch.device,
          emit: Callable[[dict], None], start_time: float | None = None) -> None:
    """Train ``spec`` as ``rank`` of ``world_size``, emitting one record per step."""
    start_time = start_time or time.time()
    torch.set_num_threads(rank_threads(spec, device))
    strategy = get_strategy(spec.strategy)
    ctx = step_context(spec, strategy, rank, world_size, device)
    capacity = rank_capacity(spec, device)
    setup = set_up(spec, strategy, ctx, device)
    model, optimizer = setup.model, setup.optimizer
    saver = Checkpointer(spec, strategy, rank) if spec.checkpoint_every or spec.resume else None
    # continue where a checkpoint left off, in any layout (runtime/checkpoint.py)
    start_step = saver.load(model, optimizer, ctx) if spec.resume else 0
    if spec.device_memory is not None:  # the model's state alone may not fit
        check_setup(capacity, rank, start_step, model, optimizer, spec.device_memory)
    dp_size, dp_rank = strategy.data_parallel_size(spec), strategy.data_parallel_rank(rank, spec)
    # Step 0 creates the optimizer state and is what a learner waits for: measure after it.
    flop_step, probe_step = (min(start_step + k, spec.steps - 1) for k in (1, 2))
    flops = FlopFields(setup.flops_per_token, setup.model_cfg, spec, device, dp_size, world_size,
                       spec.peak_flops or one_peak(device, spec.precision))
    memory = MemoryFields(setup.peak_bytes, device, probe_step, spec.steps - 1)

    try:
        data = batches(spec, dp_rank, dp_size, start_step=start_step)
        for step, (inputs, targets) in enumerate(data, start=start_step):
            inject_fault(spec.fault, rank, step)
            micro = list(zip(inputs.to(device).chunk(spec.grad_accum),
                             targets.to(device).chunk(spec.grad_accum)))
            loss, step_time, counted, probed = step_within_capacity(
                lambda: strategy.train_step(model, optimizer, micro, ctx), ctx, capacity, step,
                model, optimizer, count_flops=step == flop_step,
                probe_memory=step == probe_step)
            saved = checkpoint_after(saver, ctx, step, model, optimizer)
            emit({
                "rank": rank, "step": step, "loss": loss, "time": time.time() - start_time,
                **step_record(ctx, step_time, inputs.numel(),
                              memory.state(step, model, optimizer)),
                **memory.fields(probed), **flops.fields(counted, step_time, inputs.numel()),
                "params": setup.params, "device": str(device), "world_size": world_size,
                "probe": step in (flop_step, probe_step),  # slowed by measuring
                **saved,
            })
        if saver is not None:
            saver.wait()
    except BaseException:
        if saver is not None:   # a save in flight finishes (a bounded wait) before the report
            saver.settle(SETTLE_S)
        raise
    if spec.save_state:  # for tests and by-hand comparison: the trained weights, by rank 0
        save_weights(strategy, model, rank, spec.save_state)


def step_context(spec, strategy, rank: int, world_size: int, device: torch.device) -> StepContext:
    """What the strategy gets for this rank: its place in the rank grid, its groups, the
    emulated link and the meters."""
    grid = RankGrid.of(spec, strategy.dims()[0])   # which ranks share which group
    ctx = StepContext(spec, rank, world_size, device, link=EmulatedLink.from_spec(spec),
                      grid=grid, groups=build_groups(grid, rank))
    ctx.comm.unmetered = not strategy.meters_comm   # torch's own collectives: not measured
    return ctx


def rank_capacity(spec, device: torch.device):
    """The rank's memory capacity in bytes (``spec.device_memory``; on a GPU at most its own
    size, see ``cuda_capacity``), or None on a CPU without a cap. A ``CapacityGuard`` watches
    each step when a cap is asked, on CPU and GPU alike; without one, nothing more runs per
    step, and a GPU's wall is its own."""
    return cuda_capacity(spec.device_memory, device) if device.type == "cuda" \
        else spec.device_memory


@dataclass
class Setup:
    """What a rank trains, and what its setup measured."""

    model: torch.nn.Module
    optimizer: object
    params: int              # the whole model's parameters
    flops_per_token: float   # the whole model's training FLOPs per token (6·N + attention)
    model_cfg: object        # the model's config (None for a model without one)
    peak_bytes: int          # the most bytes alive at once while it was set up


def set_up(spec, strategy, ctx: StepContext, device: torch.device) -> Setup:
    """Build the model, let the strategy wrap it, and make its optimizer, measuring the bytes.

    A strategy that keeps only part of the model gets it on "meta" (shapes, no memory) and makes
    just its part: no rank ever holds the whole model (parallel/meta.py)."""
    load_corpus(spec.corpus)   # read before the probe: it is data, not the model's memory
    with LiveBytesProbe() as probe:
        # fp8: torchao converts real modules, so an fp8 run builds the whole model first
        meta = strategy.builds_on_meta and spec.precision != "fp8"
        model = build_model(spec, meta=meta)
        if not meta:
            model = model.to(device)
        if spec.precision == "fp8":   # torchao's Float8 Linears (emulated off a CUDA GPU)
            to_fp8_training(model, emulate=device.type != "cuda",
                            all_gather=strategy.fp8_all_gather)
        params, model_cfg = count_parameters(model), getattr(model, "cfg", None)
        flops_per_token = model_flops_per_token(model, spec.seq_len)
        model = materialize(strategy.wrap(model, ctx), device, spec.seed)
        optimizer = strategy.make_optimizer(model, spec)
    return Setup(model, optimizer, params, flops_per_token, model_cfg, probe.peak)


def one_peak(device: torch.device, precision: str) -> float | None:
    """The peak MFU is taken against; None for fp8, whose Linears run at the FP8 peak and the rest
    at another: no one peak (torchtitan reports no MFU with Float8 [ref: torchtitan2024-float8])."""
    return None if precision == "fp8" else device_peak_flops(device, precision)


def inject_fault(fault, rank: int, step: int) -> None:
    """``--inject-fault``: raise (or hang, for peers to notice) on the fault's rank and step."""
    if fault is not None and fault.rank == rank and fault.step == step:
        if fault.hang:
            threading.Event().wait()  # hang forever: peers must notice and fail
        raise InjectedFault(f"injected fault: rank {rank} raises at step {step}")


def step_within_capacity(run_step, ctx: StepContext, capacity, step: int, model, optimizer,
                         count_flops: bool, probe_memory: bool):
    """:func:`measured_step` watched for the rank's memory capacity (:func:`step_guard`); a
    CUDA out-of-memory becomes a ``DeviceOutOfMemory`` naming the rank, step and phase."""
    spec, device = ctx.spec, ctx.device
    ctx.reset()
    if spec.timeline:   # this step's spans, on a clock anchored at its start
        ctx.timeline = ctx.comm.timeline = Timeline(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    guard = step_guard(spec, device, capacity, ctx.rank, step, model, optimizer)
    try:
        return measured_step(run_step, ctx, model, optimizer, count_flops=count_flops,
                             probe_memory=probe_memory, guard=guard)
    except torch.cuda.OutOfMemoryError as exc:
        if device.type != "cuda":
            raise
        raise from_cuda_oom(exc, ctx.rank, step, getattr(ctx.probe, "phase", "step"), capacity,
                            device, model, optimizer, spec.device_memory) from exc


def checkpoint_after(saver, ctx: StepContext, step: int, model, optimizer) -> dict:
    """Save a checkpoint after ``step`` if one is due; return the record's checkpoint fields
    (:data:`CHECKPOINT_FIELDS`), with the asynchronous saves that have finished meanwhile."""
    spec = ctx.spec
    saved = dict(CHECKPOINT_FIELDS, checkpoint_written=[])
    if spec.checkpoint_every and (step + 1) % spec.checkpoint_every == 0:
        saved = saver.save(model, optimizer, step,   # sync: all of it; async: the copy
                           getattr(ctx, "grad_scaler", None))
    if saver is not None:   # an asynchronous save's figures, once it has finished
        saved["checkpoint_written"] += saver.wait() if step == spec.steps - 1 \
            else saver.finished()
    return {key: saved[key] for key in CHECKPOINT_FIELDS}


def save_weights(strategy, model, rank: int, path: str) -> None:
    """The trained weights, whole, written by rank 0 to ``path`` (every rank takes part in
    gathering them)."""
    state = strategy.full_state_dict(model)
    if rank == 0:
        cpu = {k: v.detach().cpu() for k, v in state.items()}
        # beside the target, then renamed: a reader never sees half a file (files.py)
        write_atomically(path, lambda f: torch.save(cpu, f), binary=True)


def step_guard(spec, device: torch.device, capacity, rank: int, step: int, model, optimizer):
    """What watches a step for the memory capacity: with a cap (``device_memory``), the
    live-tensor ``CapacityGuard`` on every device (on a GPU too: see ``cuda_capacity``); without
    one, on CUDA a ``PhaseTracker`` that names the phase of a real out-of-memory; else None."""
    if spec.device_memory is not None:
        return CapacityGuard.for_step(capacity, rank, step, model, optimizer)
    return PhaseTracker() if device.type == "cuda" else None


def measured_step(run_step, ctx, model, optimizer, count_flops: bool, probe_memory: bool,
                  guard=None):
    """Run one step and time it; on the two measuring steps (they run slower) also count its
    FLOPs or probe its memory by category. Returns ``(loss, seconds, flops or None,
    (activation bytes, peak bytes) or None)``.

    ``guard`` watches the step for the memory capacity: a ``CapacityGuard`` where a cap is asked
    (a probe itself, so on the probing step it is the probe), else a ``PhaseTracker`` on CUDA,
    or None. It
    becomes ``ctx.probe``, so ``ctx.phase`` tells it the phase; after a failure ``ctx.probe``
    is still the one that watched."""
    flops = probed = None
    start = time.perf_counter()
    with ExitStack() as measuring:
        if count_flops:
            counter = measuring.enter_context(FlopCounterMode(display=False))
        if isinstance(guard, LiveBytesProbe):  # a CapacityGuard probes as it guards
            ctx.probe = measuring.enter_context(guard)
        elif probe_memory:  # tensors alive before the step (buffers, e.g. masks) are baseline
            baseline = [*model.parameters(), *model.buffers(), *optimizer_tensors(optimizer)]
            ctx.probe = measuring.enter_context(LiveBytesProbe(baseline))
        else:
            ctx.probe = guard
        loss = run_step()
        synchronize(ctx.device)   # the step's device work is done: its time is the step's
        ctx.read_phases()
    if count_flops:
        flops = int(counter.get_total_flops())
    if probe_memory:
        probed = (ctx.probe.forward_end, ctx.probe.peak)
    ctx.probe = None
    return loss, time.perf_counter() - start, flops, probed


# ---- entry point for launch(): one process per rank, started by the launcher -----------------

def rank_main(payload: bytes, rank: int, world_size: int, store_path: str, records: RecordPipe,
              control, start_time: float) -> None:
    """Run one rank for ``gpututor.launch``; report records, errors and the end to ``records``.

    ``payload`` is ``cloudpickle.dumps((spec, task))``; ``task`` None means "train".
    """
    import traceback

    import cloudpickle

    # Ctrl-C / "interrupt kernel" signals the whole process group; the kernel handles it and
    # stops the run, so a rank must not die of it half-way and report a confusing error.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_when_parent_goes(control, scratch_dir_of(store_path))
    use_loopback_only()
    # what this rank prints goes to the notebook, prefixed with the rank (rank_output.py)
    sys.stdout = RankOutput(records, rank, "stdout")
    sys.stderr = RankOutput(records, rank, "stderr")
    dump_stack_on_request(os.path.join(os.path.dirname(store_path), f"stack-rank{rank}.txt"))
    spec, task = cloudpickle.loads(payload)
    grouped = False
    try:
        device = keep_off_gpus(rank_device(spec, rank))
        # Always a process group, even of one rank: strategies such as DDP need one (as under
        # torchrun, where the CLI always creates it), and a 1-rank gloo group costs milliseconds.
        store = dist.FileStore(store_path, world_size)
        init_process_group(spec, rank, world_size, device, store=store)
        grouped = True
        emit = lambda rec: records.put(("record", rank, {"rank": rank, **rec}))
        if task is None:
            train(spec, rank, world_size, device, emit=emit, start_time=start_time)
        else:
            torch.set_num_threads(rank_threads(spec, device))   # as training does
            task(spec, rank, world_size, device, emit)
        leave_together(store, rank, world_size, spec.timeout)
        sys.stdout.flush(), sys.stderr.flush()
        records.put(("done", rank, None))
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the notebook
        sys.stdout.flush(), sys.stderr.flush()
        records.put(("error", rank, {"type": type(exc).__name__, "message": str(exc),
                                   "traceback": traceback.format_exc(),
                                   # an out-of-memory error's fields, for words in any language
                                   "error": exc if isinstance(exc, DeviceOutOfMemory) else None}))
        raise SystemExit(1)
    finally:
        if grouped:
            dist.destroy_process_group()


def _exit_when_parent_goes(control, folder: str | None) -> None:
    """A daemon thread that ends this rank when the kernel closes the control pipe or dies; if
    the kernel died, it removes the run's temp ``folder`` first (runtime/scratch_dirs.py)."""

    def watch():
        try:
            control.recv()
        except (EOFError, OSError):
            pass
        if folder is not None:
            remove_when_owner_gone(folder)
        os._exit(3)

    threading.Thread(target=watch, name="gpututor-parent-watch", daemon=True).start()
