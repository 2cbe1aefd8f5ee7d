"""Check a GPU machine in at most 5 minutes: does everything gpututor measures work on CUDA?

Sections, each recorded with ok / error / its figures (a failing section does not stop the rest):

1. ``environment``: torch, CUDA, the GPUs, and whether MFU has a known peak for this GPU.
2. ``single_rank``: one CUDA rank trains; its step-0 loss equals a CPU run's (same seed, data).
3. ``precision``: fp32 vs bf16 (and fp16) tokens/s and MFU, interleaved, on the largest GPT.
4. ``strategies``: every registered strategy's default run on CUDA (2 ranks where 2 GPUs exist).
5. ``capacity``: ``device_memory`` at 1.5x a run's measured peak trains, at 0.6x it fails with
   the guard's out of memory. ``torchrun``: two torchrun "nodes" on this machine with
   ``--device`` (a real run with 2+ GPUs or on CPU; with one GPU each node's checks and the
   layout, ``--dry-run``).
6. ``memory``: the tracker the worker uses (``LiveBytesProbe``) vs
   ``torch.cuda.max_memory_allocated`` on the same step, and parameter bytes vs ``torch.cuda.memory_allocated``.
7. ``devices``: each rank's current CUDA device is its own after ``init_process_group`` (the
   worker calls ``set_device`` first), and an object collective works across ranks; the
   one-GPU policy's choice in words; a dry run of an 8-rank fsdp layout (fake process group).
8. ``lessons``: lessons 00 and 01 with their exercises checked (the tests' augmented copies:
   solutions pass, wrong answers are rejected), then every ``notebooks/*.ipynb`` top to bottom
   in a fresh kernel (device "auto" = CUDA), with whatever time is left.

    benchmarks/gpu_check.sh [OUT_DIR]          # the 5-minute check on a GPU machine
    python benchmarks/gpu_check.py --device cpu --quick --no-lessons   # smoke test, no GPU

Writes OUT_DIR/gpu_check.json and OUT_DIR/gpu_check.md. Exit code 0 when every section passed,
1 when one failed or was not run (out of time: nothing passes by skipping), 2 when no CUDA
device is visible (unless ``--device cpu``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_CELL_TIMEOUT_S = 300
MEMORY_TOLERANCE = 0.10   # tracker vs allocator, after the allocator's non-tensor bytes


class Budget:
    """Seconds left of the whole check; sections ask before they start."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


# ---- sections ---------------------------------------------------------------------------------

def section_environment(cfg: dict) -> dict:
    from gpututor import hardware
    from gpututor.measure.flops import device_peak_flops

    info = hardware.describe()
    device = torch.device(cfg["device"], 0) if cfg["device"] == "cuda" else torch.device("cpu")
    peaks = {p: device_peak_flops(device, p) for p in ("fp32", "bf16", "fp16")}
    return {"ok": True, **info, "peak_flops": peaks,
            "mfu_available": any(v for v in peaks.values()),
            "nccl": torch.distributed.is_nccl_available()}


def section_single_rank(cfg: dict) -> dict:
    from gpututor import RunSpec, launch

    spec = RunSpec(strategy="single", world_size=1, device=cfg["device"], steps=cfg["steps"],
                   model_size=cfg["small_model"], batch_size=cfg["batch"])
    run = _finish(launch(spec), cfg["run_timeout_s"])
    reference = _finish(launch(spec.replace(device="cpu", steps=1)), cfg["run_timeout_s"])
    losses = run["losses"]
    loss0_diff = abs(losses[0] - reference["losses"][0])
    ok = (str(run["device"]).startswith(cfg["device"]) and all(map(math.isfinite, losses))
          and losses[-1] < losses[0] and loss0_diff < 1e-3)
    return {"ok": ok, "device": run["device"], "steps": run["steps"],
            "tokens_per_s": run["tokens_per_s"], "step_time_s": run["step_time_s"],
            "first_loss": losses[0], "final_loss": losses[-1],
            "first_loss_cpu": reference["losses"][0], "first_loss_abs_diff_vs_cpu": loss0_diff,
            "peak_mem_bytes": run["peak_mem_bytes"][0], "mfu": run["mfu"]}


