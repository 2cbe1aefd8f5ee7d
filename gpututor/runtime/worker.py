"""The code every rank runs, the same under ``launch()`` and under ``torchrun``.

``train()`` builds data, model and optimizer, lets the strategy wrap them, runs the steps and
calls ``emit(record)`` after each one: one flat dict of numbers per step per rank. Only ``emit``
differs between the notebook launcher (a pipe per rank to the kernel) and torchrun (gathered at
the end).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import ExitStack
from datetime import timedelta
from typing import Callable

import torch
import torch.distributed as dist
from torch.utils.flop_counter import FlopCounterMode

from ..hardware import usable_cpu_cores
from ..data import batches, load_corpus
from ..files import write_atomically
from ..measure.capacity import (CapacityGuard, PhaseTracker, check_setup, cuda_capacity,
                                from_cuda_oom)
from ..measure.flops import device_peak_flops, model_flops_per_token, uncounted_attention_flops
from ..measure.memory import LiveBytesProbe, optimizer_tensors, state_bytes
from ..measure.timing import StepContext, synchronize
from ..models import build_model, count_parameters
from ..parallel import get_strategy
from ..parallel.link import EmulatedLink
from ..parallel.mesh import RankGrid, build_groups
from ..parallel.meta import materialize
from .checkpoint import Checkpointer
from .rank_output import RankOutput, RecordPipe, dump_stack_on_request
from .scratch_dirs import remove_when_owner_gone, scratch_dir_of

load_corpus()  # read once here, so a forkserver that preloads this module has it in memory


NOT_COUNTED = {"params": None, "grads": None, "optimizer": None}
# a step's checkpoint figures: the save it started (its step, the seconds training waited for
# it; None where it started none), and the saves that finished by its end, each with its step,
# the whole save's seconds and the bytes this rank wrote (an asynchronous save finishes later)
CHECKPOINT_FIELDS = {"checkpoint_step": None, "checkpoint_blocked_s": None,
                     "checkpoint_written": []}


class InjectedFault(RuntimeError):
    """Raised on purpose by ``--inject-fault``, to show how a failing rank is reported."""


def rank_device(spec, local_rank: int) -> torch.device:
    """A CUDA rank's GPU: ``first_gpu + local_rank`` (``check_machine`` made sure it exists, one
    per rank: NCCL refuses two ranks on one GPU)."""
    if spec.resolved_device() == "cuda":
        return torch.device("cuda", spec.first_gpu + local_rank)
    return torch.device("cpu")


def init_process_group(spec, rank: int, world_size: int, device: torch.device, store=None):
    """gloo on CPU, NCCL on CUDA, with the spec's (short) timeout instead of 10-30 minutes.

    On CUDA the rank's GPU becomes the *current* device first: ``device_id`` binds NCCL's
    communicator to it, but tensors made without a device (``torch.empty(..., device="cuda")``,
    the object collectives' buffers, FSDP2's shards) go to the current device, which is
    ``cuda:0`` on every rank until ``set_device``; NCCL then refuses them on ranks >= 1."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    kwargs = {"store": store} if store is not None else {"init_method": "env://"}
    if device.type == "cuda":
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    dist.init_process_group(backend, rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=spec.timeout), **kwargs)


