"""The "Python 3 (gpututor)" Jupyter kernel: ipykernel, with the ranks' forkserver started as the
kernel starts.

Every rank is forked from a forkserver that has imported torch and the worker (runtime/warm.py).
A fresh process needs about 2.5 s of one core for that here, and most of it is torch's own
import: ``torch`` itself, and ``torch._dynamo``, which torch imports the first time a model is
built (``nn.Embedding`` resets its weights through ``torch._disable_dynamo``). Started at
``import gpututor`` the forkserver is still importing when a lesson's first cell launches;
started here, while JupyterLab connects and the learner reads the first cells, it is ready.

Nothing else differs from ipykernel's own "python3" kernel: the kernel is never forked, and
``GPUTUTOR_WARM_UP=0`` turns the early start off. The kernelspec
(``share/jupyter/kernels/gpututor/kernel.json``) is installed with the package; the lessons ask
for it by name and JupyterLab offers "Python 3 (ipykernel)" where it is missing.

Stdlib only until ipykernel: the ranks import this module again as their ``__mp_main__``.
"""
from __future__ import annotations

import sys
from pathlib import Path

from . import warm

NAME = "gpututor"


def start_warming_up() -> bool:
    """Start the forkserver on a background thread unless ``GPUTUTOR_WARM_UP=0``; say if so."""
    if not warm.enabled():
        return False
    warm.start_in_background()
    return True


def main(argv: list[str] | None = None) -> None:
    """ipykernel's ``launch_new_instance``, with the forkserver started first: its imports then
    run while ipykernel imports and sets itself up (about half a second) and while the first
    cells run. Started before ipykernel redirects this process's file descriptors, the
    forkserver and the ranks keep the kernel's own: what a rank's C++ code writes straight to
    them (not through Python's ``print``, which the launcher shows in the cell) goes to the
    Jupyter server's log, as a rank started from a terminal would."""
    start_warming_up()
    from ipykernel.kernelapp import IPKernelApp
    app = IPKernelApp.instance()
    app.initialize(argv)
    app.start()


if __name__ == "__main__":
    if sys.path and (sys.path[0] == "" or Path(sys.path[0]) == Path.cwd()):
        del sys.path[0]   # as ipykernel_launcher does; IPython puts the cwd back at its init
    main()
