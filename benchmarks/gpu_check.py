"""Check a GPU machine in at most 9 minutes: does everything gpututor measures work on CUDA?

Runs with only torch installed, from the repository root (no install, no .venv)::

    PYTHONPATH=$PWD python3 benchmarks/gpu_check.py            # on a GPU machine
    PYTHONPATH=$PWD python3 benchmarks/gpu_check.py --device cpu --quick   # smoke test, no GPU

Sections (benchmarks/gpu_check_sections.py, gpu_check_more.py, gpu_check_lessons.py), in this
order, each one JSON line in OUT/gpu_check.jsonl, appended (and flushed to disk) the moment it
ends, so a ``timeout`` loses nothing already done: ``environment``; ``single_rank`` (a CUDA rank
trains, its first loss equals a CPU run's); ``precision`` (fp32 vs bf16 vs fp16 tokens/s and MFU);
``fp8`` (``torch._scaled_mm`` fed by gpututor's casts, against bf16; GPU only); ``ranks``
(``%%ranks``'s group: CPU and device collectives, the guard, a hung cell); ``checkpoint`` (async
save and restart, DCP across layouts, on the device); ``torchrun_restarts`` (``--standalone`` with
and without ``--max-restarts``); ``gloo_shared`` (two ranks on GPU 0 over gloo; GPU only);
``capacity`` (the ``device_memory`` guard); ``memory`` (tracker vs allocator); ``devices`` (each
rank on its own GPU); ``cuda_oom`` (a real CUDA out-of-memory; GPU only); ``torchrun`` (two
nodes); ``strategies`` (every strategy that fits the GPUs); ``gpu_tests`` (the tests marked
``gpu``); ``lessons`` (lessons 00 and 01 with their exercises, then
every notebook). A line's ``status`` is ``ok``, ``failed`` or ``not run`` with ``why``: a
section that needs a package this Python lacks (gpututor's runtime needs numpy, psutil and
cloudpickle; the lessons need nbformat, nbclient, ipykernel, ...) or a GPU is not run, never
failed. SIGTERM (or Ctrl-C) writes a line for the running section and for each one not reached,
and every subprocess (ranks, torchrun, notebook kernels) is ended before the check exits.

Exit status: 0 every section ok; 1 a section failed; 3 none failed but some could not run (named
on the last line and in the summary line); 2 no CUDA device is visible (without ``--device cpu``).
OUT/gpu_check.md is a readable summary of the same lines.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # gpututor from this checkout, whatever PYTHONPATH says

import gpu_check_lessons as lessons  # noqa: E402 - benchmarks/ is on sys.path (this script's folder)
import gpu_check_more as more  # noqa: E402
import gpu_check_sections as sections  # noqa: E402
from gpu_check_report import PASSING, markdown  # noqa: E402

CONFIGS = {  # sizes for a GPU (big enough to keep it busy for a few ms a step) and a quick one
    "full": {"steps": 30, "strategy_steps": 10, "repeats": 2, "small_model": "small",
             "big_model": "large", "batch": 64, "big_batch": 256, "seq_len": 256,
             "run_timeout_s": 90, "parallel_notebooks": 3},
    "quick": {"steps": 6, "strategy_steps": 4, "repeats": 1, "small_model": "tiny",
              "big_model": "tiny", "batch": 8, "big_batch": 8, "seq_len": 32,
              "run_timeout_s": 90, "parallel_notebooks": 1},
}

# name -> (function, packages it imports besides torch, needs a GPU, takes the budget too)
SECTIONS = {
    "environment": (sections.section_environment, (), False, False),
    "single_rank": (sections.section_single_rank, sections.RUNTIME, False, False),
    "precision": (sections.section_precision, sections.RUNTIME, False, False),
    "fp8": (more.section_fp8, sections.RUNTIME, True, False),
    "ranks": (more.section_ranks, sections.RUNTIME, False, False),
    "checkpoint": (more.section_checkpoint, sections.RUNTIME, False, False),
    "torchrun_restarts": (more.section_torchrun_restarts, sections.RUNTIME, False, False),
    "gloo_shared": (more.section_gloo_shared, sections.RUNTIME, True, False),
    "capacity": (sections.section_capacity, sections.RUNTIME, False, False),
    "memory": (sections.section_memory, sections.RUNTIME, False, False),
    "devices": (sections.section_devices, sections.RUNTIME, False, False),
    "cuda_oom": (sections.section_cuda_oom, (), True, False),
    "torchrun": (sections.section_torchrun, sections.RUNTIME, False, False),
    "strategies": (sections.section_strategies, sections.RUNTIME, False, True),
    "gpu_tests": (more.section_gpu_tests, (*sections.RUNTIME, "pytest"), True, False),
    "lessons": (lessons.section_lessons, lessons.NEEDS, False, True),
}


class Stopped(BaseException):
    """Raised in the main thread by SIGTERM or SIGINT: the check stops where it is."""


def _stop(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)   # one stop is enough; the cleanup must finish
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise Stopped(signal.Signals(signum).name)


def missing(packages: tuple[str, ...]) -> list[str]:
    """The packages of ``packages`` this Python cannot import."""
    absent = []
    for name in packages:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            absent.append(name)
    return absent


class Log:
    """OUT/gpu_check.jsonl: one JSON line per section, on disk as soon as the section ends."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.lines = path, []
        path.write_text("")

    def write(self, line: dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(line, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.lines.append(line)   # after the disk: a stop in between repeats a line, loses none


def run_section(name: str, cfg: dict, budget: sections.Budget, log: Log) -> None:
    """Run one section and append its line: ok, failed, or not run with why."""
    fn, needs, needs_gpu, takes_budget = SECTIONS[name]
    start, why = time.monotonic(), None
    absent = missing(needs)
    if needs_gpu and cfg["device"] != "cuda":
        why = "needs a CUDA device (--device cpu)"
    elif absent:
        why = f"needs {', '.join(absent)} (not installed)"
    elif budget.left() < 15:
        why = "time budget spent"
    if why is None:
        print(f"== {name}", flush=True)
        try:
            result = fn(cfg, budget) if takes_budget else fn(cfg)
        except ModuleNotFoundError as exc:   # a package NEEDS does not list: still not a failure
            result = {"ok": None, "note": f"needs {exc.name} (not installed)"}
        except Exception as exc:  # noqa: BLE001 - one failing section must not hide the others
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc()[-3000:]}
        finally:
            sections.CHILDREN[:] = [p for p in sections.CHILDREN if p.poll() is None]
    else:
        result = {"ok": None}
    if result["ok"] is None:
        why = why or result.get("note") or "not run"
    status = {True: "ok", False: "failed", None: "not run"}[result["ok"]]
    log.write({"section": name, "status": status, "why": why,
               "seconds": round(time.monotonic() - start, 1), **result,
               "passing_means": PASSING.get(name)})
    print(f"   {name}: {status}{': ' + why if why else ''} ({log.lines[-1]['seconds']} s)",
          flush=True)


def end_children() -> None:
    """End every subprocess the sections started and whatever they started (ranks, kernels,
    torchrun's workers): SIGTERM to each one's session, then SIGKILL to what is left."""
    pids = [p.pid for p in sections.CHILDREN] + _descendants(os.getpid())
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for proc in sections.CHILDREN:
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.1)
            for proc in sections.CHILDREN:
                proc.poll()   # reap our own children so they stop counting as alive
    sections.CHILDREN.clear()


