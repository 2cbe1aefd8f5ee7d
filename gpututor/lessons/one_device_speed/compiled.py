"""Lesson 01c's compilation measurement: ``torch.compile`` of a GPT's training step.

``torch.compile`` traces the model's Python into a graph (TorchDynamo), derives the backward
graph ahead of time (AOTAutograd) and hands both to TorchInductor, which **fuses** chains of
elementwise and reduction operators into single kernels: C++ loops on a CPU, Triton kernels on a
GPU (Ansel et al. 2024, "PyTorch 2", ASPLOS [ref: ansel2024-compile]). Eager PyTorch runs each
operator as its own kernel that reads its inputs from memory and writes its output back; a fused
kernel reads once and writes once. Matrix multiplies stay library calls (oneDNN/MKL here, cuBLAS on a GPU).

What is measured, in this process: the first compiled step (tracing + code generation + building
the C++ or Triton code: the **compile time**, plus, the first time in a process, one-time start-up
such as imports and Inductor's compile workers), a second compile of a fresh model of the same shape
(Inductor's caches make it shorter), the steady time of forward + backward eager and compiled
(median and the per-pair ratios, interleaved), and the generated code's kernel names, which say
what was fused.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import statistics
import tempfile
import time

import torch
import torch.nn.functional as F

from ...checks import InvalidValue
from ...data import batches
from ...models import build_model

# operators that only re-label memory (no kernel of their own in eager either)
VIEWS = {"view", "_unsafe_view", "transpose", "permute", "slice", "split", "expand", "squeeze",
         "unsqueeze", "select", "t", "reshape", "alias", "as_strided"}
KERNEL_NAME = re.compile(r"\b(?:cpp|triton_[a-z]{3})_fused_(\w+?)_(\d+)\b")


class CompilerMissing(RuntimeError):
    """``torch.compile`` cannot build kernels here: no C/C++ compiler on ``PATH``. Its fields say
    which: ``device_type`` ("cpu", "cuda"), ``kind`` ("C++" or "C") and ``looked_for`` (the
    environment variable and the names tried); the message is their English sentence."""

    def __init__(self, device_type: str):
        self.device_type = device_type
        self.kind = "C++" if device_type == "cpu" else "C"
        self.looked_for = (("CXX", "c++", "g++", "clang++") if device_type == "cpu"
                           else ("CC", "cc", "gcc", "clang"))
        super().__init__(
            f"torch.compile on {device_type} needs a {self.kind} compiler and none is on PATH "
            f"(looked for {', '.join(self.looked_for)}). Install one (Debian/Ubuntu: `apt install "
            "g++`; conda: `conda install -c conda-forge cxx-compiler`) and restart the kernel; the "
            "rest of this lesson runs without it.")


def compiler_for(device: torch.device) -> str | None:
    """The compiler Inductor would call for ``device``: a C++ compiler for CPU kernels, a C
    compiler for the launcher Triton builds on a GPU. ``None`` if none is on ``PATH``."""
    names = ("c++", "g++", "clang++") if device.type == "cpu" else ("cc", "gcc", "clang")
    preferred = os.environ.get("CXX" if device.type == "cpu" else "CC")
    for name in ((preferred,) if preferred else ()) + names:
        found = shutil.which(name)
        if found:
            return found
    return None


def require_compiler(device: torch.device) -> str:
    """The compiler's path, or :class:`CompilerMissing` saying what to install."""
    found = compiler_for(device)
    if found is None:
        raise CompilerMissing(device.type)
    return found


def fused_ops(kernel: str, vocabulary: set[str] | None = None) -> list[str]:
    """The operators a generated kernel's name lists, e.g. ``"cpp_fused_add_gelu_3"`` ->
    ``["add", "gelu"]``. Inductor names a kernel after the operators it fused, joined by
    underscores; operator names contain underscores too, so the longest known name is taken."""
    match = KERNEL_NAME.search(kernel)
    if not match:
        return []
    vocabulary = vocabulary if vocabulary is not None else set(dir(torch.ops.aten))
    tokens, ops, i = match.group(1).split("_"), [], 0
    while i < len(tokens):
        for j in range(len(tokens), i, -1):
            name = "_".join(tokens[i:j])
            if name in vocabulary or j == i + 1:
                if name:
                    ops.append(name)
                i = j
                break
    return list(dict.fromkeys(ops))


def kernels_in(code: list[str]) -> list[dict]:
    """One row per generated kernel: ``{"kernel", "ops", "computing_ops"}``, the last leaving
    out operators that only re-label memory (views, transposes, slices)."""
    vocabulary = set(dir(torch.ops.aten))
    names = dict.fromkeys(m.group(0) for text in code for m in KERNEL_NAME.finditer(text))
    rows = []
    for name in names:
        ops = fused_ops(name, vocabulary)
        rows.append({"kernel": name, "ops": ops, "computing_ops": [o for o in ops if o not in VIEWS]})
    return rows


