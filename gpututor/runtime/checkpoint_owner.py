"""Whose checkpoint folder it is: one live run writes a ``checkpoint_dir`` at a time.

A run has an id (:func:`new_run_id`), written into every checkpoint it saves (``gpututor.json``'s
``run``): its restarts resume only from its own checkpoints (``latest(..., run=...)``). While it
lives, the folder's owner file (:data:`OWNER`: the run's id, the process that holds it and that
process's start time) turns away any other run, which would otherwise delete this run's files
mid-write; a holder that is no longer alive (the same pid with another start time is another
process) leaves a stale file that the next run takes over.

A save is written into ``.step{K}.tmp-{run}`` and renamed to ``step{K}`` once DCP has written
``.metadata`` (last): the rename is the commit point, so ``step{K}`` is always complete, and
what an interrupted save left is removed after the next good one. A full disk
(``OSError`` ENOSPC) ends the run with :class:`DiskFull` instead of restarting into it.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from .checkpoint_files import CheckpointError, latest

OWNER = ".gpututor-owner.json"


class DiskFull(CheckpointError):
    """A save found no room: restarting would only fill the disk again."""


def new_run_id() -> str:
    """A run's id: when it started, and a random part (two runs in one second differ)."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"


def _started(pid: int) -> float | None:
    import psutil
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _me(run: str) -> dict:
    pid = os.getpid()
    return {"run": run, "pid": pid, "started": _started(pid), "host": socket.gethostname()}


def _alive(owner: dict) -> bool:
    """Whether the owner's process still runs (a pid reused by a later process is not it).
    Another host's process cannot be looked at: it counts as alive."""
    if owner.get("host") != socket.gethostname():
        return True
    started = _started(owner.get("pid", -1)) if isinstance(owner.get("pid"), int) else None
    return started is not None and isinstance(owner.get("started"), (int, float)) and \
        abs(started - owner["started"]) < 1.0


def _ours(owner: dict) -> bool:
    """Whether the owner is this process or one that started it (``launch()``'s kernel)."""
    import psutil
    lineage = [os.getpid()] + [p.pid for p in psutil.Process().parents()]
    return owner.get("host") == socket.gethostname() and owner.get("pid") in lineage


@contextmanager
def _owner_file(folder: Path, create: bool = True):
    """The owner file, open and locked (``flock``: the kernel drops it if this process dies)
    while it is read and written, so two runs cannot both find it free."""
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / OWNER, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.pread(fd, 1 << 16, 0)
        try:
            owner = json.loads(raw) if raw.strip() else None
        except ValueError:   # half-written by a process that died: stale
            owner = None

        def write(value: dict | None) -> None:
            os.ftruncate(fd, 0)
            if value is not None:
                os.pwrite(fd, json.dumps(value).encode(), 0)

        yield (owner if isinstance(owner, dict) else None), write
    finally:
        os.close(fd)   # (closing drops the lock)


def _busy(folder: Path, owner: dict) -> CheckpointError:
    since = time.strftime("%H:%M:%S", time.localtime(owner.get("started") or 0))
    return CheckpointError(
        f"checkpoint_dir={str(folder)!r} is in use: run {owner.get('run')} (process "
        f"{owner.get('pid')} on {owner.get('host')}, started {since}) is writing checkpoints "
        "there, and two runs in one folder delete each other's saves; allowed is a folder no "
        "other live run writes: wait for that run to end, or choose another checkpoint_dir")


def claim_folder(folder, run: str) -> None:
    """Make this process's run ``run`` the owner of ``folder`` (created if missing); refused,
    naming the other run, while another live run owns it."""
    folder = Path(folder)
    with _owner_file(folder) as (owner, write):
        if owner is not None and owner.get("run") != run and _alive(owner):
            raise _busy(folder, owner)
        write(_me(run))


def release_folder(folder, run: str) -> None:
    """Give ``folder`` up, if ``run`` owns it (its checkpoints stay); else do nothing."""
    if folder is None:
        return
    try:
        with _owner_file(Path(folder), create=False) as (owner, write):
            if owner is not None and owner.get("run") == run:
                write(None)
    except OSError:   # no owner file (or no folder): nothing to give up
        pass


