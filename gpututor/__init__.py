"""gpututor: learn to train on one device and on many, with live, measured runs."""
from .data import batches
from .launcher import Run, RunFailed, launch, warm_up
from .models import build_model
from .spec import RunSpec

__all__ = ["RunSpec", "launch", "Run", "RunFailed", "warm_up", "build_model", "batches"]
__version__ = "0.1.0"
