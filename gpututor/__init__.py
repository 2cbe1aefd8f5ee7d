"""gpututor: learn to train on one device and on many, with live, measured runs.

The package's rooms, imports flowing one way (docs/architecture.md draws them):
``ui``, ``lessons`` → ``runtime`` → ``plan`` (which reads what each strategy says of itself)
→ ``parallel``, ``precision``, ``compression`` → ``measure`` → ``models``, ``data`` → the
ground floor: ``config``, ``catalog``, ``formulas``, ``hardware`` → ``checks``.

``import gpututor`` itself imports no torch: in a Jupyter kernel it first starts the ranks'
forkserver (runtime/warm.py), which then imports torch on another core while this process does
its own import, at the first name used from here (``from gpututor import RunSpec``).
"""
from importlib import import_module

from .runtime.warm import warm_up_in_kernel

warm_up_in_kernel()

_HOMES = {"RunSpec": ".config", "batches": ".data", "build_model": ".models",
          "launch": ".runtime.launcher", "Run": ".runtime.launcher",
          "RunFailed": ".runtime.launcher", "warm_up": ".runtime.launcher",
          "ranks": ".runtime.ranks"}
__all__ = list(_HOMES)
__version__ = "0.1.0"


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'gpututor' has no attribute {name!r}")
    value = getattr(import_module(_HOMES[name], __name__), name)
    globals()[name] = value   # once: later uses are plain lookups
    return value


def load_ipython_extension(shell) -> None:
    """``%load_ext gpututor``: the ``%ranks`` and ``%%ranks`` magics (runtime/ranks/magic.py)."""
    from .runtime.ranks.magic import register
    register(shell)


def unload_ipython_extension(shell) -> None:
    """``%unload_ext gpututor``: stop the magics' ranks."""
    from .runtime.ranks.magic import unregister
    unregister(shell)


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
