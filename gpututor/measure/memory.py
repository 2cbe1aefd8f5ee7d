"""Measure memory by category: parameters, gradients, optimizer state, activations, peak.

Two tools, used the same way on CPU and GPU:

- :func:`state_bytes` adds up the storages of the tensors a run keeps between steps.
- :class:`LiveBytesProbe` watches every tensor the ops of one step create (a
  ``TorchDispatchMode``), keeps a running total of those still alive, and remembers the peak and
  which phase created what was alive at that moment. Tensors that existed before the step
  (parameters, optimizer state, kept gradients) are counted once as the baseline.

The probe costs time (a Python call per op), so the worker runs it on one step only.
"""
from __future__ import annotations

import gc
import sys
import weakref
from typing import Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


def is_dtensor(t) -> bool:
    """Whether ``t`` is a DTensor. Read from ``sys.modules``: until something imports
    torch.distributed.tensor (0.6 s; ``import gpututor`` does not) no tensor can be one."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(t, module.DTensor)


CATEGORIES = ("params", "grads", "optimizer", "activations")


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """What this rank really holds of ``t``: a DTensor (e.g. an FSDP2 parameter, its gradient
    and its optimizer state) holds only its local shard; any other tensor holds itself.
    (Reading ``_local_tensor`` runs no op, unlike ``to_local()``: safe inside the probe.)"""
    return t._local_tensor if is_dtensor(t) else t


def _storage_key(t: torch.Tensor):
    return local_tensor(t).untyped_storage()._cdata


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (views and tied weights count once):
    what a rank holds. One tensor's own size (a view's elements: what a collective sends) is
    PyTorch's ``t.nbytes``, ``numel() x element_size()``."""
    seen, total = set(), 0
    for t in tensors:
        if t is None or not isinstance(t, torch.Tensor) or local_tensor(t).is_meta:
            continue
        st = local_tensor(t).untyped_storage()
        if st._cdata not in seen:
            seen.add(st._cdata)
            total += st.nbytes()
    return total


def optimizer_tensors(optimizer) -> list[torch.Tensor]:
    return [v for state in optimizer.state.values() for v in state.values()
            if isinstance(v, torch.Tensor)]


def state_bytes(model: torch.nn.Module, optimizer) -> dict[str, int]:
    """Bytes held now by parameters, gradients and optimizer state of this rank."""
    params = list(model.parameters())
    return {
        "params": tensor_bytes(params),
        "grads": tensor_bytes(p.grad for p in params),
        "optimizer": tensor_bytes(optimizer_tensors(optimizer)) if optimizer else 0,
    }


def adamw_state_bytes(model: torch.nn.Module) -> int:
    """Bytes of the state ``torch.optim.AdamW`` holds for ``model`` after one step (zero
    gradients; the model's weights do not move): what the optimizer keeps, counted."""
    optimizer = torch.optim.AdamW(model.parameters())
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    return tensor_bytes(optimizer_tensors(optimizer))


class LiveBytesProbe(TorchDispatchMode):
    """Running total of live tensor bytes created during one step, split by the creating phase.

    Set :attr:`phase` to "forward", "backward" or "optimizer" as the step goes on. After the
    step, :attr:`peak` is the largest total seen (baseline included) and :attr:`at_peak` says
    how much of it each phase had created. :attr:`forward_end` is what the forward pass left
    alive for backward: the activations.

    Storages that grow or shrink in place (``UntypedStorage.resize_``, which FSDP2 uses to free
    and re-allocate gathered parameters without dispatching an op) are followed too: while the
    probe is active, ``resize_`` reports to it.
    """

    def __init__(self, baseline: Iterable[torch.Tensor] = ()):
        super().__init__()
        baseline = [t for t in baseline if isinstance(t, torch.Tensor)]
        self.known = {_storage_key(t) for t in baseline}
        self.baseline = tensor_bytes(baseline)
        self.live = {"forward": 0, "backward": 0, "optimizer": 0}
        self.sizes = {}  # storage key -> [phase that created it, its bytes now]
        self.phase = "forward"
        self.peak = self.baseline
        self.at_peak = dict(self.live)
        self.forward_end = 0
        self._finalizers = []
        self._resize = None

    def set_phase(self, phase: str) -> None:
        if self.phase == "forward" and phase != "forward":
            # Tensors in unreachable reference cycles wait for Python's cycle collector, which
            # runs when it likes: collect now, so what is counted is what backward can reach
            # (otherwise the same run reads differently from one try to the next).
            gc.collect()
            self.forward_end = self.live["forward"]
        self.phase = phase

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self._track(t)
        return out

    def _track(self, t: torch.Tensor) -> None:
        if local_tensor(t).is_meta:   # a shape without memory (a model not made yet)
            return
        st = local_tensor(t).untyped_storage()
        key = st._cdata
        if key in self.known:
            return
        self._add(st, key, st.nbytes())

    def _add(self, st, key, nbytes: int) -> None:
        self.known.add(key)
        phase = self.phase
        self.sizes[key] = [phase, nbytes]
        self.live[phase] = self.live.get(phase, 0) + nbytes  # any phase name, e.g. "sync"
        self._finalizers.append(weakref.finalize(st, self._free, key))
        self._update_peak()

    def _update_peak(self) -> None:
        total = self.baseline + sum(self.live.values())
        if total > self.peak:
            self.peak, self.at_peak = total, dict(self.live)

    def _free(self, key) -> None:
        phase, nbytes = self.sizes.pop(key)
        self.live[phase] -= nbytes
        self.known.discard(key)

    def _resized(self, st, before: int) -> None:
        key, after = st._cdata, st.nbytes()
        if key in self.sizes:                   # created in this step: it grew or shrank
            entry = self.sizes[key]
            self.live[entry[0]] += after - entry[1]
            entry[1] = after
            self._update_peak()
        elif key in self.known:                 # a baseline tensor's storage
            self.baseline += after - before
            self._update_peak()
        else:                                   # existed before the step, unseen until now
            self.baseline += before
            self._add(st, key, after)

    def __enter__(self):
        self._resize, probe = torch.UntypedStorage.resize_, self
        original = self._resize

        def resize_(storage, size):
            before = storage.nbytes()
            result = original(storage, size)
            probe._resized(storage, before)
            return result

        torch.UntypedStorage.resize_ = resize_
        return super().__enter__()

    def __exit__(self, *exc):
        torch.UntypedStorage.resize_ = self._resize
        for f in self._finalizers:
            f.detach()
        self._finalizers.clear()
        return super().__exit__(*exc)