def section_precision(cfg: dict) -> dict:
    """fp32 vs bf16 (vs fp16 on CUDA), interleaved A B C A B C so drift hits each alike."""
    from gpututor import RunSpec, launch

    precisions = ["fp32", "bf16"] + (["fp16"] if cfg["device"] == "cuda" else [])
    base = RunSpec(strategy="single", world_size=1, device=cfg["device"], steps=cfg["steps"],
                   model_size=cfg["big_model"], batch_size=cfg["big_batch"],
                   seq_len=cfg["seq_len"])
    runs = {p: [] for p in precisions}
    for _ in range(cfg["repeats"]):
        for p in precisions:
            runs[p].append(_finish(launch(base.replace(precision=p)), cfg["run_timeout_s"]))
    rows = {}
    for p, summaries in runs.items():
        tps = [s["tokens_per_s"] for s in summaries]
        mfus = [s["mfu"] for s in summaries if s["mfu"] is not None]
        rows[p] = {"tokens_per_s": statistics.median(tps), "tokens_per_s_runs": tps,
                   "mfu": statistics.median(mfus) if mfus else None,
                   "achieved_flops": statistics.median(s["achieved_flops"] or 0
                                                       for s in summaries),
                   "final_loss": summaries[-1]["final_loss"],
                   "peak_mem_bytes": summaries[-1]["peak_mem_bytes"][0]}
    ok = all(math.isfinite(r["final_loss"]) for r in rows.values())
    return {"ok": ok, "config": {"model_size": cfg["big_model"], "batch_size": cfg["big_batch"],
                                 "seq_len": cfg["seq_len"], "steps": cfg["steps"],
                                 "repeats": cfg["repeats"]},
            "by_precision": rows, "bf16_vs_fp32_tokens_per_s":
                rows["bf16"]["tokens_per_s"] / rows["fp32"]["tokens_per_s"]}


def section_strategies(cfg: dict, budget: Budget) -> dict:
    from gpututor import RunSpec
    from gpututor.parallel import STRATEGIES, check_spec, small_layout, small_model

    gpus = torch.cuda.device_count() if cfg["device"] == "cuda" else 2
    rows = {}
    for name in STRATEGIES:
        if budget.left() < 20:
            rows[name] = {"ok": None, "note": "not run: time budget spent"}
            continue
        world, mesh, options = small_layout(name)
        if mesh is None:
            world = min(world, gpus)   # one GPU: the 1-D strategies on one rank
        elif cfg["device"] == "cuda" and world > gpus:
            rows[name] = {"ok": None, "note": f"not run: needs {world} GPUs, {gpus} here"}
            continue
        try:
            spec = check_spec(RunSpec(strategy=name, model=small_model(name), world_size=world,
                                      device=cfg["device"],
                                      steps=cfg["strategy_steps"], timeout=30.0, mesh=mesh,
                                      options=options))
        except ValueError as exc:
            rows[name] = {"ok": None, "note": f"not run: {exc}"}
            continue
        rows[name] = _try_run(spec, cfg["run_timeout_s"])
    if cfg["device"] == "cuda" and gpus == 1 and budget.left() > 40:
        # What lesson 00's defaults (2 ranks) meet on a one-GPU machine: reported, not judged.
        spec = RunSpec(strategy="ddp", world_size=2, device="cuda", steps=3, timeout=20.0)
        rows["ddp (2 ranks on 1 GPU)"] = {**_try_run(spec, 40), "informational": True}
    judged = [r for r in rows.values() if not r.get("informational") and r["ok"] is not None]
    # a strategy this machine cannot run (too few GPUs) is said so; one left out of time fails
    out_of_time = any(r.get("note", "").startswith("not run: time budget") for r in rows.values())
    return {"ok": bool(judged) and all(r["ok"] for r in judged) and not out_of_time,
            "gpus": gpus, "runs": rows}


