"""Start the ranks' forkserver as soon as ``import gpututor`` runs in a Jupyter kernel.

The forkserver imports torch and the worker once (about 3 s of one core here: torch 1.3 s,
``torch._dynamo`` 1.2 s, which torch itself imports the first time a model is built); every
rank is then forked from it. Started here, before this package imports torch itself, the
forkserver's imports run on another core while the kernel does its own, so the first
``launch()`` in a fresh kernel waits much less; the lessons' kernel (runtime/kernel.py) starts
it earlier still, at kernel start. Only in an IPython kernel (a script pays for it only when it
launches), only in the kernel's own process (not in a rank or the forkserver, which import this
package too), and not with ``GPUTUTOR_WARM_UP=0``. The kernel itself is never forked. Stdlib
only: no torch here.

Set ``GPUTUTOR_WARM_UP=0`` in a kernel that also starts processes with ``torch.multiprocessing``
spawn right after importing gpututor: a spawn racing the forkserver's start from another thread
hung one time in three here (benchmarks/bench_peers.py sets it for the peers' kernels).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading

PRELOAD = ["torch", "torch.distributed", "torch.nn.parallel", "torch._dynamo",
           "torch.utils.flop_counter", "gpututor.runtime.preload"]  # preload.py imports the worker
lock = threading.Lock()


def context(start_method: str = "forkserver"):
    ctx = mp.get_context(start_method)
    if start_method == "forkserver":
        ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _noop() -> None:
    pass


def start_forkserver() -> None:
    """Start the forkserver (it runs PRELOAD) and wait until it has forked one process."""
    with lock:
        proc = context().Process(target=_noop)
        proc.start()
        proc.join()


def start_in_background() -> None:
    """:func:`start_forkserver` on a daemon thread: the caller goes on at once."""
    threading.Thread(target=start_forkserver, name="gpututor-warm-up", daemon=True).start()


def enabled() -> bool:
    """False when ``GPUTUTOR_WARM_UP=0`` asks for no early start."""
    return os.environ.get("GPUTUTOR_WARM_UP", "1") != "0"


def in_kernel() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def warm_up_in_kernel() -> bool:
    """Start the forkserver in the background if this is a kernel's own process; say if so."""
    if not enabled() or mp.parent_process() is not None or not in_kernel():
        return False
    start_in_background()
    return True
