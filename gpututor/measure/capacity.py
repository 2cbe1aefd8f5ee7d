"""A per-rank memory capacity (``RunSpec.device_memory``), enforced the way a GPU enforces it.

A GPU has so many bytes; a step that needs more fails with "CUDA out of memory". A CPU rank
has no such wall, so a lesson about memory could never fail. Here it can:

- **on CPU**, :class:`CapacityGuard` is the memory probe (:class:`LiveBytesProbe`) with a
  limit: it follows every tensor the step's ops create (and every storage resize), and the
  moment the bytes held (parameters, optimizer state and kept gradients, plus the step's live
  tensors) would pass the capacity it raises :class:`DeviceOutOfMemory`, naming the rank, the
  step, the phase and what held the memory at that moment. :func:`check_setup` does the same
  before the first step, for a model whose state alone does not fit.
- **on CUDA**, a capacity smaller than the GPU is watched by the same guard (the allocator's
  own limit counts its rounded blocks and cuBLAS's workspace: see :func:`cuda_capacity`); the
  GPU's real wall is the allocator's, and :func:`from_cuda_oom` turns the
  ``torch.cuda.OutOfMemoryError`` of a step into the same :class:`DeviceOutOfMemory`.

The guard counts tensor storages, not the allocator's rounding, fragmentation or workspaces: a
GPU of that size fails a little earlier than the guard does.
"""
from __future__ import annotations

import re
import weakref
from typing import Iterable, Optional

import torch

from ..formulas import MB
from .memory import LiveBytesProbe, local_tensor, optimizer_tensors, state_bytes, tensor_bytes


def megabytes(nbytes: float) -> str:
    """``51234567`` -> ``"51.2 MB"`` (MB = 10^6 bytes, as in ``device_memory="48MB"``)."""
    return f"{nbytes / MB:.1f} MB"


class DeviceOutOfMemory(RuntimeError):
    """A rank needed more memory than its capacity; the message reads like CUDA's OOM.

    Attributes: ``rank``, ``step``, ``phase`` ("setup", "forward", "backward", "optimizer",
    ...), ``held`` (the bytes it tried to hold), ``capacity``, ``device_memory`` (what the spec
    asked; None = the device's own size), ``categories`` (bytes of params, grads, optimizer
    state and, when known, buffers), ``phases`` (bytes of the step's live tensors, by the phase
    that created them).
    """

    def __init__(self, rank: int, step: int, phase: str, held: int, capacity: int,
                 device_memory: Optional[int] = None, categories: Optional[dict] = None,
                 phases: Optional[dict] = None, note: str = ""):
        self.rank, self.step, self.phase = rank, step, phase
        self.held, self.capacity, self.device_memory = held, capacity, device_memory
        self.categories = dict(categories or {})
        self.phases = dict(phases or {})
        self.note = note
        super().__init__(self._message())

    def _message(self) -> str:
        state = {name: self.categories.get(name, 0) for name in ("params", "grads", "optimizer")}
        if self.categories.get("buffers"):   # e.g. the GPT's causal mask
            state["buffers"] = self.categories["buffers"]
        step_tensors = self.held - sum(state.values())
        by_phase = ", ".join(f"{name} {nbytes / MB:.1f}" for name, nbytes in self.phases.items()
                             if nbytes)
        text = (f"rank {self.rank} ran out of memory at step {self.step} ({self.phase}): "
                f"tried to hold {megabytes(self.held)} ({self.held:,} bytes), "
                f"capacity {megabytes(self.capacity)} (device_memory={self.device_memory}); "
                "held by category: "
                + ", ".join(f"{name} {megabytes(nbytes)}" for name, nbytes in state.items())
                + f", activations/step tensors {megabytes(step_tensors)}"
                + (f" ({by_phase})" if by_phase else ""))
        return text + (f"; {self.note}" if self.note else "")

    def __reduce__(self):  # so it pickles (the default would call __init__ with the message)
        return (type(self), (self.rank, self.step, self.phase, self.held, self.capacity,
                             self.device_memory, self.categories, self.phases, self.note))


# ---- CPU: the probe, with a limit ------------------------------------------------------------

