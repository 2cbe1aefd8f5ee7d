"""The device check's sections, each ``section_*(cfg)`` returning ``ok`` (True, False, or None
with a ``note``) and its figures. They import gpututor inside, so ``benchmarks/gpu_check.py``
starts with only torch; it says what each needs. :func:`start_child` starts subprocesses in a
session of their own, so the check can end each one and everything under it."""
from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
MEMORY_TOLERANCE = 0.10   # tracker vs allocator, after the allocator's non-tensor bytes
# gpututor's runtime (launch, the worker, torchrun's entry point) imports these at module level
RUNTIME = ("numpy", "psutil", "cloudpickle")
CHILDREN: list[subprocess.Popen] = []   # every subprocess a section started, ended at exit


def start_child(command: list[str], **kwargs) -> subprocess.Popen:
    """Start ``command`` in a session of its own, remembered so the check can end it (and all it
    started) at exit, on SIGTERM or on a timeout."""
    proc = subprocess.Popen(command, start_new_session=True, **kwargs)
    CHILDREN.append(proc)
    return proc


def finish_child(proc: subprocess.Popen, timeout: float) -> str:
    """Its output once it ends; past ``timeout`` it and all it started are killed first."""
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)   # the child's session: torchrun and its ranks too
        return proc.communicate()[0]


CUDA_OOM = """
import json, torch
total = torch.cuda.get_device_properties(0).total_memory
try:
    torch.empty(2 * total, dtype=torch.uint8, device="cuda")
    message = None
except torch.OutOfMemoryError as exc:
    message = str(exc)
after = (torch.ones(1024, device="cuda") * 2).sum().item()   # still usable after the OOM
print(json.dumps({"total_memory_bytes": total, "message": message, "sum_after": after}))
"""


def section_cuda_oom(cfg: dict) -> dict:
    """A real CUDA out-of-memory: allocate twice the GPU's memory; torch must raise
    ``torch.OutOfMemoryError`` saying "CUDA out of memory", and the device must stay usable.
    In a process of its own, so this one holds no CUDA context (exclusive compute mode)."""
    proc = start_child([sys.executable, "-c", CUDA_OOM], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    output, _ = proc.communicate(timeout=cfg["run_timeout_s"])
    if proc.returncode != 0:
        return {"ok": False, "error": output[-1500:]}
    r = json.loads(output.strip().splitlines()[-1])
    message = r["message"] or "allocating twice the GPU's memory did not fail"
    return {"ok": "CUDA out of memory" in message and r["sum_after"] == 2048,
            "total_memory_bytes": r["total_memory_bytes"], "message": message.splitlines()[0][:300]}


class Budget:
    """Seconds left of the whole check; sections ask before they start."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


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
            procs.append((start_child(command, cwd=ROOT, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True), out))
        results = []
        for proc, out in procs:
            output = finish_child(proc, cfg["run_timeout_s"])
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

