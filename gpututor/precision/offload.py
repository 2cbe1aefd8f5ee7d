"""Adam with its state offloaded to host memory, from scratch (after Ren et al. 2021,
"ZeRO-Offload: Democratizing Billion-Scale Model Training", USENIX ATC [ref: ren2021-offload]).

Adam's state is larger than the model: per fp32 parameter it keeps two moments (8 bytes), and
mixed-precision training adds an fp32 master copy of the weights (4 bytes). ZeRO-Offload keeps
all of that in the host's (CPU's) memory and runs the update there. One step of
:class:`OffloadedAdam`:

1. each gradient is copied device -> host, into a host buffer made once for it;
2. the host runs an ordinary ``torch.optim.Adam`` on the fp32 master copies (so the update is
   torch's own, exactly);
3. each updated master is copied host -> device, into the parameter.

Bytes per fp32 parameter: **4 down + 4 up per step** cross the link (PCIe on a GPU machine), and
**12 stay on the host** (master 4 + moments 8), plus the 4-byte gradient buffer. The device keeps
only the parameters and gradients. (A bf16 model would move 2 + 2: ``copy_`` converts dtypes on
the host side, so the link carries the device tensor's own dtype.)

Pinned (page-locked) host buffers let CUDA copy without the host waiting; then the host must wait
before it reads what came down (PyTorch's guide on ``non_blocking`` and ``pin_memory()``), and a
copy going up must finish before the host writes that master again.

On a CPU-only machine the "device" *is* the host: the same three steps run and the bytes counted
are the bytes a GPU would move, but nothing leaves device memory and the copies are memcpys.
:meth:`device_state_bytes` says so: it counts the state that shares the parameter's memory.

Production twins: DeepSpeed's ZeRO-Offload (``"offload_optimizer": {"device": "cpu"}``), which
also overlaps the copies with backward and runs a vectorised CPU Adam; and FSDP2's
``fully_shard(..., offload_policy=CPUOffloadPolicy())``, which keeps the parameters on the host too.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch

from .. import checks
from ..checks import InvalidValue
from ..measure.memory import tensor_bytes
from ..measure.timing import synchronize

HYPERPARAMETERS = ("lr", "betas", "eps", "weight_decay")
DIRECTIONS = ("to_host", "to_device")


class OffloadedAdam(torch.optim.Optimizer):
    """``torch.optim.Adam`` whose fp32 master weights and moments live in host memory.

    ``pin_memory=None`` pins the host buffers of parameters on CUDA. ``on_transfer(nbytes,
    direction)`` is called in every step, once per direction (``"to_host"``, ``"to_device"``),
    with the bytes that crossed; a lesson uses it to emulate a slow link. ``self.state[p]`` holds
    ``master``, ``exp_avg``, ``exp_avg_sq`` and ``step``, all on the host. The master is copied
    from ``p`` when the optimizer is made and is the truth from then on: weights loaded into the
    model afterwards need the optimizer's ``load_state_dict`` too (it brings the masters).
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, pin_memory: Optional[bool] = None,
                 on_transfer: Optional[Callable[[int, str], None]] = None):
        checks.choice("pin_memory", pin_memory, (None, True, False))   # 1 is not True here
        if pin_memory and not torch.cuda.is_available():
            raise InvalidValue("pin_memory", pin_memory, "None or False",
                               "here: pinned host memory is for fast, asynchronous copies to and "
                               "from a CUDA device, and torch.cuda.is_available() is False")
        self.pin_memory, self.on_transfer = pin_memory, on_transfer
        self.bytes_moved = dict.fromkeys(DIRECTIONS, 0)        # every step so far
        self.last_step_bytes = dict.fromkeys(DIRECTIONS, 0)    # the latest step
        self._grad_buffers: dict[torch.Tensor, torch.Tensor] = {}   # parameter -> host gradient
        self._host_adam: Optional[torch.optim.Adam] = None     # made with the first group
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def add_param_group(self, param_group: dict) -> None:
        """As torch's; each new parameter also gets host buffers and a place in the host Adam."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        host_group = {"params": [self._make_host_state(p) for p in group["params"]],
                      **{k: group[k] for k in HYPERPARAMETERS}}
        if self._host_adam is None:
            self._host_adam = torch.optim.Adam([host_group],
                                               **{k: self.defaults[k] for k in HYPERPARAMETERS})
        else:
            self._host_adam.add_param_group(host_group)
        for p in group["params"]:   # the host Adam reads and writes the very same state dict
            self._host_adam.state[self.state[p]["master"]] = self.state[p]

    def _make_host_state(self, p: torch.Tensor) -> torch.Tensor:
        pin = p.device.type == "cuda" if self.pin_memory is None else self.pin_memory
        master = torch.empty(p.shape, dtype=torch.float32, pin_memory=pin)
        master.copy_(p.detach())
        self._grad_buffers[p] = torch.empty(p.shape, dtype=torch.float32, pin_memory=pin)
        # Allocated now, once, in the layout torch.optim.Adam makes for itself (its state_dict
        # shows these keys): it finds the state already there and uses it.
        self.state[p] = {"master": master, "step": torch.tensor(0.0),
                         "exp_avg": torch.zeros_like(master),
                         "exp_avg_sq": torch.zeros_like(master)}
        return master

    @torch.no_grad()
    def step(self, closure=None):
        """Gradients down, Adam on the host, weights up; parameters without gradient skipped."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        moved = dict.fromkeys(DIRECTIONS, 0)
        # (1) gradients, device -> host
        updated = []
        for group in self.param_groups:
            for p in group["params"]:
                master = self.state[p]["master"]
                if p.grad is None:      # no gradient: the host Adam skips its master too
                    master.grad = None
                    continue
                buffer = self._grad_buffers[p]
                buffer.copy_(p.grad, non_blocking=_is_async(p, buffer))
                master.grad = buffer
                moved["to_host"] += p.grad.nbytes
                updated.append(p)
        # The host must not read a gradient before its copy has landed. A device-wide sync also
        # waits for last step's uploads (any stream), which read the masters Adam now writes.
        for device in {p.device for p in updated}:
            synchronize(device)
        self._count(moved, "to_host")
        # (2) Adam on the host, with this optimizer's hyperparameters (a scheduler may change them)
        for outer, inner in zip(self.param_groups, self._host_adam.param_groups):
            inner.update({k: outer[k] for k in HYPERPARAMETERS})
        self._host_adam.step()
        # (3) updated weights, host -> device (queued; the next step's sync sees them finished)
        for p in updated:
            master = self.state[p]["master"]
            p.copy_(master, non_blocking=_is_async(p, master))
            moved["to_device"] += p.nbytes
        self._count(moved, "to_device")
        self.last_step_bytes = moved
        return loss

    def _count(self, moved: dict, direction: str) -> None:
        self.bytes_moved[direction] += moved[direction]
        if self.on_transfer is not None:
            self.on_transfer(moved[direction], direction)

    def load_state_dict(self, state_dict: dict) -> None:
        """As torch's, then back into the host buffers (torch's loader puts state on the
        parameter's device, in its dtype: exact for fp32 parameters)."""
        host = dict(self.state)
        for device in {p.device for p in host}:
            synchronize(device)         # no upload may still be reading a master
        super().load_state_dict(state_dict)
        for p, mine in host.items():
            for key, loaded in self.state[p].items():
                mine[key].copy_(loaded)
            self.state[p] = mine

    def host_state_bytes(self) -> int:
        """Bytes of optimizer state in host memory: masters, moments, step counters (12 per
        fp32 parameter, and a few)."""
        return tensor_bytes(t for s in self.state.values() for t in s.values()
                            if torch.is_tensor(t) and t.device.type == "cpu")

    def device_state_bytes(self) -> int:
        """Bytes of optimizer state in its parameter's own memory: 0 for parameters on CUDA; on
        CPU the device is the host, so all of :meth:`host_state_bytes`."""
        return tensor_bytes(t for p, s in self.state.items() for t in s.values()
                            if torch.is_tensor(t) and t.device == p.device)

    def host_gradient_bytes(self) -> int:
        """Bytes of the host gradient buffers (4 per parameter), beside the state."""
        return tensor_bytes(self._grad_buffers.values())


def _is_async(p: torch.Tensor, host: torch.Tensor) -> bool:
    """Copies between a CUDA tensor and pinned host memory can run without the host waiting."""
    return p.device.type == "cuda" and host.is_pinned()