class CapacityGuard(LiveBytesProbe):
    """:class:`LiveBytesProbe` that raises :class:`DeviceOutOfMemory` past ``capacity`` bytes.

    The baseline is what the rank holds when the step starts: ``params``, ``buffers``,
    ``optimizer`` state, and ``grads`` kept from the last step. Kept gradients are usually
    dropped by ``zero_grad`` at once; the guard notices when they are freed, so they do not
    count for the rest of the step. Everything else works as in the probe: ``peak``,
    ``at_peak`` and ``forward_end`` are measured the same way.

        with CapacityGuard.for_step(48_000_000, rank, step, model, optimizer) as guard:
            ctx.probe = guard            # ctx.phase(...) tells it the phase
            strategy.train_step(model, optimizer, micro_batches, ctx)
    """

    def __init__(self, capacity: int, rank: int, step: int, params: Iterable = (),
                 grads: Iterable = (), optimizer: Iterable = (), buffers: Iterable = (),
                 device_memory: Optional[int] = None):
        optimizer = [t for t in optimizer if isinstance(t, torch.Tensor)]
        buffers = [t for t in buffers if isinstance(t, torch.Tensor)]
        super().__init__([*params, *buffers, *optimizer])
        self.capacity, self.rank, self.step = capacity, rank, step
        self.device_memory = capacity if device_memory is None else device_memory
        self.optimizer_bytes = tensor_bytes(optimizer)
        self.buffer_bytes = tensor_bytes(buffers)
        self.kept_grads = 0
        for grad in grads:
            if isinstance(grad, torch.Tensor):
                self._keep_grad(local_tensor(grad).untyped_storage())
        self.peak = self.baseline

    @classmethod
    def for_step(cls, capacity: int, rank: int, step: int, model, optimizer,
                 device_memory: Optional[int] = None) -> "CapacityGuard":
        """A guard for one step of ``model`` and ``optimizer`` (the worker's baseline)."""
        params = list(model.parameters())
        return cls(capacity, rank, step, params=params, grads=[p.grad for p in params],
                   optimizer=optimizer_tensors(optimizer), buffers=list(model.buffers()),
                   device_memory=device_memory)

    def held(self) -> int:
        return self.baseline + sum(self.live.values())

    def _keep_grad(self, storage) -> None:
        key, nbytes = storage._cdata, storage.nbytes()
        if key in self.known:
            return
        self.known.add(key)
        self.baseline += nbytes
        self.kept_grads += nbytes
        self._finalizers.append(weakref.finalize(storage, self._drop_grad, key, nbytes))

    def _drop_grad(self, key, nbytes: int) -> None:   # a kept gradient was freed
        self.baseline -= nbytes
        self.kept_grads -= nbytes
        self.known.discard(key)

    def _update_peak(self) -> None:
        # the probe calls this after each op's outputs are tracked and after each storage
        # resize: the moment to check, like an allocator refusing the allocation
        super()._update_peak()
        self.check()

    def check(self) -> None:
        """Raise :class:`DeviceOutOfMemory` if the bytes held now are over the capacity."""
        held = self.held()
        if held > self.capacity:
            # params: the rest of the baseline (it also follows resizes of their storages)
            params = self.baseline - self.kept_grads - self.optimizer_bytes - self.buffer_bytes
            categories = {"params": params, "grads": self.kept_grads,
                          "optimizer": self.optimizer_bytes, "buffers": self.buffer_bytes}
            raise DeviceOutOfMemory(self.rank, self.step, self.phase, held, self.capacity,
                                    self.device_memory, categories, self.live)

    def __enter__(self):
        self.check()   # what the step starts with may already be too much
        return super().__enter__()


def check_setup(capacity: int, rank: int, step: int, model, optimizer,
                device_memory: Optional[int] = None) -> None:
    """Before the first step: raise :class:`DeviceOutOfMemory` (phase "setup") if the rank's
    parameters, gradients and optimizer state alone are over the capacity."""
    categories = state_bytes(model, optimizer)
    held = sum(categories.values())
    if held > capacity:
        raise DeviceOutOfMemory(rank, step, "setup", held, capacity,
                                capacity if device_memory is None else device_memory, categories)


# ---- CUDA: the real allocator ----------------------------------------------------------------

class PhaseTracker:
    """Remembers the phase of the step that is running (``ctx.phase`` tells it, as it tells the
    probe), so an OOM raised by the CUDA allocator can name it."""

    phase = "forward"

    def set_phase(self, phase: str) -> None:
        self.phase = phase


def cuda_capacity(device_memory: Optional[int], device: torch.device) -> int:
    """The capacity of a CUDA rank: ``device_memory`` when that is smaller than the GPU, else
    the GPU's total memory. The caching allocator is left uncapped: a cap on it
    (``set_per_process_memory_fraction``) limits *reserved* memory, which grows in 2 MiB and
    20 MiB blocks and holds cuBLAS's workspace (32 MiB on Hopper), so caps of tens of MB would
    fail every strategy whatever its tensors. A cap smaller than the GPU is watched by the same
    live-tensor guard as on CPU (:class:`CapacityGuard`, :func:`check_setup`)."""
    total = torch.cuda.get_device_properties(device).total_memory
    return device_memory if device_memory is not None and device_memory < total else total


_TRIED = re.compile(r"Tried to allocate ([\d.]+) (B|KiB|MiB|GiB|TiB)")
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def from_cuda_oom(error: BaseException, rank: int, step: int, phase: str, capacity: int,
                  device: torch.device, model=None, optimizer=None,
                  device_memory: Optional[int] = None) -> DeviceOutOfMemory:
    """The :class:`DeviceOutOfMemory` for a ``torch.cuda.OutOfMemoryError`` of a step: what
    PyTorch had allocated plus what it tried to allocate, by category, and CUDA's own words."""
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    tried = _TRIED.search(str(error))
    tried = int(float(tried.group(1)) * _UNITS[tried.group(2)]) if tried else 0
    held = torch.cuda.memory_allocated(device) + tried
    categories = state_bytes(model, optimizer) if model is not None else {}
    return DeviceOutOfMemory(rank, step, phase, held, capacity, device_memory, categories,
                             note=f"CUDA said: {first_line}")
