"""Files a learner reads (a ``--json`` summary, saved weights, lesson findings) are written whole
or not at all: one home for that.

``open(path, "w")`` empties the old file first, so a crash, a full disk or Ctrl-C halfway leaves a
truncated file where a good one was. :func:`write_atomically` writes a temporary file in the same
folder and then renames it over ``path`` (``os.replace``: on one file system a reader sees the old
file or the new one, never a part). Ground floor: imports nothing of gpututor.
"""
from __future__ import annotations

import os
import stat
import tempfile
from typing import IO, Callable


def write_atomically(path, write: Callable[[IO], None], binary: bool = False) -> None:
    """Call ``write(f)`` on a new temporary file beside ``path``, then put it in ``path``'s place.

    If ``write`` (or anything before the rename) fails, ``path`` keeps its old contents and the
    temporary file is removed. The new file keeps an existing file's permissions, else gets the
    ones ``open(path, "w")`` would give. A symlink at ``path`` is replaced, not followed."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    handle, temp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.",
                                    suffix=".tmp")
    try:
        with os.fdopen(handle, "wb" if binary else "w",
                       **({} if binary else {"encoding": "utf-8"})) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())        # the bytes are on disk before the name points at them
        os.chmod(temp, _mode_for(path))
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise


def write_text_atomically(path, text: str) -> None:
    """:func:`write_atomically` for a string (UTF-8)."""
    write_atomically(path, lambda f: f.write(text))


def _mode_for(path: str) -> int:
    """The permissions the regular file at ``path`` has now, else (a new file, a link) 0o666
    less the umask."""
    try:
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode):
            return stat.S_IMODE(info.st_mode)
    except FileNotFoundError:
        pass
    return 0o666 & ~_umask()


def _umask() -> int:
    """This process's umask, read without changing it (``os.umask`` sets it to read it, which
    another thread could see); 0o022 where /proc does not say."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022
