"""Start the ranks' forkserver as soon as ``import gpututor`` runs in a Jupyter kernel.

The forkserver imports what every rank needs once (:data:`PRELOAD`, about 2 s of one core
here: torch 1.0 s, ``torch._dynamo`` 0.9 s, the worker 0.15 s); every rank is then forked from
it. Started here, before this package imports torch itself, the forkserver's imports run on
another core while the kernel does its own, so the first ``launch()`` in a fresh kernel waits
much less; the lessons' kernel (runtime/kernel.py) starts it earlier still, at kernel start.
Only in an IPython kernel (a script pays for it only when it launches), only in the kernel's own
process (not in a rank or the forkserver, which import this package too), and not with
``GPUTUTOR_WARM_UP=0``. The kernel itself is never forked. Stdlib only: no torch here.

Set ``GPUTUTOR_WARM_UP=0`` in a kernel that also starts processes with ``torch.multiprocessing``
spawn right after importing gpututor: a spawn racing the forkserver's start from another thread
hung one time in three here (benchmarks/bench_peers.py sets it for the peers' kernels).

On CPython 3.10.0 to 3.10.8 the forkserver listens on an abstract Unix socket: it has no file
permissions, so any local user can connect and send it a pickle, which runs as you
(CVE-2022-42919, fixed in 3.10.9 and 3.11.0). There the ranks start with "spawn" instead (each
imports torch itself: slower, safe), nothing is warmed up, and one warning says why.

:func:`stop_forkserver` ends the forkserver and multiprocessing's resource tracker; the lessons'
kernel calls it as it shuts down (runtime/kernel.py).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import sys
import threading
import warnings

# What every rank imports before its first record, whatever its strategy (measured with
# benchmarks/first_record.py --imports): torch, gpututor's worker (preload.py imports it, and with
# it torch.distributed, DDP and the FLOP counter), and torch._dynamo although nothing compiles:
# torch imports it on the first call of a function it wraps in torch._disable_dynamo, such as
# Optimizer.add_param_group (every optimizer's constructor) and an op run under a dispatch mode
# (the worker's memory probe). torch._dynamo imports sympy, DTensor and FSDP too. Forked from
# here, a rank imports only what is its strategy's own: pipelining for pp-torch (0.02 s).
PRELOAD = ["torch", "torch._dynamo", "gpututor.runtime.preload"]
lock = threading.Lock()
_adopt_lock = threading.Lock()
SOCKET_PATH_MAX = 104   # bytes in a Unix socket's path, with its NUL: macOS's (Linux: 108)
STOP_TIMEOUT_S = 1.0   # how long a helper may take to exit once asked, before it is killed
_warned = False


def forkserver_is_safe() -> bool:
    """False on CPython 3.10.0 to 3.10.8, whose forkserver any local user can connect to."""
    return not (3, 10, 0) <= tuple(sys.version_info[:3]) <= (3, 10, 8)


def context(start_method: str = "forkserver"):
    """multiprocessing's context for ``start_method``, with the forkserver's imports set; "spawn"
    in place of "forkserver" where the forkserver is unsafe (see the module's docstring)."""
    if start_method == "forkserver" and not forkserver_is_safe():
        _warn_unsafe_forkserver()
        start_method = "spawn"
    ctx = mp.get_context(start_method)
    if start_method == "forkserver":
        adopt_multiprocessing_temp_dir()
        ctx.set_forkserver_preload(PRELOAD)
    return ctx


def adopt_multiprocessing_temp_dir() -> str | None:
    """Make multiprocessing's own temp folder (where the forkserver's socket lives) a marked
    ``gpututor-mp-*`` folder of this process (runtime/scratch_dirs.py), before multiprocessing
    makes its ``/tmp/pymp-*``: a killed kernel leaves its ``pymp-*`` behind with nothing to sweep
    it, while a marked folder whose owner is gone is removed by the next launch. Removed at a
    normal exit as multiprocessing removes its own. Only in a process that has none yet and is not
    itself a child of multiprocessing; returns the folder, or None where nothing was changed.
    (``_config["tempdir"]`` is where ``multiprocessing.util.get_temp_dir`` keeps it.)"""
    import multiprocessing.util as mp_util
    config = getattr(mp.current_process(), "_config", None)
    if not isinstance(config, dict) or mp.parent_process() is not None:
        return None
    with _adopt_lock:
        if config.get("tempdir") is not None:
            return None
        from .scratch_dirs import new_scratch_dir
        path = new_scratch_dir("gpututor-mp-")
        if len(os.path.join(path, "listener-12345678")) >= SOCKET_PATH_MAX:
            # the forkserver's socket must fit a Unix socket's path (108 bytes on Linux, 104 on
            # macOS): in a deep temp folder leave multiprocessing its own (shorter) pymp-* name
            shutil.rmtree(path, ignore_errors=True)
            return None
        mp_util.Finalize(None, shutil.rmtree, args=(path, True), exitpriority=-100)
        config["tempdir"] = path
        return path


def _warn_unsafe_forkserver() -> None:
    global _warned
    if not _warned:
        _warned = True
        version = ".".join(str(part) for part in sys.version_info[:3])
        warnings.warn(f"gpututor starts ranks with 'spawn', not 'forkserver', on Python {version}: "
                      "its forkserver accepts code from any local user (CVE-2022-42919, fixed "
                      "in 3.10.9); spawn is slower, upgrade Python to get the forkserver back",
                      RuntimeWarning, stacklevel=3)


def _noop() -> None:
    pass


def start_forkserver() -> None:
    """Start the forkserver (it runs PRELOAD) and wait until it has forked one process."""
    if not forkserver_is_safe():
        return   # the ranks start with spawn: there is no server to start
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
    if not forkserver_is_safe():
        _warn_unsafe_forkserver()
        return False
    start_in_background()
    return True


def stop_forkserver(timeout: float = STOP_TIMEOUT_S) -> None:
    """Stop the forkserver, then the resource tracker; kill one that is not gone ``timeout`` s
    later. A later launch starts them again.

    Both are multiprocessing's singletons, stopped with their private ``_stop()`` (what CPython's
    own tests use; CPython 3.10 to 3.13 have both), which closes the pipe the helper watches and
    waits for it: where one is missing this does nothing for it, and the process exits as it
    did before. The forkserver is terminated first (what ipykernel sends it too): asked
    politely, it needs 2-3 s to exit here, tearing down the torch it imported, and it holds
    nothing to save. The tracker goes last: the forkserver and the ranks it forked hold its
    pipe too, and it exits only once every holder has closed it (after unlinking what leaked)."""
    server = getattr(sys.modules.get("multiprocessing.forkserver"), "_forkserver", None)
    _stop_helper(server, getattr(server, "_forkserver_pid", None), timeout, terminate=True)
    tracker = getattr(sys.modules.get("multiprocessing.resource_tracker"), "_resource_tracker",
                      None)   # not imported: never started
    _stop_helper(tracker, getattr(tracker, "_pid", None), timeout, terminate=False)


def _stop_helper(helper, pid: int | None, timeout: float, terminate: bool) -> None:
    """``helper._stop()`` on a thread, so that a helper that does not exit can be killed."""
    stop = getattr(helper, "_stop", None)
    if pid is None or not callable(stop):
        return
    if terminate:
        _signal(pid, signal.SIGTERM)
    waiting = threading.Thread(target=stop, name="gpututor-stop-helper", daemon=True)
    waiting.start()
    waiting.join(timeout)
    if waiting.is_alive():
        _signal(pid, signal.SIGKILL)
        waiting.join(timeout)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
