"""Persistent ranks in a notebook kernel: gpututor's ``%%ranks`` next to ipyparallel's ``%%px``.

Each tool gets its own fresh Jupyter kernel ("python3", started with jupyter_client as a notebook
server starts one), starts 4 ranks there, joins them in one gloo process group, and then runs:

- a trivial cell (``x = rank``) 50 times: the round trip a learner waits for, measured from the
  client's execute request to the kernel's "idle" (median, and the 10th/90th percentiles);
- a cell that all-reduces 1 MB (262,144 float32 on each rank) 20 times.

Also reported: how long starting the 4 ranks took (to the first cell that can run a collective).
Also reported: a plain cell (``x = 1``, no ranks) in the same kernel, the kernel's own round
trip, and how long ``%ranks restart`` takes once the forkserver is warm.

nbdistributed is stopped with ``%unload_ext nbdistributed`` (its graceful path, which terminates
the workers it started by their pids), never with ``%dist_shutdown``: that one kills processes
by name pattern (``pkill -f worker.py``, ``pkill -9 -f "python.*worker"``), which on a shared
machine ends other people's processes. Its coordinator binds every interface (``tcp://*``).

Usage: ``python benchmarks/bench_ranks.py [--repeats 50]`` (needs ipyparallel and nbdistributed:
the ``[peers]`` extra). Results go to benchmarks/results/bench_ranks.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import report  # noqa: E402

MB_FLOATS = 262_144   # 1 MB of float32

TOOLS = {
    "gpututor %%ranks": {
        "setup": ["%load_ext gpututor", "%ranks start 4"],
        "trivial": "%%ranks\nx = rank",
        "allreduce": f"%%ranks\nt = torch.ones({MB_FLOATS})\ndist.all_reduce(t)",
        "restart": "%ranks restart",
        "in_kernel": "group = get_ipython().magics_manager.registry['RanksMagics'].group\n"
                     "call = lambda: group.run('x = rank')",
        "teardown": ["%ranks stop"],
    },
    "nbdistributed %%distributed": {
        "setup": ["%load_ext nbdistributed", "%dist_init --num-processes 4"],
        "trivial": "%%distributed\nx = rank",
        "allreduce": f"%%distributed\nt = torch.ones({MB_FLOATS})\ndist.all_reduce(t)",
        "in_kernel": "from nbdistributed.magic import DistributedMagic\n"
                     "call = lambda: DistributedMagic._comm_manager.send_to_all('execute', "
                     "'x = rank')",
        "teardown": ["%unload_ext nbdistributed"],
    },
    "ipyparallel %%px": {
        "setup": ["import ipyparallel as ipp, tempfile, shutil\n"
                  "profile = tempfile.mkdtemp(prefix='bench-ipp-')\n"
                  "cluster = ipp.Cluster(n=4, profile_dir=profile, log_level=40)\n"
                  "rc = cluster.start_and_connect_sync(activate=True)\n"
                  "rc.wait_for_engines(4, timeout=300)\n"
                  "store = tempfile.mkdtemp(prefix='bench-ipp-store-')\n"
                  "for i in range(4):\n"
                  "    rc[i].push({'rank': i, 'store': store + '/store'}, block=True)",
                  "%%px\nimport os, torch, torch.distributed as dist\n"
                  "os.environ['GLOO_SOCKET_IFNAME'] = 'lo'\ntorch.set_num_threads(1)\n"
                  "dist.init_process_group('gloo', store=dist.FileStore(store, 4), rank=rank, "
                  "world_size=4)"],
        "trivial": "%%px\nx = rank",
        "allreduce": f"%%px\nt = torch.ones({MB_FLOATS})\ndist.all_reduce(t)",
        "in_kernel": "call = lambda: rc[:].execute('x = rank', block=True)",
        "teardown": ["%px dist.destroy_process_group()",
                     "cluster.stop_cluster_sync()\nshutil.rmtree(profile, ignore_errors=True)\n"
                     "shutil.rmtree(store, ignore_errors=True)"],
    },
}


# the transport alone: the same trivial cell sent to the 4 ranks from inside the kernel, no
# Jupyter message or display in between (each tool's own call, defined as `call` above)
IN_KERNEL = """
import json as _json, time as _time
_seconds = []
for _ in range({n}):
    _started = _time.perf_counter(); call(); _seconds.append(_time.perf_counter() - _started)
