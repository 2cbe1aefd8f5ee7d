"""Where a rank that does not answer is waiting: its main thread's stack, with the cell's line.

Each rank writes its stack to ``stack-rank{N}.txt`` in the group's temp folder when it gets
``STACK_SIGNAL`` (SIGUSR1, faulthandler: ``runtime/rank_output.py``), even inside a collective,
where Python runs no code. The kernel reads what was added to that file.
"""
from __future__ import annotations

import os
import time

from ...i18n import tr
from ..rank_output import STACK_SIGNAL, main_thread_stack


def waiting_stack(tmp: str, rank: int, pid: int, code: str, cell: int) -> str:
    """Where ``rank`` (process ``pid``) waits in cell ``cell`` of source ``code``: its main
    thread's stack, innermost first, with the cell's line ("" if it cannot be read)."""
    path = os.path.join(tmp, f"stack-rank{rank}.txt")
    try:
        before = os.path.getsize(path)
        os.kill(pid, STACK_SIGNAL)
    except (OSError, TypeError):
        return ""
    frames, deadline = [], time.monotonic() + 1.0
    while not frames and time.monotonic() < deadline:
        time.sleep(0.02)
        with open(path) as f:
            f.seek(before)
            frames = main_thread_stack(f.read())
    lines = code.splitlines()
    shown = []
    for frame in frames:
        if "runtime/ranks/rank.py" in frame:   # the rank's own machinery: not the learner's
            break
        shown.append("    " + frame)
        if f'"{_cell_file(cell)}"' in frame and ", line " in frame:
            number = int(frame.split(", line ")[1].split()[0])
            if 0 < number <= len(lines):
                shown.append("        " + lines[number - 1].strip())
    return ("\n\n" + tr("rank {rank} is waiting here (innermost first):", rank=rank) + "\n"
            + "\n".join(shown)) if shown else ""


def _cell_file(cell: int) -> str:
    from .rank import cell_name
    return cell_name(cell)
