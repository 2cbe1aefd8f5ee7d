"""What ``launch()`` checks before any process starts: the spec, the strategy's own rules, a
resume folder, this machine, the start method. Each bad value raises ``ValueError`` naming the
field, the value and what is allowed."""
from __future__ import annotations

import os

from .. import checks
from ..checks import InvalidValue
from ..parallel import check_spec
from .guard import check_machine, check_main_guard, warn_if_oversubscribed


def check_launch(spec, start_method: str, task, max_restarts: int | None):
    """Check a launch of ``spec``; return the spec it runs (with ``max_restarts`` applied)."""
    if max_restarts is not None:   # validated as the spec's field: named, with what is allowed
        spec = spec.replace(max_restarts=max_restarts)
    spec.validate()
    if task is not None and spec.max_restarts:
        raise InvalidValue("max_restarts", spec.max_restarts, "0 (a restart resumes training "
                           "from a checkpoint; a task writes none)", "with a task")
    if spec.ranks_per_node not in (None, spec.world_size):
        raise InvalidValue("ranks_per_node", spec.ranks_per_node,
                           f"None or {spec.world_size} (ranks_per_node describes a torchrun node)",
                           f"with launch(): it starts all world_size={spec.world_size} ranks on "
                           "this machine (two of them would share a GPU)")
    if task is None:
        check_spec(spec)   # the strategy's own checks: before any process starts
        if spec.resume:    # looked at here, not in RunSpec: a spec may name another machine's
            from .checkpoint import check_resume   # then: complete, and of this model
            checks.where("resume", spec.resume, os.path.isdir, "an existing checkpoint folder")
            check_resume(spec)
    check_machine(spec)    # what this machine can do: a GPU per rank, fp16
    checks.choice("start_method", start_method, ("forkserver", "spawn"))  # fork: unsafe in a kernel
    check_main_guard()          # a script without `if __name__ == "__main__":` would recurse
    warn_if_oversubscribed(spec)
    return spec
