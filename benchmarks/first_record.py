"""How long until a run shows its first record, and what a rank imports to get there (issue 41).

Three measures, each a fresh process per repetition, variants interleaved (A B A B ...):

1. ``cli_first_record_s``: ``python -m gpututor run --strategy S ... --json -`` with its stderr on a
   terminal (a pty), as a learner runs it: seconds from starting the command to the progress
   bar's first line, which the CLI draws when rank 0's first record reaches it
   (runtime/cli.py ``Progress``). ``cli_total_s``: to the command's exit.
2. ``later_launch_s``: in one Python process (a notebook's, or the run panel's after its warm
   start), ``warm_up(block=True)`` and then three ``launch()``es of 2-rank DDP: seconds from
   ``launch()`` to the first record, median of the three (``first_launch_s`` is the first).
3. ``--imports``: what each strategy's rank imports while it sets up and trains its first step,
   beyond what every rank has (torch and gpututor's worker), with the call that imported each
   heavy package first, and what each heavy package costs to import on top of that base.

``--baseline REV`` measures the code of git revision REV beside this checkout (its ``gpututor``
and ``data`` folders, extracted with ``git archive`` into a temp folder; same venv), so before
and after come from one run on the same machine state; REV may also be a folder that holds a
``gpututor`` package (a patched copy, say). ``--after REV`` measures REV in place of this
checkout (whose files other work in progress may have changed).

    python benchmarks/first_record.py --baseline HEAD~3 [--repeats 3] [--strategies single,ddp]
    python benchmarks/first_record.py --imports

Writes benchmarks/results/first_record.json.
"""
from __future__ import annotations

import argparse
import os
import pty
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from common import report

ROOT = Path(__file__).resolve().parent.parent
WORLD = {"single": 1}   # every other strategy runs on 2 ranks here
HEAVY = ("torch._dynamo", "sympy", "torch._inductor", "torch._functorch", "torch.distributed.fsdp",
         "torch.distributed.tensor", "torch.distributed.pipelining",
         "torch.distributed.checkpoint", "torch.distributed._composable", "torch.profiler")
LATER_LAUNCH = """
import statistics, sys, time
from gpututor import RunSpec, launch, warm_up
if __name__ == "__main__":
    warm_up(block=True)   # the panel's warm start: the forkserver has run its imports
    # 3 steps: the first record is step 0's, which measures nothing more (steps 1-2 probe)
    spec = RunSpec(model="gpt", strategy="ddp", world_size=2, steps=3, batch_size=8,
                   device="cpu")
    times = []
    for _ in range(4):
        run = launch(spec)
        run.echo = None
        run.wait(timeout=120)
        times.append(run.first_record_at - run.launched_at)
    print(times[0], statistics.median(times[1:]))
"""