def run_of_rank(folder) -> str:
    """The id of the run a rank saves for: the live owner's if that is this process or the one
    that started it (``launch()`` claims the folder before any rank starts); else, under
    torchrun or in one process, a new run that this process claims. Refused while another live
    run owns the folder."""
    folder = Path(folder)
    with _owner_file(folder) as (owner, write):
        if owner is not None and _alive(owner):
            if _ours(owner):
                return owner["run"]
            raise _busy(folder, owner)
        run = new_run_id()
        write(_me(run))
        return run


def resume_point(spec, run: str):
    """Where a restart of run ``run`` resumes: its newest complete checkpoint (a save being
    written when a rank died is still in its staging folder and passed over, and so are other
    runs' checkpoints), else where the run began (``spec.resume``, or None: step 0)."""
    folder = spec.checkpoint_dir
    return (latest(folder, run=run) if folder and os.path.isdir(folder) else None) or spec.resume


def staging_folder(folder: Path, run: str) -> Path:
    """Where the save that becomes ``folder`` (``step{K}``) is written first."""
    return folder.with_name(f".{folder.name}.tmp-{run}")


def clear_staging(checkpoint_dir, run: str) -> None:
    """Remove what run ``run`` left in ``checkpoint_dir`` before a restart (staging folders of
    saves it never finished). Rank 0 calls it as its ranks start, before the collective that
    tells them the run id: no rank of this run is writing yet."""
    folder = Path(checkpoint_dir)
    for left in [*folder.glob(f".step*.tmp-{run}"), *folder.glob(f".step*.old-{run}")]:
        shutil.rmtree(left, ignore_errors=True)


def commit(staging: Path, folder: Path, run: str) -> None:
    """Put a complete save in place (the rename is the commit point: ``step{K}`` is never
    half-written), then remove what other runs' interrupted saves left (only the owner writes
    here). This run's own staging folders stay: another rank may already be writing its next
    save (:func:`clear_staging` removes this run's leftovers when it starts)."""
    old = folder.with_name(f".{folder.name}.old-{run}")
    if folder.exists():   # an earlier save of this step (another run's, or before a restart)
        shutil.rmtree(old, ignore_errors=True)
        folder.rename(old)
    staging.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
    for left in [*folder.parent.glob(".step*.tmp-*"), *folder.parent.glob(".step*.old-*")]:
        if not left.name.endswith(f"-{run}"):
            shutil.rmtree(left, ignore_errors=True)


def no_space(exc: BaseException) -> OSError | None:
    """The ENOSPC ``OSError`` behind ``exc`` (DCP wraps each rank's failure), or None."""
    seen, todo = set(), [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            return e
        failures = getattr(e, "failures", None)
        if isinstance(failures, dict):
            todo += [f[0] if isinstance(f, tuple) else f for f in failures.values()]
        todo += [e.__cause__, e.__context__]
    return None


def save_failed(exc: BaseException, rank: int, step: int, staging: Path,
                checkpoint_dir) -> BaseException:
    """What to raise for a save that failed: rank 0 removes its staging folder (no ``step{K}``
    was made); a full disk becomes :class:`DiskFull`, anything else stays as it was."""
    if rank == 0:
        shutil.rmtree(staging, ignore_errors=True)
    full = no_space(exc)
    return exc if full is None else disk_full(checkpoint_dir, step, full)


def disk_full(checkpoint_dir, step: int, cause: OSError) -> DiskFull:
    return DiskFull(
        f"checkpoint_dir={str(checkpoint_dir)!r} is full: saving step {step + 1}'s checkpoint "
        f"failed ({cause.strerror or cause}); restarting would only fill it again, so the run "
        "stops here. Allowed is a checkpoint_dir with room for a checkpoint: free space (or "
        "choose another folder) and resume from the newest complete step{K} there")


def stops_restarts(failure) -> bool:
    """Whether a run's failure must end it despite restarts left: a full disk."""
    return getattr(failure, "cause", "").startswith(f"{DiskFull.__name__}:")