def section_capacity(cfg: dict) -> dict:
    """The capacity guard: a run's measured peak, then the same run with ``device_memory`` at
    1.5x that peak (must train) and at 0.6x (must fail with the guard's out of memory)."""
    from gpututor import RunFailed, RunSpec, launch

    spec = RunSpec(strategy="single", world_size=1, device=cfg["device"], steps=3,
                   model_size=cfg["small_model"], batch_size=cfg["batch"], timeout=30.0)
    peak = _finish(launch(spec), cfg["run_timeout_s"])["peak_mem_bytes"][0]
    roomy = _try_run(spec.replace(device_memory=int(1.5 * peak)), cfg["run_timeout_s"])
    try:
        _finish(launch(spec.replace(device_memory=int(0.6 * peak))), cfg["run_timeout_s"])
        tight = {"failed": False, "error": None}
    except RunFailed as exc:
        tight = {"failed": True, "error": str(exc).splitlines()[0][:300]}
    ok = roomy["ok"] and tight["failed"] and "ran out of memory" in (tight["error"] or "")
    return {"ok": ok, "measured_peak_bytes": peak, "at_1.5x_peak": roomy, "at_0.6x_peak": tight}


def section_torchrun(cfg: dict) -> dict:
    """Two torchrun "nodes" on this machine, one rank each, started with ``--device`` (and node
    k on GPU k with ``--first-gpu``): with 2+ GPUs a real NCCL run; with one GPU both nodes
    would share it (NCCL refuses), so each node checks its own GPU and the job's layout with
    ``--dry-run``; on CPU (the smoke test) a real gloo run."""
    gpus = torch.cuda.device_count() if cfg["device"] == "cuda" else 0
    real = cfg["device"] == "cpu" or gpus >= 2
    port = _free_port()
    common = ["--model-size", "tiny", "--batch-size", "8", "--steps", "3", "--timeout", "30",
              "--device", cfg["device"], "--quiet"] + ([] if real else ["--dry-run"])
    procs = []
    with tempfile.TemporaryDirectory() as folder:
        for node in range(2):
            out = Path(folder) / f"node{node}.json"
            command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                       "--node-rank", str(node), "--nproc-per-node", "1", "--master-addr",
                       "127.0.0.1", "--master-port", str(port), "-m", "gpututor", "run",
                       *common, "--first-gpu", str(node if cfg["device"] == "cuda" and real
                                                   else 0), "--json", str(out)]
            procs.append((subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True), out))
        results = []
        for proc, out in procs:
            try:
                output, _ = proc.communicate(timeout=cfg["run_timeout_s"])
            except subprocess.TimeoutExpired:
                proc.kill()
                output, _ = proc.communicate()
            results.append({"exit": proc.returncode, "tail": output[-800:],
                            "summary": json.loads(out.read_text()) if out.exists() else None})
    summary = results[0]["summary"] or {}
    ok = all(r["exit"] == 0 for r in results) and (
        summary.get("final_loss") is not None if real else bool(summary.get("dry_run")))
    return {"ok": ok, "mode": "real run" if real else "dry run (one GPU: both nodes on it)",
            "gpus": gpus, "nodes": [{"exit": r["exit"], "tail": r["tail"]} for r in results],
            "final_loss": summary.get("final_loss")}


def _free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def devices_task(spec, rank, world_size, device, emit) -> None:
    import torch.distributed as dist
    current = torch.cuda.current_device() if device.type == "cuda" else None
    seen = [None] * world_size
    dist.all_gather_object(seen, {"rank": rank, "current": current})   # buffers on the current device
    emit({"step": 0, "device": str(device), "current": current,
          "gathered": sorted(s["rank"] for s in seen)})


