"""gpututor's launcher side by side with the tools learners already know, in real Jupyter kernels.

Launchers: gpututor (``launch``), Lightning (``Trainer(strategy=DDPStrategy(start_method="fork"))``,
i.e. ``ddp_notebook``), Accelerate (``notebook_launcher``), plain ``torch.multiprocessing`` spawn.
Same work for all (benchmarks/peers_worker.py): DDP on the tiny GPT, 2 CPU ranks with one thread
each, same global batch and steps. Each trial is a fresh kernel (jupyter_client), launchers
interleaved, and in each kernel:

1. ``first_step_fresh_s``: the first launch in the fresh kernel, from the call to rank 0's first
   finished step, right after the imports (gpututor in its lessons' kernel, "Python 3 (gpututor)",
   which starts the forkserver at kernel start; the peers in ipykernel's "python3"); 2. ``first_step_later_s`` and ``tokens_per_s`` (steady, rank 0): a second launch;
3. ``fault_to_control_s``: rank 1 raises at step 2; from the raise to the cell getting control
   back; 4. ``hang_to_control_s``: rank 1 stops at step 2 (every launcher's process group times
   out after 10 s); 5. ``leftovers``: rank processes still alive 5 s after the fault and the hang
   (the forkserver and resource tracker are helpers, not counted); ``handlers_changed``: whether
   the kernel's SIGINT/SIGTERM/SIGCHLD/SIGHUP handlers differ afterwards (1) or not (0).

Two more fresh kernels per launcher and trial, both ipykernel's "python3": ``first_step_warmed_s``
(the first launch 5 s after the imports: a lesson's first cells have run) and, for gpututor
only, ``first_step_fresh_python3_s`` (its first launch right after the imports in a kernel that
is not its own: the forkserver starts at ``import gpututor``, after ``import torch`` here).

    make bench-peers        # installs the `peers` extra, then: python benchmarks/bench_peers.py

Writes benchmarks/results/peers.json (rows: launcher, metric, median, min, max, n) and peers.md
(a table with gpututor's ratio to the best peer per metric; lower is better except tokens/s).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAUNCHERS = ("gpututor", "lightning", "accelerate", "spawn")
METRICS = ("first_step_fresh_s", "first_step_fresh_python3_s", "first_step_warmed_s",
           "first_step_later_s", "tokens_per_s", "fault_to_control_s",
           "hang_to_control_s", "leftovers", "handlers_changed")
HIGHER_IS_BETTER = {"tokens_per_s"}

COMMON = f"""
import json, os, signal, sys, tempfile, time
sys.path.insert(0, {str(HERE)!r})
import psutil
import peers_worker as W
WATCHED = [signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP]
BEFORE = {{s: signal.getsignal(s) for s in WATCHED}}

def leftovers():
    time.sleep(5)
    alive = []
    for p in psutil.Process().children(recursive=True):
        try:
            line = " ".join(p.cmdline())
            if p.status() != psutil.STATUS_ZOMBIE and "forkserver" not in line and "resource_tracker" not in line:
                alive.append(p)
        except psutil.Error:
            pass
    return len(alive)
"""

# The peers' kernels import torch._dynamo before they launch. torch imports it the first time
# a model is built (nn.Embedding, the optimizers); a kernel that forks its ranks then hands it
# to them, as a learner's kernel has it after building any model there. Without it each forked
# rank imports it itself (about 1.2 s here). gpututor's kernel does not: its ranks come from
# its forkserver, never from the kernel.
PEER_KERNEL = """
import torch._dynamo
"""

RUNNERS = {
    "gpututor": """
from gpututor import launch
def RUN(fault, out):
    spec = W.SPEC.replace(inject_fault={"raise": "1:2", "hang": "1:2:hang"}.get(fault))
    t0 = time.time()
    run = launch(spec)
    run.echo = None
    try:
        summary = run.wait()
    except Exception:
        summary = None
    back = time.time()
    first = run.first_record_at and t0 + (run.first_record_at - run.launched_at)
    W.note(out, "first_step", first) if first else None
    if summary and summary.get("tokens_per_s"):
        W.note(out, "tokens_per_s", summary["tokens_per_s"])   # global tokens/s, as W.Meter
    r1 = [r["time"] for r in run.records if r["rank"] == 1]
    if fault and r1:   # rank 1's last record ends just before it raises or stops
        W.note(out, "fault_at", t0 + max(r1))
    return t0, back
""",
    "lightning": PEER_KERNEL + """
def RUN(fault, out):
    t0 = time.time()
    try:
        W.lightning_fit(out, fault)
    except BaseException:
        pass
    return t0, time.time()
""",
    "accelerate": PEER_KERNEL + """
from accelerate import notebook_launcher
def RUN(fault, out):
    t0 = time.time()
    try:
        notebook_launcher(W.accelerate_loop, args=(out, fault), num_processes=2)
    except BaseException:
        pass
    return t0, time.time()
""",
    "spawn": PEER_KERNEL + """
import torch.multiprocessing as tmp
def RUN(fault, out):
    t0 = time.time()
    try:
        tmp.start_processes(W.plain_loop, args=(2, W.free_port(), out, fault), nprocs=2,
                            start_method="spawn", join=True)
    except BaseException:
        pass
    return t0, time.time()
""",
}

TRIAL = """
result = {}
out = tempfile.mkdtemp(); t0, _ = RUN(None, out)
result["first_step_fresh_s"] = W.read(out, "first_step") - t0 if W.read(out, "first_step") else None
out = tempfile.mkdtemp(); t0, _ = RUN(None, out)
result["first_step_later_s"] = W.read(out, "first_step") - t0 if W.read(out, "first_step") else None
result["tokens_per_s"] = W.read(out, "tokens_per_s")
left = 0
for fault in ("raise", "hang"):
    out = tempfile.mkdtemp(); t0, back = RUN(fault, out)
    at = W.read(out, "fault_at")
    result[("fault" if fault == "raise" else "hang") + "_to_control_s"] = back - at if at else None
    left += leftovers()