print("IN_KERNEL " + _json.dumps(_seconds))
"""


def execute(client, code: str, timeout: float = 600.0) -> tuple[float, str]:
    """Run ``code`` in the kernel; return (seconds from request to idle, what it showed)."""
    started = time.perf_counter()
    msg_id = client.execute(code, stop_on_error=False)
    shown, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = client.get_iopub_msg(timeout=max(1.0, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            shown.append(content["text"])
        elif kind in ("display_data", "execute_result"):
            shown.append(content["data"].get("text/plain", ""))
        elif kind == "error":
            shown.append("\n".join(content["traceback"]))
        elif kind == "status" and content["execution_state"] == "idle":
            return time.perf_counter() - started, "".join(shown)
    raise TimeoutError(f"no idle within {timeout} s for {code[:60]!r}")


def percentiles(seconds: list[float]) -> dict:
    ms = sorted(s * 1e3 for s in seconds)
    pick = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]
    return {"median_ms": round(statistics.median(ms), 2), "p10_ms": round(pick(0.1), 2),
            "p90_ms": round(pick(0.9), 2), "n": len(ms)}


def measure(name: str, tool: dict, repeats: int) -> dict:
    import jupyter_client
    km = jupyter_client.KernelManager(kernel_name="python3")
    # as in an activated venv: nbdistributed starts its workers as "python" from PATH
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    km.start_kernel(env={**os.environ, "OMP_NUM_THREADS": "1", "PATH": path})
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        execute(client, "import torch")   # every kernel pays torch's import before the clock
        plain = [execute(client, "x = 1")[0] for _ in range(repeats)]
        start_s = 0.0
        for code in tool["setup"]:
            seconds, shown = execute(client, code)
            start_s += seconds
            if "Error" in shown:
                raise RuntimeError(f"{name}: setup failed:\n{shown[-2000:]}")
        for code in (tool["trivial"], tool["allreduce"]):   # one of each before the clock
            _, shown = execute(client, code)
            if "Error" in shown:   # a tool that cannot run a cell here says why, not IndexError
                raise RuntimeError(f"{name}: a cell failed:\n{shown[-2000:]}")
        trivial = [execute(client, tool["trivial"])[0] for _ in range(repeats)]
        allreduce = [execute(client, tool["allreduce"])[0] for _ in range(max(5, repeats // 2))]
        _, shown = execute(client, f"{tool['allreduce']}\nprint(t[0].item())")
        in_kernel = json.loads(execute(client, tool["in_kernel"] + IN_KERNEL.format(
            n=repeats))[1].split("IN_KERNEL ")[1].splitlines()[0])
        restart_s = execute(client, tool["restart"])[0] if "restart" in tool else None
        for code in tool["teardown"]:
            execute(client, code)
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)
    return {"start_4_ranks_s": round(start_s, 2),
            "restart_4_ranks_s": None if restart_s is None else round(restart_s, 2),
            "plain_cell_no_ranks": percentiles(plain), "trivial_cell": percentiles(trivial),
            "trivial_in_kernel": percentiles(in_kernel),
            "allreduce_1MB_cell": percentiles(allreduce), "allreduce_result_shown": "4.0" in shown}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--only", choices=list(TOOLS), default=None)
    args = parser.parse_args(argv)
    results = {}
    for name, tool in TOOLS.items():
        if args.only and name != args.only:
            continue
        try:
            results[name] = measure(name, tool, args.repeats)
        except Exception as exc:  # noqa: BLE001 - report what could not be measured, and why
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
        print(name, results[name], flush=True)
    report("bench_ranks", {"repeats": args.repeats, "ranks": 4, "results": results,
                           "note": "round trips measured from the kernel client (execute "
                                   "request to idle); 4 CPU ranks, gloo, one thread each"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