def section_devices(cfg: dict) -> dict:
    from gpututor import RunSpec, launch
    from gpututor.runtime.dry_run import dry_run

    gpus = torch.cuda.device_count() if cfg["device"] == "cuda" else 0
    world = max(2, min(gpus, 4)) if gpus >= 2 else 2
    device = "cuda" if gpus >= 2 else "cpu"
    records = launch(RunSpec(world_size=world, device=device, timeout=30.0),
                     task=devices_task).wait()
    bound = all(r["current"] == (r["rank"] if device == "cuda" else None) for r in records)
    gathered = all(r["gathered"] == list(range(world)) for r in records)
    rows = dry_run(RunSpec(model="gpt", model_size="small", strategy="fsdp", world_size=8,
                           batch_size=16, seq_len=32))
    return {"ok": bound and gathered, "ranks": world, "device": device,
            "note": None if device == "cuda" else "fewer than 2 GPUs: binding checked on CPU only",
            "current_device_per_rank": [r["current"] for r in sorted(records, key=lambda r: r["rank"])],
            "auto_for_2_ranks": RunSpec(world_size=2).device_choice()[1],
            "dry_run_fsdp_8_ranks_total_bytes": [r["total"] for r in rows]}


def memory_task(spec, rank, world_size, device, emit) -> None:
    """In a rank: one step measured by the worker's tracker and by the CUDA allocator at once."""
    from gpututor import batches, build_model
    from gpututor.measure.memory import LiveBytesProbe, optimizer_tensors, tensor_bytes
    from gpututor.measure.timing import StepContext
    from gpututor.parallel import get_strategy

    cuda = device.type == "cuda"
    allocated = (lambda: torch.cuda.memory_allocated(device)) if cuda else (lambda: None)
    strategy, ctx = get_strategy(spec.strategy), StepContext(spec, rank, world_size, device)
    before = allocated()
    model = build_model(spec).to(device)
    params_allocated = allocated() - before if cuda else None
    params_bytes = tensor_bytes([*model.parameters(), *model.buffers()])
    model = strategy.wrap(model, ctx)
    optimizer = strategy.make_optimizer(model, spec)
    for step, (inputs, targets) in enumerate(batches(spec, rank, world_size)):
        micro = [(inputs.to(device), targets.to(device))]
        if step == 0:  # creates the optimizer state, as in the worker
            strategy.train_step(model, optimizer, micro, ctx)
            continue
        params = list(model.parameters())
        grads_before = tensor_bytes(p.grad for p in params)
        baseline = [*params, *model.buffers(), *optimizer_tensors(optimizer), *micro[0]]
        if cuda:
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        allocated_before = allocated()
        with LiveBytesProbe(baseline) as probe:
            ctx.probe = probe
            strategy.train_step(model, optimizer, micro, ctx)
        ctx.probe = None
        if cuda:
            torch.cuda.synchronize(device)
        emit({"step": step, "probe_peak": probe.peak, "probe_baseline": probe.baseline,
              "probe_at_peak": dict(probe.at_peak), "activations": probe.forward_end,
              "grads_before_step": grads_before, "allocated_before_step": allocated_before,
              "allocator_peak": torch.cuda.max_memory_allocated(device) if cuda else None,
              "params_bytes": params_bytes, "params_allocated": params_allocated})
        return