result["leftovers"] = left
result["handlers_changed"] = int({s: signal.getsignal(s) for s in WATCHED} != BEFORE)
print("RESULT " + json.dumps(result))
"""


def one_launch(metric: str, pause_s: float) -> str:
    """Kernel code: wait ``pause_s``, launch once, report the first step as ``metric``."""
    return f"""
time.sleep({pause_s})
out = tempfile.mkdtemp(); t0, _ = RUN(None, out)
print("RESULT " + json.dumps({{{metric!r}: W.read(out, "first_step") - t0
                                if W.read(out, "first_step") else None}}))
"""


def kernels_of(launcher: str) -> list[tuple[str, str]]:
    """(kernel name, trial code) of each fresh kernel one trial of ``launcher`` takes."""
    own = "gpututor" if launcher == "gpututor" else "python3"
    kernels = [(own, TRIAL), ("python3", one_launch("first_step_warmed_s", 5.0))]
    if launcher == "gpututor":
        kernels.append(("python3", one_launch("first_step_fresh_python3_s", 0.0)))
    return kernels


def run_kernel(launcher: str, timeout: float, kernel_name: str = "python3",
               trial: str = TRIAL) -> dict:
    import jupyter_client
    km = jupyter_client.KernelManager(kernel_name=kernel_name)
    # Peers' kernels import gpututor only for the model and data: no forkserver warming up
    # there (it would take a core from them, and it is gpututor's, not theirs).
    warm = "1" if launcher == "gpututor" else "0"
    km.start_kernel(env={**os.environ, "OMP_NUM_THREADS": "1", "GPUTUTOR_WARM_UP": warm})
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        text = execute(client, COMMON + RUNNERS[launcher] + trial, timeout)
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)
    line = next((l for l in text.splitlines() if l.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"{launcher}: no result; the kernel said:\n{text[-3000:]}")
    return json.loads(line[len("RESULT "):])


def execute(client, code: str, timeout: float) -> str:
    msg_id = client.execute(code, stop_on_error=False)
    out, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = client.get_iopub_msg(timeout=max(1.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - queue.Empty: the deadline passed
            break
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if kind == "stream":
            out.append(msg["content"]["text"])
        elif kind == "error":
            out.append("\n".join(msg["content"]["traceback"]))
        elif kind == "status" and msg["content"]["execution_state"] == "idle":
            return "".join(out)
    return "".join(out) + "\n[timed out]"


def summarize(results: dict) -> list[dict]:
    rows = []
    for launcher, trials in results.items():
        for metric in METRICS:
            values = [t[metric] for t in trials if t.get(metric) is not None]
            rows.append({"launcher": launcher, "metric": metric,
                         "median": statistics.median(values) if values else None,
                         "min": min(values) if values else None,
                         "max": max(values) if values else None, "n": len(values)})
    return rows


def markdown(rows: list[dict], trials: int) -> str:
    by = {(r["launcher"], r["metric"]): r for r in rows}
    launchers = sorted({r["launcher"] for r in rows}, key=LAUNCHERS.index)
    fmt = lambda r: "not measured" if r is None or r["median"] is None else (
        f"{r['median']:,.0f}" if r["metric"] == "tokens_per_s" else f"{r['median']:.3g}")
    lines = [f"Medians over {trials} trials of fresh kernels each (2 CPU ranks, one thread each). "
             "first_step_fresh_s: gpututor in its lessons' kernel (forkserver started at kernel "
             "start), the peers in ipykernel's python3; first_step_fresh_python3_s: gpututor in "
             "python3 (the peers' fresh launch is already there). The peers' kernels import "
             "torch._dynamo before launching, so their forked ranks inherit it (PEER_KERNEL).", "",
             "| metric | " + " | ".join(launchers) + " | gpututor / best peer |",
             "|---" * (len(launchers) + 2) + "|"]
    for metric in METRICS:
        cells = [fmt(by.get((l, metric))) for l in launchers]
        peers = [by[(l, metric)]["median"] for l in launchers if l != "gpututor"
                 and by.get((l, metric)) and by[(l, metric)]["median"] is not None]
        ours = by.get(("gpututor", metric), {}).get("median")
        best = (max(peers) if metric in HIGHER_IS_BETTER else min(peers)) if peers else None
        ratio = f"{ours / best:.2f}" if ours is not None and best else "n/a"
        lines.append(f"| {metric} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--launchers", default=",".join(LAUNCHERS))
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per kernel")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    chosen = args.launchers.split(",")
    results = {l: [] for l in chosen}
    for trial in range(args.trials):
        order = chosen[trial % len(chosen):] + chosen[:trial % len(chosen)]   # interleaved
        for launcher in order:
            start = time.monotonic()
            merged = {}
            for kernel_name, code in kernels_of(launcher):
                try:
                    merged.update(run_kernel(launcher, args.timeout, kernel_name, code))
                except Exception as exc:  # noqa: BLE001 - one launcher failing is a result
                    print(f"{launcher}: trial {trial} ({kernel_name}) failed: {exc}",
                          file=sys.stderr)
            results[launcher].append(merged)
            print(f"trial {trial} {launcher}: {results[launcher][-1]} "
                  f"({time.monotonic() - start:.0f} s)", flush=True)
    rows = summarize(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "peers.json").write_text(json.dumps(rows, indent=2))
    table = markdown(rows, args.trials)
    (args.out / "peers.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