def _descendants(root: int) -> list[int]:
    """Every live process under ``root`` (read from /proc; empty where there is none)."""
    parents = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, ppid in parents.items() if ppid in frontier]
        found += children
        frontier = children
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_check")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: every section that needs no GPU, on CPU (a smoke test)")
    parser.add_argument("--budget-s", type=float, default=500.0)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (for the smoke test)")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated, in this order: {','.join(SECTIONS)}")
    parser.add_argument("--no-lessons", action="store_true", help="leave the notebooks out")
    parser.add_argument("--parallel-notebooks", type=int, default=None,
                        help="notebooks run at once (default 3; 1 with --quick)")
    parser.add_argument("--notebooks", default="",
                        help="comma-separated lesson numbers (00,02,05): only those notebooks")
    args = parser.parse_args(argv)
    unknown = set(args.sections.split(",")) - set(SECTIONS)
    if unknown:
        parser.error(f"no section {', '.join(sorted(unknown))}; there are {', '.join(SECTIONS)}")
    chosen = [s for s in SECTIONS if s in args.sections.split(",")
              and not (args.no_lessons and s == "lessons")]
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"gpu_check: no CUDA device is visible (torch {torch.__version__}, built with "
              f"CUDA {torch.version.cuda}); this check is for a machine with a GPU and a CUDA "
              "build of torch. For a smoke test of the script: --device cpu --quick",
              file=sys.stderr)
        return 2
    cfg = {**CONFIGS["quick" if args.quick else "full"], "device": args.device,
           "notebooks": [n for n in args.notebooks.split(",") if n]}
    if args.parallel_notebooks:
        cfg["parallel_notebooks"] = args.parallel_notebooks
    budget, started = sections.Budget(args.budget_s), time.monotonic()
    log = Log(args.out / "gpu_check.jsonl")
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        for name in chosen:
            run_section(name, cfg, budget, log)
    except Stopped as stop:
        written = {line["section"] for line in log.lines}
        for i, rest in enumerate(s for s in chosen if s not in written):
            log.write({"section": rest, "status": "not run", "ok": None,
                       "why": f"stopped by {stop} " + ("while running" if i == 0
                                                        else "before it started")})
    finally:
        end_children()
    return finish(log, args, started)


def finish(log: Log, args: argparse.Namespace, started: float) -> int:
    """The summary line, the Markdown report and the exit status naming what did not run."""
    failed = [line["section"] for line in log.lines if line["status"] == "failed"]
    not_run = [line["section"] for line in log.lines if line["status"] == "not run"]
    code = 1 if failed else 3 if not_run else 0
    log.write({"summary": True, "exit": code, "failed": failed, "not_run": not_run,
               "seconds": round(time.monotonic() - started, 1), "device": args.device,
               "torch": torch.__version__, "python": sys.version.split()[0],
               "executable": sys.executable})
    report = {"date": time.strftime("%Y-%m-%d %H:%M"), "device": args.device,
              "seconds": time.monotonic() - started,
              "sections": {line["section"]: line for line in log.lines if "section" in line}}
    (args.out / "gpu_check.md").write_text(markdown(report))
    print(f"report: {log.path} and gpu_check.md")
    reasons: dict[str, list[str]] = {}   # why -> the sections it kept from running
    for line in log.lines:
        if line.get("status") == "not run":
            reasons.setdefault(line["why"], []).append(line["section"])
    print(f"gpu_check: exit {code}; failed: {', '.join(failed) or 'none'}; could not run: "
          + ("; ".join(f"{', '.join(names)} ({why})" for why, names in reasons.items())
             or "none"), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
