"""Checks ``launch()`` makes in the calling process before any rank starts.

- :func:`check_main_guard`: ranks start from a forkserver, which imports the main script of the
  caller again in each rank. A script that calls ``launch()`` at top level, outside
  ``if __name__ == "__main__":``, would launch again in every rank (multiprocessing then stops
  with an error only the rank's stderr shows): said here, with the fix, before anything starts.
  A notebook kernel has no main script, so nothing is checked there.
- :func:`warn_if_oversubscribed`: more CPU ranks than usable cores is allowed (the lessons do it
  on purpose), but times then measure ranks taking turns: said as a warning, or in a notebook
  kernel as a grey note, once per kernel.
- :func:`check_machine`: what this machine can do for the spec (``device="cuda"`` needs a GPU
  per local rank; fp16 needs a GPU, bf16 on a GPU compute capability 8.0; a strategy's own
  device checks). A ``RunSpec`` checks only
  its values, so a spec for another machine (a cluster's, under torchrun) can be built here;
  the machine is checked where the ranks start: by ``launch()`` and by the command line, in each
  torchrun process for the ranks of its own node.
"""
from __future__ import annotations

import ast
import contextlib
import os
import sys
import warnings

from ..checks import InvalidValue
from ..hardware import usable_cpu_cores
from ..i18n import show, tr
from ..i18n.shown import in_notebook


def check_machine(spec, gpus: int | None = None) -> str:
    """The device ``spec``'s ranks on this machine train on ("cuda" or "cpu"), after checking
    that this machine can run them; ``ValueError`` names the field, the value and what is
    allowed here. ``gpus``: the GPUs visible (default: ask torch)."""
    from ..parallel import STRATEGIES
    if gpus is None:
        import torch
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if spec.device == "cuda":
        if gpus == 0:
            raise InvalidValue("device", spec.device, "'auto' or 'cpu' on this machine",
                               "here: no CUDA device is visible")
        if spec.first_gpu >= gpus:
            raise InvalidValue("first_gpu", spec.first_gpu, f"0 to {gpus - 1}",
                               f"here: this machine has {gpus} GPU(s)")
        if gpus - spec.first_gpu < spec.local_ranks:
            free = gpus - spec.first_gpu
            after = f" from GPU {spec.first_gpu} on" if spec.first_gpu else ""
            raise InvalidValue("world_size", spec.world_size,
                               f"at most {free} ranks per machine, or device='auto'/'cpu'",
                               f"with device='cuda': this machine has {free} GPU(s){after} and "
                               f"NCCL needs one per rank ({spec.local_ranks} here)")
    device = spec.resolved_device()
    if spec.precision == "fp16" and device != "cuda":
        # not a format question (torch computes fp16 on CPU, and lesson 06 trains in it with
        # GradScaler("cpu")): most x86 CPUs have no fp16 arithmetic, so a run would time emulation
        raise InvalidValue("precision", spec.precision, "'fp32' or 'bf16' here",
                           "on CPU: most x86 CPUs have no fp16 arithmetic, so PyTorch emulates it, "
                           "many times slower than fp32, and a run would measure the emulation "
                           "(lesson 06 measures this CPU's rate)")
    if spec.precision == "bf16" and device == "cuda" and gpus > 0:
        import torch
        major, minor = torch.cuda.get_device_capability(spec.first_gpu)
        if major < 8:   # as fsdp's option mixed_precision (``FSDP.check_device``)
            raise InvalidValue("precision", spec.precision, "'fp32' or 'fp16' on this GPU",
                               f"on a GPU of compute capability {major}.{minor}: bf16 arithmetic "
                               "needs 8.0 (Ampere) or newer")
    if spec.precision == "fp8":   # torchao loads; a GPU has FP8 tensor cores
        from ..precision.fp8_training import check_fp8
        check_fp8(device, spec.first_gpu if device == "cuda" and gpus > 0 else None)
    strategy = STRATEGIES.get(spec.strategy)   # (a task run may name none of them)
    if strategy is not None:
        strategy.check_device(spec, device)
    return device


def check_main_guard(what: str = "launch()") -> None:
    """Raise ``RuntimeError`` if ``what`` (``launch()``, ``gpututor.ranks()``) is being called
    from the top level of the main script outside ``if __name__ == "__main__":``, or from a main
    that is not a file."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or getattr(main, "__spec__", None) is not None:
        return   # a notebook, a REPL, or `python -m module` (imported by name, not by path)
    frame = sys._getframe(1)   # the script's own top-level frame, however deep the call
    while frame is not None and not (frame.f_globals.get("__name__") == "__main__"
                                     and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:
        return
    if not os.path.isfile(path):
        raise RuntimeError(
            f"{what} was called from {path!r}, which is not a file the ranks can import "
            "again (ranks start from a forkserver, which re-imports the main script): save "
            "the code to a .py file with the launch under `if __name__ == \"__main__\":`, or "
            "run it in a notebook")
    line = frame.f_lineno
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    example = "run = launch(spec)" if what == "launch()" else "group = gpututor.ranks(4)"
    if not any(_is_main_guard(node) and node.lineno <= line <= node.end_lineno
               for node in ast.walk(tree) if isinstance(node, ast.If)):
        raise RuntimeError(
            f"{what} is called at the top level of {os.path.basename(path)} (line {line}), "
            "outside `if __name__ == \"__main__\":`. Each rank starts by importing this script "
            "again, and would start its ranks again itself. Put it under the guard:\n\n"
            f"    if __name__ == \"__main__\":\n        {example}\n        ...")


def _is_main_guard(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "__name__" and len(test.comparators) == 1
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")


# the oversubscription notes this kernel has shown (one is enough); SILENT: inside
# cores_unsaid(), where sharing cores changes nothing the caller reports
NOTED: list[str] = []
SILENT: list[bool] = []


@contextlib.contextmanager
def cores_unsaid():
    """Launch without saying that ranks share cores (a dry run counts bytes, not time)."""
    SILENT.append(True)
    try:
        yield
    finally:
        SILENT.pop()


def warn_if_oversubscribed(spec) -> None:
    """Say when CPU ranks (times their threads) outnumber the usable cores: a ``UserWarning``
    outside a notebook; in a notebook kernel a grey note, once per kernel (a lesson that runs
    four ranks on a 2-core laptop would otherwise show the same pink box under every run)."""
    if spec.resolved_device() != "cpu":
        return
    cores, wanted = usable_cpu_cores(), spec.world_size * spec.threads_per_rank
    if wanted <= cores or SILENT:
        return
    text = tr("{wanted} threads ({world} ranks x {threads} per rank), more than the usable CPU "
              "cores ({cores}): the ranks will share cores and take turns, so each step takes "
              "longer and throughput and speedups measure the sharing, not the parallelism "
              "(losses and memory are unaffected)", wanted=wanted, world=spec.world_size,
              threads=spec.threads_per_rank, cores=cores)
    if not in_notebook():
        warnings.warn(text, stacklevel=3)
    elif not NOTED:
        NOTED.append(text)
        show(text, kind="note")
