"""A torchrun job's attempts: which spec a (re)started rank trains, and the store it meets its
peers through. ``python -m gpututor run`` under ``torchrun`` calls these (``runtime/cli.py``)."""
from __future__ import annotations

import os
from datetime import timedelta

from ..checks import InvalidValue
from ..config import RunSpec


def torchrun_attempt(spec: RunSpec, world: int) -> tuple[RunSpec, list[dict], int]:
    """The spec this attempt of a torchrun job trains, what is known of the failure before it,
    and the attempt's number (1 for the first).

    With ``torchrun --max-restarts N`` (``TORCHELASTIC_MAX_RESTARTS``), torchrun starts the
    worker group again when a rank fails. The rank then resumes from the newest complete
    checkpoint written since torchrun started (its agent is this process's parent; an older
    job's checkpoints in the same folder are passed over), else from where the job began
    (``--resume`` or step 0), and the injected fault is not injected again. The checkpoint
    folder decides, not the restart count: torchrun counts restarts per node, and a node whose
    ranks did not fail restarts them with a count of 0 (torch issue #108158). Which rank failed
    where is in torchrun's log, not here: the failure is noted with rank, step and error None."""
    restarts = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    allowed = int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0"))
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if allowed and local != world and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        raise InvalidValue(
            "torchrun --max-restarts", allowed,
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 in torchrun's environment",
            "on several nodes with torchrun's shared store: a restarted rank reads the previous "
            "attempt's addresses there (torch issue #135712), and the per-node restart count "
            "cannot keep the attempts apart")
    if not allowed:
        return spec, [], 1
    import psutil

    from .checkpoint_files import latest, next_step
    since = psutil.Process(os.getppid()).create_time()
    resume = latest(spec.checkpoint_dir, since=since) if spec.checkpoint_dir and \
        os.path.isdir(spec.checkpoint_dir) else None
    if restarts == 0 and resume is None:   # the first attempt
        return spec, [], 1
    resume = resume or spec.resume
    failure = {"attempt": max(restarts, 1), "rank": None, "step": None, "error": None,
               "resumed_from": next_step(resume)}
    return spec.replace(inject_fault=None, resume=resume), [failure], max(restarts, 1) + 1


def restarted_store(rank: int, world: int, restarts: int, timeout: float):
    """The store a restarted rank meets its peers through, or None (torch's default).

    On one node torchrun's agent keeps one TCPStore for every attempt
    (``TORCHELASTIC_USE_AGENT_STORE``): a restarted rank would read the previous attempt's gloo
    or NCCL addresses there and fail to connect (torch issue #135712; measured here with gloo).
    Each restart gets keys of its own, under a prefix named by the restart count (the same on
    every rank of one node)."""
    if restarts == 0 or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    import torch.distributed as dist
    store, _, _ = next(dist.rendezvous("env://", rank, world, timeout=timedelta(seconds=timeout)))
    return dist.PrefixStore(f"gpututor-attempt{restarts}", store)
