"""gpututor: learn to train on one device and on many, with live, measured runs.

The package's rooms, imports flowing one way (docs/architecture.md draws them):
``ui``, ``lessons`` → ``runtime`` → ``parallel``, ``precision``, ``compression`` → ``measure``
→ ``config``, ``models``, ``data``; ``plan`` stands beside them.
"""
from .runtime.warm import warm_up_in_kernel

warm_up_in_kernel()   # before torch is imported below: the forkserver imports it meanwhile

from .config import RunSpec  # noqa: E402
from .data import batches  # noqa: E402
from .models import build_model  # noqa: E402
from .runtime.launcher import Run, RunFailed, launch, warm_up  # noqa: E402

__all__ = ["RunSpec", "launch", "Run", "RunFailed", "warm_up", "build_model", "batches"]
__version__ = "0.1.0"
