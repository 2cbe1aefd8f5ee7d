"""Time every lesson top to bottom in a fresh kernel, as a workshop would run it, and its memory.

Each notebook runs with nbclient in a new kernel of this environment (cells in order, as "Run
All" does). Reported per notebook: wall time from kernel start to the last cell, and the peak
memory of the kernel and every process it started (ranks, forkserver), as the sum of their
proportional set sizes (PSS: pages shared between processes counted once in total), sampled
every 0.2 s. Binder gives about 2 GB; the report says whether each notebook fits.

    python benchmarks/notebook_times.py [notebooks/00_start_here.ipynb ...]

Writes benchmarks/results/notebook_times.json and .md.
"""
from __future__ import annotations

import argparse
import json
import os
import threading
import time
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient

from common import RESULTS, machine

ROOT = Path(__file__).resolve().parent.parent
BINDER_MEMORY_BYTES = 2 * 10**9
CELL_TIMEOUT_S = 600


def tree_pss(root: psutil.Process) -> int:
    """Sum of PSS (or RSS where PSS is not readable) over ``root``'s descendants."""
    total = 0
    for proc in root.children(recursive=True):
        try:
            info = proc.memory_full_info()
            total += getattr(info, "pss", info.rss)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return total


def run_notebook(path: Path) -> dict:
    """Execute ``path`` in a fresh kernel; return its wall time, peak memory and any error."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    peak, done = [0], threading.Event()
    me = psutil.Process()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], tree_pss(me))
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    load = os.getloadavg()[0]  # other programs on the same cores slow the notebook down
    start, error = time.perf_counter(), None
    try:
        client.execute()
    except Exception as exc:  # noqa: BLE001 - report it, go on with the next notebook
        error = f"{type(exc).__name__}: {str(exc)[-500:]}"
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    return {"notebook": path.name, "seconds": round(seconds, 1), "ok": error is None,
            "error": error, "peak_memory_bytes": peak[0],
            "fits_binder_2gb": peak[0] < BINDER_MEMORY_BYTES, "load_1min_before": load,
            "code_cells": sum(c.cell_type == "code" for c in nb.cells)}


def markdown(rows: list[dict], info: dict) -> str:
    lines = [f"Measured {info['date']}: {info['cpus_usable']} usable CPU core(s), torch "
             f"{info['torch']}, CUDA {'yes' if info['cuda'] else 'no'}.", "",
             "| notebook | time top to bottom | peak memory (kernel + ranks, PSS) "
             "| load before | ok |",
             "| --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| `{r['notebook']}` | {r['seconds']:.0f} s | "
                     f"{r['peak_memory_bytes'] / 1e9:.2f} GB | {r['load_1min_before']:.1f} | "
                     f"{'yes' if r['ok'] else 'no: ' + r['error']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args()
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    rows = []
    for path in paths:
        rows.append(run_notebook(path.resolve()))
        print(json.dumps(rows[-1]), flush=True)
    info = machine()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "notebook_times.json").write_text(json.dumps({"machine": info, "rows": rows},
                                                            indent=2))
    (RESULTS / "notebook_times.md").write_text(markdown(rows, info))
    print(markdown(rows, info))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
