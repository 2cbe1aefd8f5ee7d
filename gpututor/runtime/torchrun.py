"""A torchrun job's attempts: which spec a (re)started rank trains, and the store it meets its
peers through. ``python -m gpututor run`` under ``torchrun`` calls these (``runtime/cli.py``),
and :func:`local_rank_and_size`, which finds a rank's place on its node under torchrun, srun or
Open MPI's mpirun."""
from __future__ import annotations

import ipaddress
import os
import re
from datetime import timedelta
from typing import Mapping

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


def local_rank_and_size(rank: int, world: int, env: Mapping[str, str]) -> tuple[int, int]:
    """This process's rank on its node and the number of ranks on its node, read from ``env``
    (the environment its launcher gave it); ``InvalidValue`` where no launcher says and the job
    is not provably on one node. The local rank picks the GPU (``first_gpu + local_rank``) and
    the local size is how many GPUs this node must have, so a guess here puts two ranks on one
    GPU, or asks a node for ``cuda:9``.

    Who says, the innermost launcher first (it started this very process; an outer one's
    variables are inherited and describe another launch):

    1. torchrun: ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` (also what to set by hand);
    2. Open MPI's mpirun: ``OMPI_COMM_WORLD_LOCAL_RANK`` and ``OMPI_COMM_WORLD_LOCAL_SIZE``. It
       goes before Slurm: mpirun inside an ``sbatch`` job starts its ranks from the batch script
       and from daemons that srun started one per node, and they inherit ``SLURM_LOCALID=0``;
    3. Slurm's srun: ``SLURM_LOCALID``, and the tasks on this node from the step's layout
       (``SLURM_STEP_TASKS_PER_NODE``, else ``SLURM_TASKS_PER_NODE``: ``"8(x2),4"`` lists the
       nodes in order, this one at ``SLURM_STEP_NODEID``/``SLURM_NODEID``), else
       ``SLURM_NTASKS_PER_NODE`` (what was asked for, set only with ``--ntasks-per-node``).

    Open MPI's and Slurm's variables count only where their global rank
    (``OMPI_COMM_WORLD_RANK``, ``SLURM_PROCID``), if set, is ``RANK``: else they describe
    another launch, and the run is refused.

    Without any of them, ``RANK`` and ``WORLD_SIZE`` are taken as this node's only where that
    is provably right: ``WORLD_SIZE=1``, or ``MASTER_ADDR`` on loopback (127.x, ``::1``,
    ``localhost``), which only processes on this host can reach, so a job that starts at all
    has every rank here. Anything else is refused before any process group starts."""
    if "LOCAL_RANK" in env or "LOCAL_WORLD_SIZE" in env:
        names = ("LOCAL_RANK", "LOCAL_WORLD_SIZE")
        sizes = _env_int(env, names[1])
    elif "OMPI_COMM_WORLD_LOCAL_RANK" in env:
        names = ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")
        _same_rank(rank, env, "OMPI_COMM_WORLD_RANK")
        sizes = _env_int(env, names[1])
    elif "SLURM_LOCALID" in env:
        _same_rank(rank, env, "SLURM_PROCID")
        size_name, sizes = _slurm_tasks_here(env)
        names = ("SLURM_LOCALID", size_name)
    elif world == 1 or _is_loopback(env.get("MASTER_ADDR", "")):
        return rank, world
    else:
        raise InvalidValue(
            "WORLD_SIZE", world,
            "1, or each process started with LOCAL_RANK (its rank on its node) and "
            "LOCAL_WORLD_SIZE (the ranks on its node) set: start the ranks with torchrun, or "
            "set both for each process",
            "without a rank on the node: none of LOCAL_RANK/LOCAL_WORLD_SIZE (torchrun), "
            "OMPI_COMM_WORLD_LOCAL_RANK/OMPI_COMM_WORLD_LOCAL_SIZE (Open MPI's mpirun) or "
            "SLURM_LOCALID (Slurm's srun) is set, and MASTER_ADDR="
            f"{env.get('MASTER_ADDR')!r} is not loopback, so the ranks may span nodes and "
            "RANK cannot stand for the rank on this node")
    local_rank = _env_int(env, names[0])
    if not 1 <= sizes <= world:
        raise InvalidValue(names[1], env[names[1]], f"1 to WORLD_SIZE={world} ranks on a node",
                           f"({sizes} ranks on this node)")
    if local_rank >= sizes:
        raise InvalidValue(names[0], env[names[0]], f"0 to {sizes - 1}",
                           f"with {sizes} ranks on this node ({names[1]}={env[names[1]]!r})")
    return local_rank, sizes


def _env_int(env: Mapping[str, str], name: str) -> int:
    """``env[name]`` as a whole number; ``InvalidValue`` where it is missing or not one."""
    text = env.get(name, "").strip()
    if not text.isdecimal():
        raise InvalidValue(name, env.get(name), "a whole number >= 0",
                           "(not set, beside the other variables of its launcher)"
                           if name not in env else None)
    return int(text)


def _same_rank(rank: int, env: Mapping[str, str], name: str) -> None:
    """A launcher's variables describe this process only if its global rank is ``RANK``."""
    if name in env and env[name].strip() != str(rank):
        raise InvalidValue(name, env[name], f"RANK={rank} (the same process), or LOCAL_RANK and "
                           "LOCAL_WORLD_SIZE set", "beside a different RANK: the launcher "
                           "variables beside it were inherited from another launch")


def _slurm_tasks_here(env: Mapping[str, str]) -> tuple[str, int]:
    """The tasks srun started on this node, and the variable that said so: the step's layout
    (``"2(x3),1"`` is 2, 2, 2, 1, a count per node, this node's at its node id), else what
    ``--ntasks-per-node`` asked for."""
    name = "SLURM_STEP_TASKS_PER_NODE" if "SLURM_STEP_TASKS_PER_NODE" in env \
        else "SLURM_TASKS_PER_NODE"
    node = env.get("SLURM_STEP_NODEID", env.get("SLURM_NODEID", ""))
    counts = [int(n) for n, times in re.findall(r"(\d+)(?:\(x(\d+)\))?", env.get(name, ""))
              for _ in range(int(times or 1))]
    if len(set(counts)) == 1:            # every node runs as many (one node, or "8(x2)")
        return name, counts[0]
    if node.isdecimal() and int(node) < len(counts):
        return name, counts[int(node)]
    return "SLURM_NTASKS_PER_NODE", _env_int(env, "SLURM_NTASKS_PER_NODE")


def _is_loopback(address: str) -> bool:
    """An address only this host reaches (no name lookup: a host's own name may map to 127.0.1.1
    in its /etc/hosts and to a real address everywhere else)."""
    if address.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip().strip("[]")).is_loopback
    except ValueError:
        return False
