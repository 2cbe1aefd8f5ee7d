"""One resume decision for every rank of a restarted torchrun job.

Each rank reads the checkpoint folder for itself (``torchrun_attempt``), before any process
group exists, and compares ``.metadata``'s modification time with its own agent's start. On
several nodes the agents start at different times, clocks drift, and a shared file system
caches file attributes, so two nodes can pick different checkpoints; their ranks would then
load different steps and wait for each other in ``dcp.load``. Once the group exists, every rank
takes rank 0's choice instead (issue 44)."""
from __future__ import annotations

import json

from ..config import RunSpec
from ..parallel.exchange import all_gather_bytes


def rank_zeros_attempt(spec: RunSpec, failures: list[dict], attempt: int
                       ) -> tuple[RunSpec, list[dict], int]:
    """``(spec, failures, attempt)`` as rank 0 chose them: its resume checkpoint, whether its
    fault is still injected, what it knows of the failure before, its attempt number. A
    collective: every rank of the default group calls it. The choice travels as JSON text, so a
    rank unpickles nothing a peer sent (parallel/exchange.py)."""
    mine = {"resume": spec.resume, "inject_fault": spec.inject_fault, "failures": failures,
            "attempt": attempt}
    chosen = json.loads(all_gather_bytes(json.dumps(mine).encode())[0])
    return (spec.replace(resume=chosen["resume"], inject_fault=chosen["inject_fault"]),
            chosen["failures"], chosen["attempt"])
