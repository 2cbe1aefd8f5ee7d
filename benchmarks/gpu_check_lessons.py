"""The device check's lessons section: lessons 00 and 01 with their exercises checked, then every
notebook top to bottom in a fresh kernel. Needs what the lessons and their runner import
(``NEEDS``); without it ``benchmarks/gpu_check.py`` reports the section as not run.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpu_check_sections import RUNTIME, Budget, start_child

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_CELL_TIMEOUT_S = 300
# the runner (nbformat, nbclient, a python3 kernel), the exercises' checker (tests/test_exercises.py
# imports pytest) and the lessons' own widgets and plots
NEEDS = (*RUNTIME, "nbformat", "nbclient", "ipykernel", "pytest", "plotly", "ipywidgets",
         "anywidget")


EXERCISED = ("00_start_here.ipynb", "01_single_device.ipynb")   # run with their exercises


def exercised_copies(folder: Path) -> list[Path]:
    """Lessons 00 and 01 as the tests run them (tests/test_exercises.py): after each checker
    cell, the published solution (must pass) and a wrong answer (must be rejected)."""
    import nbformat
    sys.path.insert(0, str(ROOT / "tests"))
    from test_exercises import WRONG, augmented
    copies = []
    for name in EXERCISED:
        path = ROOT / "notebooks" / name
        copy = folder / name.replace(".ipynb", ".exercised.ipynb")
        nbformat.write(augmented(nbformat.read(path, as_version=4), WRONG[path.stem]), copy)
        copies.append(copy)
    return copies


def section_lessons(cfg: dict, budget: Budget) -> dict:
    """Lessons 00 and 01 with their exercises checked, then every notebook as a learner gets it,
    each in a fresh kernel, ``cfg["parallel_notebooks"]`` at a time (ok or not)."""
    folder = Path(tempfile.mkdtemp(prefix="gpu-check-lessons-"))
    pending = exercised_copies(folder) + sorted((ROOT / "notebooks").glob("*.ipynb"))
    if cfg.get("notebooks"):   # --notebooks 02,05: only those lessons (a rerun of failures)
        pending = [p for p in pending if p.name.split("_")[0] in cfg["notebooks"]]
    rows, running = {}, {}
    while pending or running:
        while pending and len(running) < cfg["parallel_notebooks"] and budget.left() > 30:
            path = pending.pop(0)
            running[path.name] = (_start_notebook(path), time.monotonic())
        if not running:  # the budget is spent
            rows.update({p.name: {"ok": None, "note": "not run: time budget spent"}
                         for p in pending})
            break
        time.sleep(0.5)
        for name, (proc, start) in list(running.items()):
            if proc.poll() is None and budget.left() > 5:
                continue
            rows[name] = _end_notebook(proc, start)
            del running[name]
    ran = [r for r in rows.values() if r["ok"] is not None]
    # lessons 00 and 01 with their exercises are the check; the others run as time allows
    exercised = [rows.get(name.replace(".ipynb", ".exercised.ipynb"), {}).get("ok")
                 for name in EXERCISED if not cfg.get("notebooks")
                 or name.split("_")[0] in cfg["notebooks"]]
    return {"ok": all(e is True for e in exercised) and all(r["ok"] for r in ran),
            "parallel": cfg["parallel_notebooks"], "notebooks": dict(sorted(rows.items()))}

NOTEBOOK_RUNNER = """
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=int(sys.argv[3]), kernel_name="python3",
               resources={"metadata": {"path": sys.argv[2]}}).execute()
"""


def _start_notebook(path: Path) -> subprocess.Popen:
    """Run a notebook with nbclient in a fresh kernel (in the lessons' folder, as they expect),
    in a session of its own."""
    log = tempfile.TemporaryFile("w+")  # a file, not a pipe: a chatty kernel cannot block it
    proc = start_child([sys.executable, "-c", NOTEBOOK_RUNNER, str(path), str(ROOT / "notebooks"),
                        str(NOTEBOOK_CELL_TIMEOUT_S)], stdout=log, stderr=subprocess.STDOUT,
                       text=True)
    proc.log = log
    return proc


def _end_notebook(proc: subprocess.Popen, start: float) -> dict:
    """The result of a finished notebook run; one still running is ended (out of budget)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # nbclient's own session: the kernel exits with it
        proc.wait()
        proc.log.close()
        seconds = round(time.monotonic() - start, 1)
        return {"ok": None, "seconds": seconds,  # no verdict: it may only have been slow
                "note": f"stopped after {seconds} s: the time budget was spent"}
    proc.log.seek(0)
    output = proc.log.read()
    proc.log.close()
    seconds = round(time.monotonic() - start, 1)
    if proc.returncode == 0:
        return {"ok": True, "seconds": seconds}
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)   # the traceback's colours
    return {"ok": False, "seconds": seconds, "error": plain[-3000:]}

