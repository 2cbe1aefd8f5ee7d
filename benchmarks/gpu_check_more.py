"""The device check's sections on the paths a lesson or a cluster takes besides ``launch()``'s
training: persistent ranks (``%%ranks``), checkpoints on the device, torchrun's own restarts, two
ranks sharing one GPU over gloo, FP8 matmuls on the tensor cores, and the GPU-marked tests. Each
``section_*(cfg)`` returns ``ok`` (True, False, or None with a ``note``) and its figures, as in
``gpu_check_sections.py``; gpututor is imported inside them."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from gpu_check_sections import ROOT, _finish, finish_child, start_child


def _cell(result) -> dict:
    """One ``%%ranks`` cell's outcome, as the report keeps it."""
    return {"ok": result.ok, "restarted": result.restarted, "message": result.message[:600],
            "values": [o.value for o in result.outcomes], "states": [o.state for o in result.outcomes],
            "errors": [(o.error or {}).get("message", "")[:300] for o in result.outcomes]}


def section_ranks(cfg: dict) -> dict:
    """``gpututor.ranks`` (what ``%%ranks`` runs) on the device: a CPU tensor all-reduced (gloo
    beside NCCL), a device tensor all-reduced, the ``--no-collectives`` guard refusing a
    collective and letting plain code run, a cell that never ends (the group restarts within its
    timeout and says so), and a cell after it. One rank per GPU: on one GPU one rank, whose
    hung cell is a sleep; on CPU two ranks, whose hung cell is a collective only rank 0 calls."""
    from gpututor import ranks

    cuda = cfg["device"] == "cuda"
    world = min(torch.cuda.device_count(), 2) if cuda else 2
    group = ranks(world, device=cfg["device"], timeout=30.0)
    try:
        want = float(sum(range(1, world + 1)))
        cpu = group.run("t = torch.ones(2) * (rank + 1)\ndist.all_reduce(t)\nt.tolist()")
        dev = group.run("u = torch.ones(2, device=device) * (rank + 1)\ndist.all_reduce(u)\n"
                        "(str(u.device), u.tolist())")
        refused = group.run("dist.all_reduce(torch.ones(1, device=device))", no_collectives=True)
        plain = group.run("(torch.arange(4., device=device) * 2).sum().item()",
                          no_collectives=True)
        hang = ("import time\ntime.sleep(120)" if world == 1
                else "if rank == 0:\n    dist.all_reduce(torch.ones(1))")
        started = time.monotonic()
        hung = group.run(hang, timeout=5.0)
        hung_s = time.monotonic() - started
        after = group.run("(torch.ones(1, device=device) * (rank + 1)).item()")
    finally:
        group.stop()
    checks = {
        "cpu_all_reduce": cpu.ok and all(v == repr([want, want]) for v in
                                        [o.value for o in cpu.outcomes]),
        "device_all_reduce": dev.ok and all(repr([want, want]) in v and
                                            (("cuda" in v) == cuda) for v in
                                            [o.value for o in dev.outcomes]),
        "guard_refuses": all(o.state == "error" and "not allowed" in o.error["message"]
                             for o in refused.outcomes),
        "guard_lets_plain_code_run": plain.ok,
        "hung_cell_restarts_within_timeout": hung.restarted and hung_s < 30
                                             and "timeout" in hung.message,
        "cell_after_restart": after.ok,
    }
    return {"ok": all(checks.values()), "ranks": world, "checks": checks,
            "hung_cell_seconds": round(hung_s, 1),
            "cells": {"cpu": _cell(cpu), "device": _cell(dev), "refused": _cell(refused),
                      "plain": _cell(plain), "hung": _cell(hung), "after": _cell(after)}}