def _loss(model, x, y):
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def _forward_backward(model, x, y) -> float:
    model.zero_grad(set_to_none=True)
    loss = _loss(model, x, y)
    loss.backward()
    return loss.item()


def _compiled_first_step(model, x, y) -> tuple[float, float, list[str], torch.nn.Module]:
    """Compile ``model`` and run its first step: (seconds, loss, generated code)."""
    try:
        from torch._inductor.utils import run_and_get_code   # torch's own test helper
    except ImportError:                                       # moved: measure without the code
        def run_and_get_code(fn, *args):
            return fn(*args), []
    compiled = torch.compile(model)
    start = time.perf_counter()                               # the import is not compile time
    loss, code = run_and_get_code(_forward_backward, compiled, x, y)
    return time.perf_counter() - start, loss, code, compiled


@contextlib.contextmanager
def _empty_caches():
    """Inductor's caches emptied for the block: its in-memory code caches (keyed by the generated
    source, so a new cache folder alone does not empty them; cleared as torch's own
    ``fresh_cache`` clears them) and a new, empty cache folder (``TORCHINDUCTOR_CACHE_DIR`` and
    ``TRITON_CACHE_DIR``). Unlike ``fresh_cache`` it leaves the in-memory caches filled after the
    block, so a later compile of the same graph in this process (lesson 01c, section 4) reuses them."""
    try:
        from torch._inductor.utils import clear_caches     # torch's own test helper
    except ImportError:                                     # moved: an empty folder, at least
        clear_caches = None
    if clear_caches is not None:
        clear_caches()
    names = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    saved = {name: os.environ.get(name) for name in names}
    with tempfile.TemporaryDirectory(prefix="gpututor-inductor-") as fresh:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = fresh
        os.environ["TRITON_CACHE_DIR"] = os.path.join(fresh, "triton")
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def speedup_range(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """The smallest and largest eager/compiled ratio over interleaved ``(eager_s, compiled_s)``
    pairs: when it straddles 1, this run cannot tell compiled from eager."""
    ratios = [e / c for e, c in pairs]
    return min(ratios), max(ratios)


def compile_costs(spec, steps: int = 8) -> dict:
    """Eager against ``torch.compile`` on ``spec``'s model, forward + backward of one batch.

    Returns ``compile_s`` (the first compiled step, compile included, with Inductor's caches
    emptied; the first time in a process it also holds one-time start-up: imports, compile
    workers), ``recompile_s`` (the same for a fresh model after ``torch._dynamo.reset()``, with
    the caches now filled: what they saved), ``eager_s`` and ``compiled_s`` (steady, median of
    ``steps`` interleaved), ``pairs`` (each interleaved ``(eager_s, compiled_s)``), ``speedup``
    (of the medians) and ``speedup_range`` (see :func:`speedup_range`), ``tokens_per_s`` per
    mode, ``kernels`` (see :func:`kernels_in`), ``loss`` per mode and ``max_grad_diff`` (largest
    gradient difference, eager against compiled, first step)."""
    if steps < 1:
        raise InvalidValue("steps", steps, "1 or more (at least 1 steady step is needed)")
    device = torch.device(spec.resolved_device())
    require_compiler(device)
    x, y = (t.to(device) for t in next(iter(batches(spec))))
    eager = build_model(spec).to(device)
    loss_eager = _forward_backward(eager, x, y)
    grads = [p.grad.clone() for p in eager.parameters()]

    # Inductor keeps its caches on disk (across processes) and in memory: empty both so that the
    # first compile is a cold one on every run (a rerun too), and the second shows what they saved.
    with _empty_caches():
        torch._dynamo.reset()               # a compile from scratch, not one left by earlier cells
        compile_s, loss_compiled, code, compiled = _compiled_first_step(
            build_model(spec).to(device), x, y)
        max_grad_diff = max((p.grad - g).abs().max().item()
                            for p, g in zip(compiled.parameters(), grads))
        torch._dynamo.reset()
        recompile_s, _, _, compiled = _compiled_first_step(build_model(spec).to(device), x, y)

    times = {"eager": [], "compiled": []}
    for _ in range(steps):                  # interleaved: drift on a shared machine hits both
        for mode, model in (("eager", eager), ("compiled", compiled)):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            _forward_backward(model, x, y)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times[mode].append(time.perf_counter() - start)
    eager_s, compiled_s = (statistics.median(times[m]) for m in ("eager", "compiled"))
    pairs = list(zip(times["eager"], times["compiled"]))
    tokens = x.numel()
    return {"compile_s": compile_s, "recompile_s": recompile_s, "eager_s": eager_s,
            "compiled_s": compiled_s, "pairs": pairs, "speedup": eager_s / compiled_s,
            "speedup_range": speedup_range(pairs),
            "tokens_per_s": {"eager": tokens / eager_s, "compiled": tokens / compiled_s},
            "kernels": kernels_in(code), "loss": {"eager": loss_eager, "compiled": loss_compiled},
            "max_grad_diff": max_grad_diff}
