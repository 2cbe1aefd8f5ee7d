"""Lessons 01b's and 01c's measurements: one device used well. For 01b, recomputation policies,
8-bit optimizer state, offload and the largest model that fits a capacity; for 01c, all the
levers together, before and after.

Each function runs in this process, on one thread, and returns plain rows for ``ui.one_device``.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ... import checks
from ...model_sizes import MODEL_SIZES
from ...data import batches
from ...formulas import RECOMPUTE
from ...measure.capacity import CapacityGuard, DeviceOutOfMemory
from ...measure.memory import LiveBytesProbe
from ...models import MODEL_ONLY_RECOMPUTE, build_model, count_parameters
from ...precision.adam8bit import Adam8bit, state_bytes_per_param
from ...precision.offload import OffloadedAdam


def recomputation_costs(spec, policies=RECOMPUTE + MODEL_ONLY_RECOMPUTE, repeats: int = 3) -> list[dict]:
    """Per policy: what forward left for backward (bytes, probed), the step's time (fastest of
    ``repeats``, interleaved) and its gradients, which must not depend on the policy."""
    x, y = next(iter(batches(spec)))
    models = {p: build_model(spec, recompute=p) for p in policies}

    def step(model):
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()

    best = {p: float("inf") for p in policies}
    for _ in range(repeats):
        for p, model in models.items():
            start = time.perf_counter()
            step(model)
            best[p] = min(best[p], time.perf_counter() - start)
    rows = []
    for p, model in models.items():
        model.zero_grad(set_to_none=True)
        with LiveBytesProbe(list(model.parameters()) + list(model.buffers())) as probe:
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            probe.set_phase("backward")
            loss.backward()
        rows.append({"policy": p, "saved_bytes": probe.forward_end, "seconds": best[p],
                     "grads": [q.grad.detach().clone() for q in model.parameters()]})
    return rows


def train_with(spec, make_optimizer) -> dict:
    """Train the spec's model for ``spec.steps`` steps in this process; the trained model, its
    losses and the optimizer's state bytes per parameter at the end."""
    model = build_model(spec)
    optimizer = make_optimizer(model.parameters())
    losses = [_train_step(model, optimizer, x, y) for x, y in batches(spec)]
    return {"model": model, "losses": losses, "state_bytes_per_param": state_bytes_per_param(optimizer)}


def adam_fp32_vs_8bit(spec, lr: float | None = None) -> dict:
    """fp32 ``torch.optim.Adam`` and :class:`Adam8bit`, same model, data and steps."""
    lr = lr or spec.lr
    return {"Adam (fp32 state)": train_with(spec, lambda p: torch.optim.Adam(p, lr=lr)),
            "Adam, 8-bit state": train_with(spec, lambda p: Adam8bit(p, lr=lr))}


# ---- before and after: the levers together ---------------------------------------------------

# the lever "where the optimizer state is kept": fp32 Adam, or its 8-bit blocks (not
# RunSpec.optimizer's choices: these are one device's ways to hold the same Adam)
ADAM_STATE = {"adam": torch.optim.Adam, "adam8bit": Adam8bit}


@dataclass(frozen=True)
class Levers:
    """One way of training the same model on one device."""
    name: str
    attention: str = "naive"       # "naive" | "sdpa"
    optimizer: str = "adam"        # "adam" (fp32 state) | "adam8bit"
    recompute: str = "none"        # see gpututor.formulas.RECOMPUTE
    compile: bool = False          # torch.compile the model (the optimizer step stays eager)


BEFORE_AND_AFTER = (
    Levers("as in lesson 01"),
    Levers("+ SDPA attention", attention="sdpa"),
    Levers("+ 8-bit Adam state", attention="sdpa", optimizer="adam8bit"),
    Levers("+ torch.compile", attention="sdpa", optimizer="adam8bit", compile=True),
)


def _setup(spec, levers: Levers):
    spec = spec.replace(attention=levers.attention)
    model = build_model(spec, recompute=levers.recompute)
    checks.choice("optimizer", levers.optimizer, ADAM_STATE)
    optimizer = ADAM_STATE[levers.optimizer](model.parameters(), lr=spec.lr)
    return model, optimizer, (torch.compile(model) if levers.compile else model)


def _train_step(model, optimizer, x, y, probe=None) -> float:
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    if probe is not None:
        probe.set_phase("backward")
    loss.backward()
    if probe is not None:
        probe.set_phase("optimizer")
    optimizer.step()
    return loss.item()


def step_peak_bytes(model, optimizer, x, y, capacity: int | None = None) -> int:
    """Peak bytes of one training step (parameters, gradients, optimizer state, activations and
    temporaries), from the live-tensor probe; past ``capacity`` it raises ``DeviceOutOfMemory``."""
    with CapacityGuard.for_step(capacity or 2**62, 0, 1, model, optimizer) as guard:
        _train_step(model, optimizer, x, y, guard)
    return guard.peak


