"""gpututor: learn to train on one device and on many, with live, measured runs.

The package's rooms, imports flowing one way (docs/architecture.md draws them):
``ui``, ``lessons`` → ``runtime`` → ``parallel``, ``precision``, ``compression`` → ``measure``
→ ``config``, ``models``, ``data``; ``plan`` stands beside them.
"""
from .config import RunSpec
from .data import batches
from .models import build_model
from .runtime.launcher import Run, RunFailed, launch, warm_up

__all__ = ["RunSpec", "launch", "Run", "RunFailed", "warm_up", "build_model", "batches"]
__version__ = "0.1.0"
