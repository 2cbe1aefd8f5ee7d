"""Time from Run to the first record (the first plotted point), in a real, fresh IPython kernel.

- first launch in a fresh kernel, where the panel started warming up the workers' imports when
  it appeared (we wait --think seconds between "panel shown" and "Run", as a person would)
- every later launch in the same kernel
Targets: first <= 4 s, later <= 0.3 s.

    python benchmarks/bench_latency.py [--later 5] [--think 1.0]
"""
from __future__ import annotations

import argparse
import json
import time

import jupyter_client

from common import report

SHOW_PANEL = "import time, gpututor\nfrom gpututor import RunSpec, launch\ngpututor.warm_up()\n"
RUN = """
spec = RunSpec(strategy="ddp", world_size=2, steps=3)
_t = time.perf_counter(); _run = launch(spec); _first = next(iter(_run))
_latency = time.perf_counter() - _t; _run.wait()
print("LATENCY", _latency)
"""


def execute(client, code: str, timeout: float = 120) -> str:
    msg_id = client.execute(code, stop_on_error=False)
    out = []
    while True:
        msg = client.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            raise RuntimeError("\n".join(msg["content"]["traceback"]))
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return "".join(out)


def latency(client) -> float:
    out = execute(client, RUN)
    return float(out.split("LATENCY")[1].split()[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--later", type=int, default=5)
    parser.add_argument("--think", type=float, default=1.0)
    args = parser.parse_args()
    km = jupyter_client.KernelManager(kernel_name="python3", transport="ipc")
    km.start_kernel()
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        execute(client, SHOW_PANEL)
        time.sleep(args.think)
        first = latency(client)
        later = [latency(client) for _ in range(args.later)]
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)
    report("latency", {"think_s": args.think, "first_launch_s": first, "later_launches_s": later,
                       "later_max_s": max(later)})


if __name__ == "__main__":
    main()