def baseline_tree(rev: str) -> Path:
    """``gpututor/`` and ``data/`` of git revision ``rev``, in a new temp folder; or ``rev``
    itself where it is a folder holding a ``gpututor`` package."""
    if (Path(rev) / "gpututor" / "__init__.py").is_file():
        return Path(rev).resolve()
    folder = Path(tempfile.mkdtemp(prefix="first-record-"))
    archive = subprocess.run(["git", "archive", rev, "gpututor", "data"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def cli_first_record(root: Path, strategy: str, steps: int) -> tuple[float, float]:
    """Seconds from starting ``python -m gpututor run`` in ``root`` to its first progress line,
    and to its exit. ``-m`` puts ``root`` first on sys.path: its own ``gpututor`` runs."""
    command = [sys.executable, "-m", "gpututor", "run", "--model", "gpt", "--strategy", strategy,
               "--world-size", str(WORLD.get(strategy, 2)), "--steps", str(steps),
               "--batch-size", "8", "--json", "-"]
    terminal, stderr = pty.openpty()
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=stderr,
                            stdin=subprocess.DEVNULL)
    os.close(stderr)
    first, seen = None, b""
    try:
        while first is None:
            ready, _, _ = select.select([terminal], [], [], 120)
            if not ready:
                raise TimeoutError(f"{strategy}: no progress line within 120 s")
            try:
                chunk = os.read(terminal, 4096)
            except OSError:   # the command exited: its terminal is gone
                chunk = b""
            if not chunk:
                raise RuntimeError(f"{strategy}: exited before a record: {seen.decode()[-2000:]}")
            seen += chunk
            if b"step 1/" in seen:
                first = time.perf_counter() - start
        out, _ = proc.communicate(timeout=300)
        total = time.perf_counter() - start
    finally:
        proc.kill() if proc.poll() is None else None
        os.close(terminal)
    if proc.returncode != 0 or b'"status": "finished"' not in out:
        raise RuntimeError(f"{strategy}: exit code {proc.returncode}")
    return first, total


def later_launches(root: Path) -> tuple[float, float]:
    """(first launch, median of three later launches) to the first record, after a warm start."""
    out = subprocess.run([sys.executable, "-c", LATER_LAUNCH], cwd=root, check=True,
                         capture_output=True, text=True, timeout=600).stdout
    first, later = map(float, out.split()[-2:])
    return first, later


def compare(args) -> dict:
    after = (args.after, baseline_tree(args.after)) if args.after else ("now", ROOT)
    roots = dict([after])
    if args.baseline:
        roots = {f"baseline {args.baseline}": baseline_tree(args.baseline), after[0]: after[1]}
    rows = {name: {} for name in roots}
    try:
        for rep in range(args.repeats):
            # interleaved, each going first in turn: drift and warm caches hit both alike
            order = list(roots.items())[::-1 if rep % 2 else 1]
            for strategy in args.strategies:
                for name, root in order:
                    first, total = cli_first_record(root, strategy, args.steps)
                    rows[name].setdefault(f"cli_first_record_s {strategy}", []).append(first)
                    rows[name].setdefault(f"cli_total_s {strategy}", []).append(total)
                    print(f"rep {rep} {name:>16} {strategy:>7}: first record {first:.2f} s, "
                          f"exit {total:.2f} s", flush=True)
            for name, root in order:
                first, later = later_launches(root)
                rows[name].setdefault("first_launch_s", []).append(first)
                rows[name].setdefault("later_launch_s", []).append(later)
                print(f"rep {rep} {name:>16} launch(): first {first:.2f} s, later {later:.3f} s",
                      flush=True)
    finally:
        for name, root in roots.items():
            if root.name.startswith("first-record-"):   # extracted here
                shutil.rmtree(root, ignore_errors=True)
    medians = {name: {k: statistics.median(v) for k, v in figures.items()}
               for name, figures in rows.items()}
    result = {"repeats": args.repeats, "steps": args.steps, "runs": rows, "medians": medians}
    if len(roots) == 2:
        before, after = medians.values()
        result["after_over_baseline"] = {k: after[k] / before[k] for k in after}
    table(medians)
    return result


def table(medians: dict) -> None:
    names = list(medians)
    print(f"\n{'median (s)':<34}" + "".join(f"{n:>20}" for n in names)
          + ("       ratio" if len(names) == 2 else ""))
    for key in medians[names[-1]]:
        values = [medians[n][key] for n in names]
        ratio = f"{values[-1] / values[0]:>12.2f}" if len(names) == 2 else ""
        print(f"{key:<34}" + "".join(f"{v:>20.3f}" for v in values) + ratio)


# ---- what a rank imports ---------------------------------------------------------------------

def heavy_group(module: str) -> str | None:
    return next((h for h in HEAVY if module == h or module.startswith(h + ".")), None)


class FirstImports:
    """A meta-path finder that notes, for each heavy package, the call that imported it first:
    the innermost frames of gpututor and of torch (outside the import machinery)."""

    def __init__(self):
        self.callers: dict[str, str] = {}

    def find_spec(self, name, path=None, target=None):
        group = heavy_group(name)
        if group is not None and group not in self.callers:
            import traceback
            frames = [f for f in traceback.extract_stack()[:-1] if "importlib" not in f.filename
                      and "<frozen" not in f.filename and f.filename != __file__]
            pick = lambda part: next((f"{Path(f.filename).name}:{f.lineno} {f.name}"
                                      for f in reversed(frames) if part in f.filename), "-")
            self.callers[group] = f"gpututor {pick('gpututor/')} <- torch {pick('torch/')}"
        return None


def imports_task(spec, rank, world_size, device, emit):
    """A rank's setup and first training step (``worker.train`` with one step), with what it
    imported on the way (the rank has imported torch and the worker before it runs a task)."""
    from gpututor.runtime.worker import train
    before, finder = set(sys.modules), FirstImports()
    sys.meta_path.insert(0, finder)
    start = time.perf_counter()
    try:
        train(spec.replace(steps=1), rank, world_size, device, emit=lambda record: None)
    finally:
        sys.meta_path.remove(finder)
    new = sorted(set(sys.modules) - before)
    emit({"step": 0, "seconds": time.perf_counter() - start, "modules": len(new),
          "heavy": dict(Counter(g for g in map(heavy_group, new) if g)),
          "first_imported_by": finder.callers})


def import_cost(module: str, repeats: int) -> float:
    """Median seconds to import ``module`` in a fresh interpreter that has imported the base."""
    code = ("import time, torch, gpututor.runtime.worker; t = time.perf_counter(); "
            f"import {module}; print(time.perf_counter() - t)")
    return statistics.median(float(subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True,
        text=True).stdout) for _ in range(repeats))


def imports(args) -> dict:
    sys.path.insert(0, str(ROOT))
    from gpututor import RunSpec, launch
    from gpututor.parallel import small_layout
    rows = {}
    for strategy in args.strategies:
        world, mesh, options = small_layout(strategy)
        spec = RunSpec(model="moe" if "ep" in strategy.split("+") else "gpt", strategy=strategy,
                       world_size=world, mesh=mesh, options=options, steps=1, batch_size=8,
                       device="cpu")
        # spawn: each rank starts from a bare interpreter, so nothing is preloaded for it
        records = launch(spec, start_method="spawn", task=imports_task).wait(timeout=600)
        rows[strategy] = next(r for r in records if r["rank"] == 0)
        print(f"{strategy:>10}: {rows[strategy]['modules']} modules, "
              f"{rows[strategy]['heavy']}", flush=True)
    costs = {m: import_cost(m, args.repeats) for m in ("torch._dynamo", "torch.utils.flop_counter",
                                                        "torch.distributed.pipelining")}
    print("import seconds after torch and the worker:", costs)
    return {"ranks_import": rows, "import_s_after_base": costs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", metavar="REV", help="git revision to measure beside this one")
    parser.add_argument("--after", metavar="REV", help="git revision to measure instead of "
                        "this checkout's files")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--strategies", default="single,ddp,fsdp,tp",
                        type=lambda text: text.split(","))
    parser.add_argument("--imports", action="store_true",
                        help="what each strategy's rank imports (instead of the timings)")
    args = parser.parse_args()
    report("first_record_imports" if args.imports else "first_record",
           imports(args) if args.imports else compare(args))


if __name__ == "__main__":
    main()