def section_memory(cfg: dict) -> dict:
    from gpututor import RunSpec, launch

    spec = RunSpec(strategy="single", world_size=1, device=cfg["device"], steps=2,
                   model_size=cfg["big_model"], batch_size=cfg["big_batch"] // 2,
                   seq_len=cfg["seq_len"])
    run = launch(spec, task=memory_task)
    (r,) = _finish(run, cfg["run_timeout_s"])
    out = {"probe_peak_bytes": r["probe_peak"], "allocator_peak_bytes": r["allocator_peak"],
           "activations_bytes": r["activations"], "probe_at_peak": r["probe_at_peak"],
           "params_bytes": r["params_bytes"], "params_allocated_bytes": r["params_allocated"]}
    if r["allocator_peak"] is None:
        return {"ok": True, **out, "note": "no CUDA allocator on CPU: tracker figures only"}
    # Bytes the allocator holds that are no tensor the tracker can see: cuBLAS workspaces,
    # block rounding (512 B), and the previous step's gradients (freed early in this step).
    overhead = r["allocated_before_step"] - r["probe_baseline"] - r["grads_before_step"]
    explained = r["probe_peak"] + overhead
    ratio = explained / r["allocator_peak"]
    params_ratio = r["params_bytes"] / r["params_allocated"]
    return {"ok": abs(ratio - 1) <= MEMORY_TOLERANCE and abs(params_ratio - 1) <= 0.01, **out,
            "allocator_only_bytes": overhead, "tracker_plus_allocator_only_vs_peak": ratio,
            "tracker_vs_allocator_peak_raw": r["probe_peak"] / r["allocator_peak"],
            "params_bytes_vs_allocated": params_ratio, "tolerance": MEMORY_TOLERANCE}


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
                 for name in EXERCISED]
    return {"ok": all(e is True for e in exercised) and all(r["ok"] for r in ran),
            "parallel": cfg["parallel_notebooks"], "notebooks": dict(sorted(rows.items()))}


# ---- helpers ----------------------------------------------------------------------------------

def _finish(run, timeout: float) -> dict:
    try:
        return run.wait(timeout=timeout)
    except TimeoutError:
        run.stop()
        raise


def _try_run(spec, timeout: float) -> dict:
    from gpututor import launch

    start = time.monotonic()
    try:
        s = _finish(launch(spec), timeout)
    except Exception as exc:  # noqa: BLE001 - recorded in the report
        return {"ok": False, "world_size": spec.world_size,
                "error": f"{type(exc).__name__}: {str(exc)[:1500]}",
                "seconds": round(time.monotonic() - start, 1)}
    ok = s["final_loss"] is not None and math.isfinite(s["final_loss"])
    return {"ok": ok, "world_size": spec.world_size, "tokens_per_s": s["tokens_per_s"],
            "final_loss": s["final_loss"], "peak_mem_bytes": s["peak_mem_bytes"],
            "comm_s": s["comm_s"], "seconds": round(time.monotonic() - start, 1)}


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
    proc = subprocess.Popen([sys.executable, "-c", NOTEBOOK_RUNNER, str(path),
                             str(ROOT / "notebooks"),
                             str(NOTEBOOK_CELL_TIMEOUT_S)], stdout=log, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
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
    return {"ok": False, "seconds": seconds, "error": output[-1500:]}


def run_section(name: str, fn, report: dict, budget: Budget, *args) -> None:
    if budget.left() < 15:
        report["sections"][name] = {"ok": None, "note": "not run: time budget spent"}
        return
    start = time.monotonic()
    print(f"== {name}", flush=True)
    try:
        result = fn(*args)
    except Exception as exc:  # noqa: BLE001 - one failing section must not hide the others
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc()[-3000:]}
    result["seconds"] = round(time.monotonic() - start, 1)
    report["sections"][name] = result
    print(f"   {'ok' if result['ok'] else 'not ok' if result['ok'] is False else 'not run'}"
          f" ({result['seconds']} s)", flush=True)


PASSING = {   # what "ok" means for each section, said in the report
    "environment": "torch sees the GPU(s) and NCCL; MFU has a peak if the GPU is in the catalogue",
    "single_rank": "one CUDA rank trains (loss falls) and its step-0 loss equals a CPU run's "
                   "within 1e-3",
    "precision": "fp32, bf16 and fp16 runs of the largest GPT finish with finite losses; their "
                 "tokens/s and MFU are reported (bf16 faster than fp32 on tensor cores)",
    "strategies": "every strategy that fits this machine's GPUs trains to a finite loss",
    "capacity": "device_memory at 1.5x the measured peak trains; at 0.6x the guard stops the run "
                "with \"ran out of memory\"",
    "torchrun": "two torchrun nodes on this machine, --device cuda: both exit 0 (a real NCCL run "
                "with 2+ GPUs, each node's checks and the layout with one GPU)",
    "memory": "the live-tensor probe plus the allocator's non-tensor bytes is within 10 % of "
              "max_memory_allocated; parameter bytes equal memory_allocated within 1 %",
    "devices": "each rank's current device is its own GPU after init; an object collective works",
    "lessons": "lessons 00 and 01 run with their exercises (solutions pass, wrong answers are "
               "rejected), then every lesson runs top to bottom",
}