def section_checkpoint(cfg: dict) -> dict:
    """Checkpoints on the device: an async save (DCP's ``async_save``) and a restart from it after
    an injected fault, whose losses must be the uninterrupted run's; and a checkpoint saved by
    FSDP on the device resumed as one process on the device and as DDP on two CPU ranks (DCP
    reshards), each continuing the uninterrupted run's losses."""
    from gpututor import RunSpec, launch

    dev = cfg["device"]
    base = RunSpec(strategy="single", world_size=1, device=dev, steps=6, model_size="tiny",
                   batch_size=8, seq_len=32, seed=3, timeout=30.0)
    out: dict = {}
    with tempfile.TemporaryDirectory() as folder:
        spec = base.replace(checkpoint_every=2, checkpoint_async=True,
                            checkpoint_dir=str(Path(folder) / "async"))
        full = _finish(launch(spec), cfg["run_timeout_s"])
        # saves after steps 2 and 4; at the fault (step 5) step 2's is written (one save at a
        # time) and step 4's may still be in flight: the restart resumes from 2 or 4
        restarted = _finish(launch(spec.replace(inject_fault="0:5"), max_restarts=1),
                            cfg["run_timeout_s"])
        diff = max(abs(a - b) for a, b in zip(restarted["losses"], full["losses"]))
        out["async_restart"] = {
            "ok": restarted["attempts"] == 2
                  and restarted["failures"][0]["resumed_from"] in (2, 4)
                  and len(restarted["losses"]) == 6 and diff <= 1e-5 * abs(full["losses"][-1]),
            "attempts": restarted["attempts"], "failures": restarted["failures"],
            "max_loss_diff_vs_uninterrupted": diff, "save_s": restarted.get("save_s")}
        sharded = base.replace(strategy="fsdp", steps=3, checkpoint_every=3,
                               checkpoint_dir=str(Path(folder) / "fsdp"))
        _finish(launch(sharded), cfg["run_timeout_s"])
        saved = str(Path(folder) / "fsdp" / "step3")
        for name, layout, tolerance in (
                (f"single on {dev}", base.replace(resume=saved), 1e-5),
                ("ddp on 2 CPU ranks", base.replace(strategy="ddp", world_size=2, device="cpu",
                                                    resume=saved), 1e-3 if dev == "cuda" else 1e-5)):
            s = _finish(launch(layout), cfg["run_timeout_s"])
            diff = max(abs(a - b) for a, b in zip(s["losses"], full["losses"][3:]))
            out[f"fsdp on {dev} -> {name}"] = {
                "ok": s["first_step"] == 3 and diff <= tolerance * abs(full["losses"][-1]),
                "first_step": s["first_step"], "max_loss_diff_vs_uninterrupted": diff,
                "relative_tolerance": tolerance}
    return {"ok": all(r["ok"] for r in out.values()), "device": dev, "checks": out}