def rank_threads(spec, device: torch.device) -> int:
    """CPU threads for one rank: ``threads_per_rank`` for a CPU rank (1 by default: CPU ranks
    share the cores); a GPU rank gets its share of this machine's usable cores, so 8 ranks on
    16 cores start 8 x 2 threads, not 8 x 16."""
    if device.type == "cpu":
        return spec.threads_per_rank
    return max(1, usable_cpu_cores() // spec.local_ranks)


def train(spec, rank: int, world_size: int, device: torch.device,
          emit: Callable[[dict], None], start_time: float | None = None) -> None:
    """Train ``spec`` as ``rank`` of ``world_size``, emitting one record per step."""
    start_time = start_time or time.time()
    torch.set_num_threads(rank_threads(spec, device))
    strategy = get_strategy(spec.strategy)
    grid = RankGrid.of(spec, strategy.dims()[0])   # which ranks share which group
    ctx = StepContext(spec, rank, world_size, device, link=EmulatedLink.from_spec(spec),
                      grid=grid, groups=build_groups(grid, rank))
    ctx.comm.unmetered = not strategy.meters_comm   # torch's own collectives: not measured
    # The rank's memory capacity (spec.device_memory): a CapacityGuard watches each step when
    # a cap is asked, on CPU and on GPU alike (on a GPU the allocator is left uncapped: see
    # cuda_capacity); without one, nothing more runs per step, and a GPU's wall is its own.
    capacity = cuda_capacity(spec.device_memory, device) if device.type == "cuda" \
        else spec.device_memory
    # A strategy that keeps only part of the model gets it on "meta" (shapes, no memory) and
    # makes just its part: no rank ever holds the whole model (parallel/meta.py). The probe
    # measures the largest number of bytes alive during this setup (the corpus is read before:
    # it is data, not the model's memory).
    load_corpus(spec.corpus)
    with LiveBytesProbe() as setup:
        model = build_model(spec, meta=strategy.builds_on_meta)
        if not strategy.builds_on_meta:
            model = model.to(device)
        n_params = count_parameters(model)
        flops_per_token = model_flops_per_token(model, spec.seq_len)
        model_cfg = getattr(model, "cfg", None)
        model = materialize(strategy.wrap(model, ctx), device, spec.seed)
        optimizer = strategy.make_optimizer(model, spec)
    setup_peak = setup.peak
    start_step = 0
    saver = Checkpointer(spec, strategy, rank) if spec.checkpoint_every or spec.resume else None
    if spec.resume:  # continue where a checkpoint left off, in any layout (runtime/checkpoint.py)
        start_step = saver.load(model, optimizer, ctx)
    if spec.device_memory is not None:  # the model's state alone may not fit
        check_setup(capacity, rank, start_step, model, optimizer, spec.device_memory)
    dp_size, dp_rank = strategy.data_parallel_size(spec), strategy.data_parallel_rank(rank, spec)
    peak_flops = spec.peak_flops or device_peak_flops(device, spec.precision)
    # Step 0 creates the optimizer state and is what a learner waits for: measure after it.
    flop_step, probe_step = (min(start_step + k, spec.steps - 1) for k in (1, 2))
    fault = spec.fault
    flops = activations = probe_peak = None

    data = batches(spec, dp_rank, dp_size, start_step=start_step)
    for step, (inputs, targets) in enumerate(data, start=start_step):
        if fault is not None and fault.rank == rank and fault.step == step:
            if fault.hang:
                threading.Event().wait()  # hang forever: peers must notice and fail
            raise InjectedFault(f"injected fault: rank {rank} raises at step {step}")
        micro = list(zip(inputs.to(device).chunk(spec.grad_accum),
                         targets.to(device).chunk(spec.grad_accum)))
        run_step = lambda: strategy.train_step(model, optimizer, micro, ctx)
        ctx.reset()
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

        guard = step_guard(spec, device, capacity, rank, step, model, optimizer)
        try:
            loss, step_time, counted, probed = measured_step(
                run_step, ctx, model, optimizer, count_flops=step == flop_step,
                probe_memory=step == probe_step, guard=guard)
        except torch.cuda.OutOfMemoryError as exc:
            if device.type != "cuda":
                raise
            raise from_cuda_oom(exc, rank, step, getattr(ctx.probe, "phase", "step"), capacity,
                                device, model, optimizer, spec.device_memory) from exc
        saved = dict(CHECKPOINT_FIELDS, checkpoint_written=[])
        if spec.checkpoint_every and (step + 1) % spec.checkpoint_every == 0:
            saved = saver.save(model, optimizer, step,   # sync: all of it; async: the copy
                               getattr(ctx, "grad_scaler", None))
        if saver is not None:   # an asynchronous save's figures, once it has finished
            saved["checkpoint_written"] += saver.wait() if step == spec.steps - 1 \
                else saver.finished()
        if counted is not None:
            flops = counted + uncounted_attention_flops(model_cfg,
                                                        inputs.numel(), spec.seq_len, device)
        if probed is not None:
            activations, probe_peak = probed
        # One meaning on every device: the probe's peak of live tensor bytes during its step.
        # The CUDA allocator's own high-water mark (rounded blocks, workspaces) is another figure.
        allocator_peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
        # MFU counts the model's FLOPs (6·N·tokens + attention), not recomputation (PaLM, App. B);
        # model-parallel ranks (tp, pp) share one batch's work: each does dp/world of it
        model_flops = flops_per_token * inputs.numel() * dp_size / world_size
        emit({
            "rank": rank, "step": step, "loss": loss, "time": time.time() - start_time,
            # Model-state bytes are fixed once the optimizer state exists: counted (about 1 ms
            # for every tensor) on the first steps and the last, None ("not counted") between.
            **step_record(ctx, step_time, inputs.numel(),
                          state_bytes(model, optimizer) if step <= probe_step or
                          step == spec.steps - 1 else NOT_COUNTED),
            "mem_activations": activations, "mem_peak": probe_peak, "mem_setup_peak": setup_peak,
            "mem_allocator_peak": allocator_peak,
            "flops": flops, "achieved_flops": flops / step_time if flops else None,
            "model_flops": model_flops,
            "mfu": model_flops / step_time / peak_flops if peak_flops else None,
            "params": n_params, "device": str(device), "world_size": world_size,
            "probe": step in (flop_step, probe_step),  # slowed by measuring
            **{key: saved[key] for key in CHECKPOINT_FIELDS},
        })
    if saver is not None:
        saver.wait()

    if spec.save_state:  # for tests and by-hand comparison: the trained weights, by rank 0
        state = strategy.full_state_dict(model)
        if rank == 0:
            cpu = {k: v.detach().cpu() for k, v in state.items()}
            # beside the target, then renamed: a reader never sees half a file (files.py)
            write_atomically(spec.save_state, lambda f: torch.save(cpu, f), binary=True)


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


def step_record(ctx, step_time: float, tokens: int, mem: dict) -> dict:
    """The step's times, communication and model-state bytes, as record fields. What the
    communication meter could not measure (``CommMeter.unmetered``, ``exposed_unknown``) is
    None, and compute time with it: not measured, not 0."""
    measured = lambda value: None if ctx.comm.unmetered else value
    waited = lambda value: None if ctx.comm.exposed_unknown else measured(value)
    return {
        "step_time_s": step_time,
        "tokens_per_s": tokens / step_time,
        "compute_s": waited(step_time - ctx.comm.exposed_s),
        "comm_s": waited(ctx.comm.exposed_s),
        "comm_busy_s": measured(ctx.comm.busy_s),
        "comm_bytes": measured(ctx.comm.bytes),
        "comm_wire_bytes": measured(ctx.comm.wire_bytes),
        "emulated_comm_s": ctx.comm.emulated_s,
        **{f"{name}_s": seconds for name, seconds in ctx.phases.items()},
        **ctx.extra,
        "mem_params": mem["params"], "mem_grads": mem["grads"], "mem_optimizer": mem["optimizer"],
    }


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
        device = rank_device(spec, rank)
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
        sys.stdout.flush(), sys.stderr.flush()
        records.put(("done", rank, None))
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the notebook
        sys.stdout.flush(), sys.stderr.flush()
        records.put(("error", rank, {"type": type(exc).__name__, "message": str(exc),
                                   "traceback": traceback.format_exc()}))
        raise SystemExit(1)
    finally:
        if grouped:
            dist.destroy_process_group()


def use_loopback_only() -> None:
    """Ranks that launch() or %ranks start on this machine talk over loopback only: gloo's
    sockets (a concrete interface name: gloo rejects NCCL's ``^lo`` form), and NCCL's bootstrap
    and socket transport, which by default skip ``lo`` and listen on a real interface (NCCL's
    environment-variable docs, NCCL_SOCKET_IFNAME). Not under torchrun, where ranks on other
    nodes must be reached. Unauthenticated either way: see docs/architecture.md, trust model."""
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    os.environ["NCCL_SOCKET_IFNAME"] = "lo"


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
