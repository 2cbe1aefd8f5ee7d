"""The device check's Markdown summary, written from the sections' JSON lines at the end of
``benchmarks/gpu_check.py`` (and when it is stopped), and what "ok" means for each section."""
from __future__ import annotations


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
    "cuda_oom": "allocating twice the GPU's memory raises torch.OutOfMemoryError saying \"CUDA out "
                "of memory\", and the GPU computes afterwards",
    "fp8": "torch._scaled_mm on gpututor's E4M3 casts equals the emulated product within 1 % "
           "(relative norm); a linear layer's output and gradients in FP8 within 10 % of bf16's; "
           "speeds against bf16 are reported, not judged; where torchao loads, precision='fp8' "
           "runs train to a finite loss (tokens/s against fp32 and bf16 reported)",
    "ranks": "%%ranks's group on the device: a CPU and a device tensor all-reduce, the "
             "--no-collectives guard refuses a collective and runs plain code, a cell that never "
             "ends restarts the group within its 5 s timeout, and the next cell runs",
    "checkpoint": "an async save, a fault and a restart give the uninterrupted run's losses "
                  "(1e-5); a checkpoint FSDP saved on the device resumes as one process on it "
                  "(1e-5) and as DDP on two CPU ranks (1e-3 across devices)",
    "torchrun_restarts": "torchrun --standalone with a fault: without --max-restarts it exits "
                         "non-zero naming the fault; with --max-restarts 1 it resumes from step "
                         "2 and exits 0",
    "gloo_shared": "two ranks share GPU 0 over gloo: a CUDA tensor all-reduces and a DDP step "
                   "leaves equal parameters on both",
    "gpu_tests": "pytest -m gpu on tests/test_gpu.py and precision's fp16 and offload tests passes",
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
        verdict = {True: "ok", False: "FAILED", None: s.get("why") or "not run"}[s["ok"]]
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

