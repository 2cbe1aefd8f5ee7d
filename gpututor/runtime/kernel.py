"""The "Python 3 (gpututor)" Jupyter kernel: ipykernel, with the ranks' forkserver started as the
kernel starts.

Every rank is forked from a forkserver that has imported torch and the worker (runtime/warm.py).
A fresh process needs about 2.5 s of one core for that here, and most of it is torch's own
import: ``torch`` itself, and ``torch._dynamo``, which torch imports the first time a model is
built (``nn.Embedding`` resets its weights through ``torch._disable_dynamo``). Started at
``import gpututor`` the forkserver is still importing when a lesson's first cell launches;
started here, while JupyterLab connects and the learner reads the first cells, it is ready.

It also shuts down cleanly. ipykernel's own shutdown sends SIGTERM to the kernel's children, but
multiprocessing's resource tracker ignores SIGTERM, so ipykernel kept waiting and jupyter_client
ended the kernel itself 2.5 s later with SIGTERM: exit code -15, no ``atexit`` work, and temp
folders left behind. Here the kernel first stops what gpututor started: the live ``%ranks``
groups and runs (runtime/live.py), then the forkserver and the resource tracker
(``warm.stop_forkserver``); it then exits by itself, code 0. Its own exit is made short too:
once everything registered for exit has run, the objects alive are frozen out of the
interpreter's last garbage collections (``gc.freeze``), which otherwise walk every object that
torch and its compiler created: 1.5-2.5 s of one busy core here, over jupyter_client's 2.5 s.

Nothing else differs from ipykernel's own "python3" kernel: the kernel is never forked, and
``GPUTUTOR_WARM_UP=0`` turns the early start off. The kernelspec
(``share/jupyter/kernels/gpututor/kernel.json``) is installed with the package; the lessons ask
for it by name and JupyterLab offers "Python 3 (ipykernel)" where it is missing.

Stdlib only until ipykernel: the ranks import this module again as their ``__mp_main__``.
"""
from __future__ import annotations

import atexit
import gc
import sys
from pathlib import Path

from . import live, warm

NAME = "gpututor"


def start_warming_up() -> bool:
    """Start the forkserver on a background thread unless ``GPUTUTOR_WARM_UP=0``; say if so."""
    if not warm.enabled():
        return False
    warm.start_in_background()
    return True


def stop_what_gpututor_started() -> None:
    """Stop live ``%ranks`` groups and runs, then the forkserver and the resource tracker."""
    try:
        for error in live.stop_all():
            print(f"gpututor: stopping at shutdown failed: {error!r}", file=sys.__stderr__)
    finally:
        warm.stop_forkserver()


def freeze_what_is_left() -> None:
    """Keep the interpreter's last garbage collections off every object alive now: registered
    first, this runs after all other exit work (ipykernel's, IPython's, a lesson's), and the
    memory goes back to the system when the process ends a moment later."""
    gc.freeze()


def kernel_class():
    """ipykernel's ``IPythonKernel``, stopping what gpututor started before its own shutdown.
    (Made here, not at import: the ranks import this module, and they import no ipykernel.)"""
    from ipykernel.ipkernel import IPythonKernel

    class GpututorKernel(IPythonKernel):
        def do_shutdown(self, restart):
            """Before ipykernel signals the kernel's children: nothing of ours is left."""
            try:
                stop_what_gpututor_started()
            except Exception:  # noqa: BLE001 - the kernel must still shut down
                self.log.exception("gpututor: stopping its processes at shutdown failed")
            return super().do_shutdown(restart)

    return GpututorKernel


def main(argv: list[str] | None = None) -> None:
    """ipykernel's ``launch_new_instance``, with the forkserver started first: its imports then
    run while ipykernel imports and sets itself up (about half a second) and while the first
    cells run. Started before ipykernel redirects this process's file descriptors, the
    forkserver and the ranks keep the kernel's own: what a rank's C++ code writes straight to
    them (not through Python's ``print``, which the launcher shows in the cell) goes to the
    Jupyter server's log, as a rank started from a terminal would."""
    start_warming_up()
    atexit.register(freeze_what_is_left)   # before ipykernel's: atexit runs the last one first
    from ipykernel.kernelapp import IPKernelApp
    app = IPKernelApp.instance(kernel_class=kernel_class())
    app.initialize(argv)
    app.start()


if __name__ == "__main__":
    if sys.path and (sys.path[0] == "" or Path(sys.path[0]) == Path.cwd()):
        del sys.path[0]   # as ipykernel_launcher does; IPython puts the cwd back at its init
    main()