def markdown(report: dict) -> str:
    env = report["sections"].get("environment", {})
    gpus = ", ".join(g["name"] for g in env.get("gpus", [])) or "none"
    lines = [f"# GPU check ({report['date']})", "",
             f"device: {report['device']} · GPUs: {gpus} · torch {env.get('torch')} · "
             f"CUDA {env.get('cuda')} · total {report['seconds']:.0f} s", ""]
    if report["device"] != "cuda":
        lines += ["**Smoke test on CPU: not a GPU check.** It shows the script runs; the figures "
                  "below are CPU figures.", ""]
    lines += ["| section | result | seconds | passing means |", "| --- | --- | --- | --- |"]
    for name, s in report["sections"].items():
        verdict = {True: "ok", False: "FAILED", None: s.get("note", "not run")}[s["ok"]]
        lines.append(f"| {name} | {verdict} | {s.get('seconds', '')} | {PASSING.get(name, '')} |")
    capacity = report["sections"].get("capacity", {})
    if "measured_peak_bytes" in capacity:
        lines += ["", "## Capacity guard", "",
                  f"- measured peak: {capacity['measured_peak_bytes'] / 1e6:,.1f} MB",
                  f"- at 1.5x: {'trained' if capacity['at_1.5x_peak']['ok'] else 'FAILED: ' + str(capacity['at_1.5x_peak'].get('error'))[:200]}",
                  "- at 0.6x: " + (capacity["at_0.6x_peak"]["error"] or "did NOT fail")]
    torchrun = report["sections"].get("torchrun", {})
    if "nodes" in torchrun:
        lines += ["", "## Two torchrun nodes", "", f"- {torchrun['mode']}; exit codes "
                  f"{[n['exit'] for n in torchrun['nodes']]}; final loss {torchrun['final_loss']}"]
    precision = report["sections"].get("precision", {})
    if "by_precision" in precision:
        lines += ["", "## Precision (median of interleaved runs)", "",
                  "| precision | tokens/s | MFU | peak memory |", "| --- | --- | --- | --- |"]
        for p, r in precision["by_precision"].items():
            mfu = "n/a (no known peak)" if r["mfu"] is None else f"{r['mfu']:.1%}"
            lines.append(f"| {p} | {r['tokens_per_s']:,.0f} | {mfu} | "
                         f"{(r['peak_mem_bytes'] or 0) / 1e6:,.0f} MB |")
        lines.append(f"\nbf16 / fp32 tokens/s: {precision['bf16_vs_fp32_tokens_per_s']:.2f}×")
    memory = report["sections"].get("memory", {})
    if "probe_peak_bytes" in memory:
        lines += ["", "## Memory: tracker vs allocator (one step)", ""]
        lines.append(f"- tracker peak (live tensors): {memory['probe_peak_bytes'] / 1e6:,.1f} MB")
        if memory.get("allocator_peak_bytes") is not None:
            lines.append(f"- `torch.cuda.max_memory_allocated`: "
                         f"{memory['allocator_peak_bytes'] / 1e6:,.1f} MB (of which "
                         f"{memory['allocator_only_bytes'] / 1e6:,.1f} MB no tensor: workspaces,"
                         f" rounding); tracker + that = "
                         f"{memory['tracker_plus_allocator_only_vs_peak']:.3f} × the peak")
            lines.append(f"- parameter bytes / `memory_allocated` after `.to(cuda)`: "
                         f"{memory['params_bytes_vs_allocated']:.4f}")
    devices = report["sections"].get("devices", {})
    if "ranks" in devices:
        lines += ["", "## Devices", "",
                  f"- current CUDA device per rank after init: {devices['current_device_per_rank']}"
                  + (f" ({devices['note']})" if devices.get("note") else ""),
                  f"- device='auto' for 2 ranks here: {devices['auto_for_2_ranks']}",
                  f"- dry run, fsdp on 8 ranks: {devices['dry_run_fsdp_8_ranks_total_bytes'][0]:,} "
                  "bytes of model state per rank"]
    for title, key, sub in (("Strategies", "strategies", "runs"),
                            ("Lessons", "lessons", "notebooks")):
        rows = report["sections"].get(key, {}).get(sub)
        if rows:
            lines += ["", f"## {title}", "", "| name | result | detail |", "| --- | --- | --- |"]
            for name, r in rows.items():
                verdict = {True: "ok", False: "FAILED", None: "not run"}[r["ok"]]
                detail = r.get("error") or r.get("note") or (
                    f"{r['tokens_per_s']:,.0f} tokens/s on {r['world_size']} rank(s)"
                    if r.get("tokens_per_s") else f"{r.get('seconds')} s")
                detail = " ".join(str(detail).split())[:300].replace("|", "/")
                lines.append(f"| {name} | {verdict} | {detail} |")
    return "\n".join(lines) + "\n"


