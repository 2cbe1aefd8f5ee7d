"""Optional packages: importing torchao (an extra, ``gpututor[compress]``) without its noise."""
from __future__ import annotations

import logging
import warnings
from contextlib import contextmanager


@contextmanager
def quiet_import():
    """torchao logs warnings on import about GPU-only extensions a CPU build cannot load."""
    loggers = [logging.getLogger(n) for n in ("torchao", "torch.utils._pytree")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
