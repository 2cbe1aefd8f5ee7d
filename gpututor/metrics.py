"""Per-step measurements: phase timers, communication meter, FLOPs, device peaks, summaries."""
from __future__ import annotations

import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from .comm_bench import bus_factor


def synchronize(device: torch.device) -> None:
    """Wait for queued device work, so wall-clock timers measure it (no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class CommMeter:
    """What the strategy's collectives did this step: bytes sent in, busy time, exposed wait."""

    bytes: int = 0           # data size S of each collective (nccl-tests' convention)
    busy_s: float = 0.0      # sum of collective durations (may overlap compute)
    exposed_s: float = 0.0   # time compute stood still waiting for communication
    emulated_s: float = 0.0  # delay added by an emulated link (parallel/link.py), if any
    calls: int = 0
    wire_bytes: float = 0.0  # what each rank sends with ring algorithms: S x bus factor
    world_size: int = 1

    def reset(self) -> None:
        self.bytes, self.busy_s, self.exposed_s, self.emulated_s, self.calls = 0, 0.0, 0.0, 0.0, 0
        self.wire_bytes = 0.0

    def add(self, nbytes: int, seconds: float, op: str = "all_reduce") -> None:
        """Count one collective ``op`` ("all_reduce", "all_gather", ...) of data size ``nbytes``."""
        self.bytes += nbytes
        self.wire_bytes += nbytes * bus_factor(op, self.world_size)
        self.busy_s += seconds
        self.calls += 1


@dataclass
class StepContext:
    """What a strategy gets for one rank: who it is, where it runs, and meters to fill."""

    spec: object
    rank: int
    world_size: int
    device: torch.device
    comm: CommMeter = field(default_factory=CommMeter)
    phases: dict = field(default_factory=dict)
    probe: object = None    # a memory.LiveBytesProbe on the step that measures memory
    after_backward: object = None  # set by a strategy that wants to know when backward ended
    link: object = None     # a parallel.link.EmulatedLink when the spec asks for one
    extra: dict = field(default_factory=dict)  # more keys for this step's record (e.g. a
                                               # pipeline's bubble_fraction and timeline)

    def __post_init__(self):
        self.comm.world_size = self.world_size

    @contextmanager
    def phase(self, name: str):
        """Time a phase of the step (forward, backward, optimizer, ...), device work included."""
        if self.probe is not None:
            self.probe.set_phase(name)
        synchronize(self.device)
        start = time.perf_counter()
        try:
            yield
        finally:
            synchronize(self.device)
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start

    def reset(self) -> None:
        self.comm.reset()
        self.phases = {}
        self.extra = {}


# Dense peak FLOP/s by device name, per precision. Sources: NVIDIA data sheets (A100: "NVIDIA
# A100 Tensor Core GPU" datasheet 2021, dense, no sparsity; H100/H200 SXM: "H100 Tensor Core GPU"
# and "H200" datasheets; V100: "Tesla V100" datasheet SXM2; T4 and L4 datasheets).
GPU_PEAK_FLOPS = {
    "H200": {"bf16": 989e12, "fp16": 989e12, "fp32": 67e12},
    "H100": {"bf16": 989e12, "fp16": 989e12, "fp32": 67e12},
    "A100": {"bf16": 312e12, "fp16": 312e12, "fp32": 19.5e12},
    "L4": {"bf16": 121e12, "fp16": 121e12, "fp32": 30.3e12},
    "V100": {"bf16": None, "fp16": 125e12, "fp32": 15.7e12},
    "T4": {"bf16": None, "fp16": 65e12, "fp32": 8.1e12},
}


def device_peak_flops(device: torch.device, precision: str):
    """The device's dense peak FLOP/s for ``precision`` if known, else None (e.g. any CPU)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, peaks in GPU_PEAK_FLOPS.items():
        if key in name:
            return peaks.get(precision)
    return None


def summarize(spec, records: list[dict], status: str = "finished") -> dict:
    """The run's JSON summary (shared/design.md contract) from all ranks' step records."""
    world = spec.world_size
    steps = sorted({r["step"] for r in records})
    by_step = {s: [r for r in records if r["step"] == s] for s in steps}
    complete = [s for s in steps if len(by_step[s]) == world]
    losses = [statistics.fmean(r["loss"] for r in by_step[s]) for s in complete]
    # steady state: after warm-up, and not the steps slowed down by counting FLOPs or memory
    first = steps[0] if steps else 0  # > 0 for a run resumed from a checkpoint
    steady = [s for s in complete if s >= first + spec.warmup_steps
              and not any(r.get("probe") for r in by_step[s])] or complete
    step_times = [max(r["step_time_s"] for r in by_step[s]) for s in steady]
    tokens = spec.batch_size * spec.seq_len
    per_rank = lambda key: [max((r[key] for r in records
                                 if r["rank"] == k and r.get(key) is not None), default=None)
                            for k in range(world)]

    def median(key, combine=statistics.fmean):
        """Median over steady steps of ``combine`` over ranks (steps where all ranks have it)."""
        values = [combine([r[key] for r in by_step[s]]) for s in steady
                  if all(r.get(key) is not None for r in by_step[s])]
        return statistics.median(values) if values else None

    return {
        "status": status,
        "strategy": spec.strategy,
        "model": spec.model,
        "model_size": spec.resolved_model_size,
        "world_size": world,
        "precision": spec.precision,
        "batch_size": spec.batch_size,
        "seq_len": spec.seq_len,
        "steps": len(complete),
        "first_step": first,
        "device": records[0]["device"] if records else spec.resolved_device(),
        "params": records[0]["params"] if records else None,
        "tokens_per_s": tokens * len(step_times) / sum(step_times) if step_times else None,
        "step_time_s": statistics.median(step_times) if step_times else None,
        "losses": losses,
        "final_loss": losses[-1] if losses else None,
        "peak_mem_bytes": per_rank("mem_peak"),
        "mem_by_category": {c: per_rank("mem_" + c) for c in
                            ("params", "grads", "optimizer", "activations")},
        "compute_s": median("compute_s"),
        "comm_s": median("comm_s"),
        "comm_bytes_per_step": median("comm_bytes"),
        "comm_wire_bytes_per_step": median("comm_wire_bytes"),
        "flops_per_step": max((r["flops"] for r in records if r.get("flops")), default=None),
        "achieved_flops": median("achieved_flops", combine=sum),  # all ranks together
        "mfu": median("mfu"),
        **({"bubble_fraction": median("bubble_fraction")}  # pipeline runs: measured idle share
           if any(r.get("bubble_fraction") is not None for r in records) else {}),
        "spec": {k: v for k, v in vars(spec).items()},
    }