CONFIGS = {  # sizes for a GPU (big enough to keep it busy for a few ms a step) and a quick one
    "full": {"steps": 30, "strategy_steps": 10, "repeats": 2, "small_model": "small",
             "big_model": "large", "batch": 64, "big_batch": 256, "seq_len": 256,
             "run_timeout_s": 90, "parallel_notebooks": 3},
    "quick": {"steps": 6, "strategy_steps": 4, "repeats": 1, "small_model": "tiny",
              "big_model": "tiny", "batch": 8, "big_batch": 8, "seq_len": 32,
              "run_timeout_s": 90, "parallel_notebooks": 1},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_check")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: a smoke test of this script on a machine without a GPU")
    parser.add_argument("--budget-s", type=float, default=280.0)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (for the smoke test)")
    parser.add_argument("--no-lessons", action="store_true", help="skip running the notebooks")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"gpu_check: no CUDA device is visible (torch {torch.__version__}, built with "
              f"CUDA {torch.version.cuda}); this check is for a machine with a GPU and a CUDA "
              "build of torch. For a smoke test of the script: --device cpu --quick",
              file=sys.stderr)
        return 2
    cfg = {**CONFIGS["quick" if args.quick else "full"], "device": args.device}
    budget, started = Budget(args.budget_s), time.monotonic()
    report = {"date": time.strftime("%Y-%m-%d %H:%M"), "device": args.device, "config": cfg,
              "sections": {}}
    run_section("environment", section_environment, report, budget, cfg)
    run_section("single_rank", section_single_rank, report, budget, cfg)
    run_section("precision", section_precision, report, budget, cfg)
    run_section("strategies", section_strategies, report, budget, cfg, budget)
    run_section("capacity", section_capacity, report, budget, cfg)
    run_section("torchrun", section_torchrun, report, budget, cfg)
    run_section("memory", section_memory, report, budget, cfg)
    run_section("devices", section_devices, report, budget, cfg)
    if not args.no_lessons:
        run_section("lessons", section_lessons, report, budget, cfg, budget)
    report["seconds"] = round(time.monotonic() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str))
    (args.out / "gpu_check.md").write_text(markdown(report))
    print(markdown(report))
    print(f"report: {args.out / 'gpu_check.md'} and gpu_check.json")
    # a section left out by the time budget fails the check too: nothing passes by skipping
    # (--no-lessons leaves the lessons out on purpose, for the CPU smoke test)
    return 0 if all(s["ok"] is True for s in report["sections"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