def section_torchrun_restarts(cfg: dict) -> dict:
    """``torchrun --standalone`` on this machine (one rank per GPU; two ranks on CPU) with a fault
    injected at step 3: without ``--max-restarts`` it exits non-zero naming the fault; with
    ``--max-restarts 1`` torchrun starts the ranks again, each resumes from step 2 and the run
    ends with exit 0."""
    gpus = torch.cuda.device_count() if cfg["device"] == "cuda" else 0
    nproc = min(gpus, 2) if gpus else 2
    rows = {}
    with tempfile.TemporaryDirectory() as folder:
        for restarts in (0, 1):
            out = Path(folder) / f"r{restarts}.json"
            command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                       "--nproc-per-node", str(nproc), "--max-restarts", str(restarts),
                       "-m", "gpututor", "run", "--model-size", "tiny", "--batch-size", "8",
                       "--seq-len", "32", "--steps", "4", "--strategy", "ddp", "--quiet",
                       "--device", cfg["device"], "--checkpoint-every", "2",
                       "--inject-fault", f"{nproc - 1}:3", "--timeout", "30",
                       "--checkpoint-dir", str(Path(folder) / f"ckpt{restarts}"),
                       "--json", str(out)]
            proc = start_child(command, cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            output = finish_child(proc, cfg["run_timeout_s"])
            summary = json.loads(out.read_text()) if out.exists() else {}
            rows[f"max_restarts={restarts}"] = {"exit": proc.returncode,
                                                "errors": _errors(output),
                                                "names_fault": "InjectedFault" in output,
                                                "first_step": summary.get("first_step"),
                                                "attempts": summary.get("attempts")}
    without, with_ = rows["max_restarts=0"], rows["max_restarts=1"]
    ok = (without["exit"] != 0 and without["names_fault"]
          and with_["exit"] == 0 and with_["first_step"] == 2 and with_["attempts"] == 2)
    return {"ok": ok, "nproc_per_node": nproc, "runs": rows}


SHARED_GPU = """
import json, os, sys, tempfile, torch, torch.distributed as dist, torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

def rank_main(rank, store_path, out):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", rank=rank, world_size=2,
                            store=dist.FileStore(store_path, 2))
    gpu = torch.device("cuda", 0)
    t = torch.full((1 << 20,), float(rank + 1), device=gpu)
    dist.all_reduce(t)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 1)).to(gpu),
                device_ids=[0])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(rank + 1)   # each rank its own batch
    model(torch.randn(64, 256, device=gpu)).square().mean().backward()
    opt.step()
    sums = [None, None]
    dist.all_gather_object(sums, sum(p.double().sum().item() for p in model.parameters()))
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"all_reduce": t[0].item(), "checksums": sums,
                       "backend": dist.get_backend(), "tensor_device": str(t.device)}, f)
    dist.destroy_process_group()

if __name__ == "__main__":
    folder = tempfile.mkdtemp()
    out = os.path.join(folder, "out.json")
    mp.start_processes(rank_main, args=(os.path.join(folder, "store"), out), nprocs=2,
                       start_method="fork")   # this parent never touches CUDA
    print(open(out).read())
"""


def section_gloo_shared(cfg: dict) -> dict:
    """Two ranks sharing GPU 0 over gloo (NCCL refuses two ranks on one GPU), started by
    ``torch.multiprocessing`` (gpututor's CPU ranks see no GPU): an all-reduce of a CUDA
    tensor and a DDP step; parameters equal on both ranks afterwards."""
    proc = start_child([sys.executable, "-c", SHARED_GPU], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    output = finish_child(proc, cfg["run_timeout_s"])
    if proc.returncode != 0:
        return {"ok": False, "exit": proc.returncode, "error": _errors(output)}
    r = json.loads(output.strip().splitlines()[-1])
    sums = r["checksums"]
    ok = r["all_reduce"] == 3.0 and abs(sums[0] - sums[1]) < 1e-9 and r["backend"] == "gloo"
    return {"ok": ok, **r}


def _errors(output: str, keep: int = 4000) -> str:
    """The lines of a child's output that say what failed (tracebacks' last lines, errors),
    then its tail: a torchrun report alone names no cause."""
    lines = output.splitlines()
    wanted = [l for l in lines if "Error" in l or "error:" in l or "Traceback" in l
              or "raise" in l.lstrip()[:6]]
    seen, unique = set(), []
    for line in wanted:
        if line not in seen:
            seen.add(line)
            unique.append(line)
    return ("\n".join(unique[:40]) + "\n--- tail ---\n" + output[-1500:])[-keep:]


def _timed(fn, repeats: int, warmup: int = 3) -> float:
    """Median seconds of ``fn()`` on the current CUDA stream (events; after ``warmup`` calls)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return sorted(times)[len(times) // 2]


def section_fp8(cfg: dict) -> dict:
    """FP8 on the tensor cores: gpututor's per-tensor casts (``precision/fp8_casts.py``) feed
    ``torch._scaled_mm``; its product is compared with the emulated one (the casts read back, the
    matmul in float32), and timed against a bf16 matmul of the same shape, A B A B, with and
    without the casts. Then a linear layer's forward and backward (three matmuls, E4M3 forward,
    E5M2 gradients) against bf16's. Needs compute capability 8.9 or more (Ada, Hopper)."""
    from gpututor.precision.fp8_casts import saturating_cast, tensorwise_scale

    dev = torch.device("cuda", 0)
    capability = torch.cuda.get_device_capability(dev)
    if capability < (8, 9):
        return {"ok": None, "note": f"not run: compute capability {capability} has no FP8 "
                                    "tensor cores (8.9 or more)"}

    def cast(x, fmt="e4m3"):
        scale = tensorwise_scale(x, fmt)
        return saturating_cast(x.float() * scale, fmt), scale.reciprocal().float()

    def fp8_mm(a, b_t, fmt_a="e4m3"):   # a @ b_t.T with both cast; b_t row-major -> .t() col-major
        qa, sa = cast(a, fmt_a)
        qb, sb = cast(b_t)
        return torch._scaled_mm(qa, qb.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    rows = {}
    for n in (4096, 8192):
        g = torch.Generator(device=dev).manual_seed(0)
        a = torch.randn(n, n, device=dev, generator=g, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=dev, generator=g, dtype=torch.bfloat16)
        qa, sa = cast(a)
        qb, sb = cast(b)
        emulated = (qa.float() * sa) @ (qb.float() * sb).t()
        got = torch._scaled_mm(qa, qb.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float32)
        rel = ((got - emulated).norm() / emulated.norm()).item()
        exact = (a.float() @ b.float().t())
        bf16_rel = ((a @ b.t()).float() - exact).norm().item() / exact.norm().item()
        fp8_rel = (got - exact).norm().item() / exact.norm().item()
        timings = {"bf16": [], "fp8_mm": [], "fp8_with_casts": []}
        for _ in range(3):   # interleaved, so drift (clocks, heat) hits each alike
            timings["bf16"].append(_timed(lambda: a @ b.t(), 10))
            timings["fp8_mm"].append(_timed(lambda: torch._scaled_mm(
                qa, qb.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16), 10))
            timings["fp8_with_casts"].append(_timed(lambda: fp8_mm(a, b), 10))
        med = {k: sorted(v)[1] for k, v in timings.items()}
        flops = 2 * n ** 3
        rows[f"{n}x{n}x{n}"] = {
            "seconds": med, "tflops": {k: flops / s / 1e12 for k, s in med.items()},
            "fp8_vs_bf16_speedup": med["bf16"] / med["fp8_mm"],
            "fp8_with_casts_vs_bf16_speedup": med["bf16"] / med["fp8_with_casts"],
            "scaled_mm_vs_emulated_rel_err": rel, "fp8_rel_err_vs_fp32": fp8_rel,
            "bf16_rel_err_vs_fp32": bf16_rel}
    layer = _fp8_linear_step(dev, cast)
    runs = _fp8_runs(cfg)
    ok = all(r["scaled_mm_vs_emulated_rel_err"] < 1e-2 for r in rows.values()) and layer["ok"] \
        and runs.get("ok") is not False
    return {"ok": ok, "capability": list(capability), "matmuls": rows, "linear_layer": layer,
            "training_runs": runs,
            "note": "speeds measured on this GPU; the casts are gpututor's (plain torch ops, "
                    "not fused kernels)"}


def _fp8_runs(cfg: dict) -> dict:
    """``RunSpec(precision="fp8")`` on this GPU (torchao's Float8 Linears on ``_scaled_mm``, the
    rest in fp32) against fp32 and bf16 (autocast), the largest GPT, A B C A B C; not run where
    torchao does not load."""
    from gpututor import RunSpec, launch
    from gpututor.checks import InvalidValue
    from gpututor.precision.fp8_training import torchao_float8
    try:
        torchao_float8()
    except InvalidValue as exc:
        return {"ok": None, "note": f"not run: {exc}"}
    base = RunSpec(strategy="single", world_size=1, device="cuda", steps=cfg["steps"],
                   model_size=cfg["big_model"], batch_size=cfg["big_batch"],
                   seq_len=cfg["seq_len"], precision="bf16")
    tps = {"fp32": [], "bf16": [], "fp8": []}
    losses = {}
    for _ in range(cfg["repeats"]):
        for p in tps:
            s = _finish(launch(base.replace(precision=p)), cfg["run_timeout_s"])
            tps[p].append(s["tokens_per_s"])
            losses[p] = s["final_loss"]
    med = {p: sorted(v)[len(v) // 2] for p, v in tps.items()}
    return {"ok": all(math.isfinite(v) for v in losses.values()), "tokens_per_s": tps,
            "fp8_vs_fp32_tokens_per_s": med["fp8"] / med["fp32"],
            "fp8_vs_bf16_tokens_per_s": med["fp8"] / med["bf16"], "final_loss": losses}


def _fp8_linear_step(dev: torch.device, cast) -> dict:
    """A linear layer (8192 tokens, 4096 -> 4096) forward and backward: bf16 against FP8
    (x and W in E4M3, the output's gradient in E5M2), timed A B A B; outputs and gradients
    compared with bf16's."""
    class Fp8Matmuls(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            qx, sx = cast(x)
            qw, sw = cast(w)
            return torch._scaled_mm(qx, qw.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)

        @staticmethod
        def backward(ctx, dout):
            x, w = ctx.saved_tensors
            qd, sd = cast(dout, "e5m2")
            qw, sw = cast(w)
            dx = torch._scaled_mm(qd, qw.t().contiguous().t(), scale_a=sd, scale_b=sw,
                                  out_dtype=torch.bfloat16)
            qdt, sdt = cast(dout.t().contiguous(), "e5m2")
            qx, sx = cast(x)
            dw = torch._scaled_mm(qdt, qx.t().contiguous().t(), scale_a=sdt, scale_b=sx,
                                  out_dtype=torch.bfloat16)
            return dx, dw

    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randn(8192, 4096, device=dev, generator=g, dtype=torch.bfloat16, requires_grad=True)
    w = (torch.randn(4096, 4096, device=dev, generator=g, dtype=torch.bfloat16) / 64
         ).requires_grad_()
    dout = torch.randn(8192, 4096, device=dev, generator=g, dtype=torch.bfloat16)

    def step(fp8: bool):
        x.grad = w.grad = None
        out = Fp8Matmuls.apply(x, w) if fp8 else x @ w.t()
        out.backward(dout)
        return out

    ref_out = step(False).float()
    ref_dx, ref_dw = x.grad.float(), w.grad.float()
    out = step(True).float()
    rel = {name: ((a - b.float()).norm() / b.float().norm()).item() for name, a, b in
           (("out", out, ref_out), ("dx", x.grad.float(), ref_dx), ("dw", w.grad.float(), ref_dw))}
    times = {"bf16": [], "fp8": []}
    for _ in range(3):
        times["bf16"].append(_timed(lambda: step(False), 5))
        times["fp8"].append(_timed(lambda: step(True), 5))
    med = {k: sorted(v)[1] for k, v in times.items()}
    return {"ok": all(math.isfinite(v) and v < 0.1 for v in rel.values()),
            "rel_err_vs_bf16": rel, "seconds": med, "fp8_vs_bf16_speedup": med["bf16"] / med["fp8"],
            "shape": "x 8192x4096, W 4096x4096"}


def section_gpu_tests(cfg: dict) -> dict:
    """The tests marked ``gpu`` (tests/test_gpu.py, precision's fp16 and offload tests) with this
    Python's pytest, one process (no xdist needed)."""
    files = ["tests/test_gpu.py", "tests/precision/test_precision.py",
             "tests/precision/test_offload.py"]
    report = Path(tempfile.mkdtemp(prefix="gpu-tests-")) / "junit.xml"
    proc = start_child([sys.executable, "-m", "pytest", "-q", "-rfs", "--tb=short", "-m", "gpu", "-o",
                        "addopts=", "-p", "no:cacheprovider", f"--junitxml={report}", *files],
                       cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = proc.communicate(timeout=cfg.get("tests_timeout_s", 150))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        return {"ok": False, "error": "timed out", "tail": output[-8000:]}
    last = output.strip().splitlines()[-1] if output.strip() else ""
    return {"ok": proc.returncode == 0 and "passed" in last, "exit": proc.returncode,
            "summary": last, "tail": output[-8000:]}