def before_and_after(spec, configs=BEFORE_AND_AFTER, steps: int = 6) -> list[dict]:
    """Per configuration: ``tokens_per_s`` (median of ``steps`` full steps, interleaved with
    the other configurations), ``peak_bytes`` (the second step, under the probe; ``None`` when
    compiled: the probe cannot see inside generated kernels) and the ``losses`` of the timed
    steps. Every configuration trains the same model from the same start on the same batch."""
    x, y = next(iter(batches(spec)))
    runs = []
    for levers in configs:
        model, optimizer, callable_model = _setup(spec, levers)
        _train_step(model, optimizer, x, y)                   # step 1 makes the optimizer state
        peak = step_peak_bytes(model, optimizer, x, y)       # step 2, eager, with that state
        _train_step(callable_model, optimizer, x, y)          # step 3: warm-up (and compile)
        runs.append({"name": levers.name, "levers": levers, "model": callable_model,
                     "optimizer": optimizer, "peak_bytes": None if levers.compile else peak,
                     "seconds": [], "losses": []})
    for _ in range(steps):
        for run in runs:
            start = time.perf_counter()
            run["losses"].append(_train_step(run["model"], run["optimizer"], x, y))
            run["seconds"].append(time.perf_counter() - start)
    return [{"name": r["name"], "levers": r["levers"], "peak_bytes": r["peak_bytes"],
             "tokens_per_s": x.numel() / statistics.median(r["seconds"]), "losses": r["losses"]}
            for r in runs]


def loss_gaps(rows: list[dict]) -> dict[str, float]:
    """Per :func:`before_and_after` row after the first: the largest ``|loss - the row above's
    loss|`` over the timed steps. Each row adds one lever to the row above it
    (:data:`BEFORE_AND_AFTER`), so this is how far that one lever moved what was learned."""
    return {row["name"]: max(abs(a - b) for a, b in zip(row["losses"], above["losses"]))
            for above, row in zip(rows, rows[1:])}


MEMORY_LEVERS = (Levers("as in lesson 01"),
                 Levers("SDPA + 8-bit Adam + full recomputation", attention="sdpa",
                        optimizer="adam8bit", recompute="full"))


def largest_that_fits(spec, capacity: int, configs=MEMORY_LEVERS, sizes=None) -> list[dict]:
    """For each configuration and model size (smallest first): does one training step fit in
    ``capacity`` bytes of live tensors, enforced by :class:`CapacityGuard` (which counts tensor
    storages, not a GPU allocator's rounding, fragmentation or workspaces)? Rows
    ``{"name", "model_size", "parameters", "fits", "peak_bytes"}`` (``peak_bytes``: the step's
    peak when it fits, else what it tried to hold when it failed)."""
    sizes = sizes or tuple(MODEL_SIZES[spec.model])
    x, y = next(iter(batches(spec)))
    rows = []
    for levers in configs:
        for size in sizes:
            sized = spec.replace(model_size=size)
            model, optimizer, _ = _setup(sized, levers)
            try:   # two steps: the second holds the optimizer state the first one made
                peak = max(step_peak_bytes(model, optimizer, x, y, capacity) for _ in range(2))
                fits = True
            except DeviceOutOfMemory as oom:
                peak, fits = oom.held, False
            rows.append({"name": levers.name, "model_size": size, "fits": fits, "peak_bytes": peak,
                         "parameters": count_parameters(model)})
    return rows


# ---- offload: optimizer state in host memory --------------------------------------------------

def offload_costs(spec, link=None) -> dict:
    """``torch.optim.Adam`` on the device against :class:`OffloadedAdam`, trained side by side
    for ``spec.steps`` steps on the same batches, and, if ``link`` (a
    ``parallel.link.EmulatedLink``, e.g. ``scaled_link("pcie4", here)``) is given, an
    ``OffloadedAdam`` whose copies are each delayed to take ``link.send_seconds(bytes)``
    (α + bytes/β): an emulated host link (the delay is a sleep, reported as ``emulated_s``,
    never as measured).

    Per way: ``losses``, ``step_s`` (median full step over the steady steps: step 1, which also
    makes the optimizer state, is left out when there are more), ``bytes_per_step`` (to the host
    and to the device), ``emulated_s`` (sleep added per steady step), ``parameters`` and
    ``tensors`` (parameter tensors: each is copied on its own, once per direction)."""
    slept = []                                 # seconds the emulated link added, per copy

    def over_the_link(nbytes: int, direction: str) -> None:
        slept.append(link.send_seconds(nbytes))
        time.sleep(slept[-1])

    ways = {"Adam on the device": lambda p: torch.optim.Adam(p, lr=spec.lr),
            "Adam offloaded to the host": lambda p: OffloadedAdam(p, lr=spec.lr)}
    if link is not None:
        ways["offloaded, emulated link"] = lambda p: OffloadedAdam(p, lr=spec.lr,
                                                                  on_transfer=over_the_link)
    runs = {}
    for name, make in ways.items():
        model = build_model(spec)
        runs[name] = {"model": model, "optimizer": make(model.parameters()), "losses": [], "seconds": []}
    for x, y in batches(spec):
        for run in runs.values():             # interleaved: drift on a shared machine hits all
            start = time.perf_counter()
            run["losses"].append(_train_step(run["model"], run["optimizer"], x, y))
            run["seconds"].append(time.perf_counter() - start)
    out = {}
    for name, run in runs.items():
        opt = run["optimizer"]
        first = 1 if len(run["seconds"]) > 1 else 0          # steady steps: from the second on
        steady = run["seconds"][first:]
        out[name] = {"losses": run["losses"], "step_s": statistics.median(steady),
                     "bytes_per_step": dict(opt.last_step_bytes) if hasattr(opt, "last_step_bytes") else None,
                     "emulated_s": sum(slept[2 * first:]) / len(steady)   # two copies a step
                     if getattr(opt, "on_transfer", None) is over_the_link else 0.0,
                     "parameters": count_parameters(run["model"]),
                     "tensors": sum(1 for _ in run["model"].parameters())}
    return out
