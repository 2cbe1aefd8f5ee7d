"""The temp folders runs and rank groups work in (``/tmp/gpututor-*``), and their cleaning up.

A run removes its folder when it ends, and a rank whose kernel died removes it too. A kernel killed
together with its ranks (``killpg``, an out-of-memory kill) leaves it behind; so each folder holds
a marker naming the process that owns it (its pid and start time: a pid can be reused), and every
new folder first sweeps the folders of this user whose owner is gone. A folder without a marker
(one being made this instant, or an older gpututor's), another user's, or a live owner's is never
touched.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import time

import psutil

PREFIX = "gpututor-"
MARKER = "owner.json"


def new_scratch_dir(prefix: str = PREFIX) -> str:
    """Sweep the stale folders, then make a fresh ``prefix``-named folder owned by this process."""
    sweep_stale_dirs()
    path = tempfile.mkdtemp(prefix=prefix)
    me = psutil.Process()
    with open(os.path.join(path, MARKER), "w") as f:
        json.dump({"pid": me.pid, "started": me.create_time()}, f)
    return path


def sweep_stale_dirs(root: str | None = None) -> list[str]:
    """Remove this user's ``gpututor-*`` folders under ``root`` (the temp folder) whose owner
    process is gone; return the ones removed."""
    root = root or tempfile.gettempdir()
    removed = []
    try:
        names = [n for n in os.listdir(root) if n.startswith(PREFIX)]
    except OSError:
        return removed
    for name in names:
        path = os.path.join(root, name)
        if remove_if_orphaned(path):
            removed.append(path)
    return removed


def remove_if_orphaned(path: str) -> bool:
    """Remove ``path`` if it is this user's folder (not a link) and its marker's owner is dead."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return False
    try:
        with open(os.path.join(path, MARKER)) as f:
            owner = json.load(f)
        pid, started = int(owner["pid"]), float(owner["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return False   # no marker (yet): not known to be ours to remove
    if owner_alive(pid, started):
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True


def owner_alive(pid: int, started: float) -> bool:
    """Whether process ``pid`` that started at ``started`` still runs (a zombie does not; a
    new process that reuses the pid has another start time)."""
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - started) > 0.5:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:   # cannot tell (access denied): leave its folder alone
        return True


def scratch_dir_of(path: str) -> str | None:
    """The gpututor folder (the one holding a marker) that ``path`` lies in, or None."""
    folder = os.path.dirname(os.path.abspath(path))
    while True:
        if os.path.basename(folder).startswith(PREFIX) and \
                os.path.isfile(os.path.join(folder, MARKER)):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def remove_when_owner_gone(path: str, wait_s: float = 2.0) -> bool:
    """In a rank whose kernel's pipe closed: remove ``path`` once its owner is seen dead (it can
    take a moment to become a zombie), waiting at most ``wait_s``; else the next sweep does."""
    deadline = time.monotonic() + wait_s
    while True:
        if remove_if_orphaned(path):
            return True
        if time.monotonic() >= deadline or not os.path.isdir(path):
            return False
        time.sleep(0.05)
