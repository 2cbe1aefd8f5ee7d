"""What a group of live ranks may be asked for, checked before anything starts or stops.

``%ranks start N`` checks a new group with :func:`check_group` before it stops the live one, so a
typo (``--device tpu``, ``--timeout 0``, 999 ranks) leaves the learner's ranks and names as they
were. ``RankGroup`` checks the same on its own.

How many ranks (the ceiling):

- on CPU, at most ``RANKS_PER_CORE`` (4) ranks per usable core: the cores this process may run
  on, read from its affinity mask and cgroup quota (``hardware.usable_cpu_cores``), not
  ``os.cpu_count()``, which counts the host's. 8 on a 2-core laptop, 4 on a 1-core Binder. More
  ranks than cores is allowed on purpose (a lesson shows 4 ranks on 2 cores taking turns); far
  more only starts processes that take turns, each holding its own copy of torch in memory;
- on CUDA, at most one rank per visible GPU (NCCL needs a GPU per rank: ``guard.check_machine``).
  ``device="auto"`` picks CUDA only when there is a GPU for every rank, else CPU.
"""
from __future__ import annotations

from ...checks import InvalidValue, number_where
from ...hardware import usable_cpu_cores
from ..guard import check_machine, check_main_guard

RANKS_PER_CORE = 4
START_METHODS = ("forkserver", "spawn")


def check_timeout(timeout) -> float:
    """A cell's timeout: seconds in [1, 3600]."""
    number_where("timeout", timeout, lambda t: 1 <= t <= 3600, "seconds in [1, 3600]")
    return float(timeout)


def cpu_ceiling() -> int:
    """The most CPU ranks a group may have here: ``RANKS_PER_CORE`` per usable core."""
    return RANKS_PER_CORE * usable_cpu_cores()


def check_cpu_world_size(world_size: int, floor: int = 0) -> None:
    """At most ``RANKS_PER_CORE`` CPU ranks per usable core, and never fewer than ``floor`` (a
    lesson's own world size, which the run panel keeps allowed); ``ValueError`` otherwise."""
    cores = usable_cpu_cores()
    ceiling = max(RANKS_PER_CORE * cores, floor)
    if world_size > ceiling:
        raise InvalidValue("world_size", world_size, f"1 to {ceiling}",
                           why=f"on CPU here (this process may use {cores} core(s), affinity and "
                               f"cgroup quota, and at most {RANKS_PER_CORE} ranks per core start "
                               "here)")


def check_group(world_size: int, device: str = "auto", timeout: float = 30.0,
                threads_per_rank: int = 1, start_method: str = "forkserver"):
    """Check a group's request and return ``(spec, device, timeout)``: the ranks' ``RunSpec``,
    the device they will use ("cpu" or "cuda") and the cell timeout in seconds. ``ValueError``
    names the field, the value and what is allowed, before anything starts."""
    from ...config import RunSpec
    # the rendezvous' own timeout is long: the kernel, not the process group, ends a hang
    spec = RunSpec(world_size=world_size, device=device, timeout=3600.0,
                   threads_per_rank=threads_per_rank)
    timeout = check_timeout(timeout)
    if start_method not in START_METHODS:
        raise InvalidValue("start_method", start_method, START_METHODS,
                           why="(plain fork is unsafe in a kernel)")
    resolved = check_machine(spec)   # on CUDA: a GPU per rank
    if resolved == "cpu":
        check_cpu_world_size(world_size)
    check_main_guard("gpututor.ranks()")   # a script: under `if __name__ == "__main__":`
    return spec, resolved, timeout
