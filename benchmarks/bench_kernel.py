"""Measured in a real, fresh IPython kernel, as a learner would meet it:

1. time from pressing Run (``panel.run()``) to the first point drawn in the live plot (which
   includes computing one real training step: reported separately, with the overhead):
   the first launch of the kernel (the panel warmed the workers' imports when it appeared,
   ``--think`` seconds earlier) and every later launch. Targets: first <= 4 s, later <= 0.3 s.
2. the live dashboard's cost: tokens/s of the same run with the panel drawing vs headless
   ``launch(spec).wait()``, interleaved. Target >= 0.97.

    python benchmarks/bench_kernel.py [--later 5] [--think 2] [--repeats 3]
"""
from __future__ import annotations

import argparse
import statistics
import time

import jupyter_client

from common import report

SHOW_PANEL = """
import time
from gpututor import RunSpec, launch
from gpututor.ui.panel import RunPanel
panel = RunPanel(RunSpec(strategy="ddp", world_size=2, steps={steps}))
"""
RUN_TO_FIRST_POINT = """
_t = time.perf_counter(); panel.run()
while not (panel.fig.data and panel.fig.data[0].x is not None and len(panel.fig.data[0].x)):
    time.sleep(0.002)
_latency = time.perf_counter() - _t; panel.wait()
print("VALUE", _latency, "STEP0", panel.current.records[0]["step_time_s"])
"""
WITH_PANEL = "print('VALUE', panel.run(wait=True).summary['tokens_per_s'])"
HEADLESS = "print('VALUE', launch(panel.spec).wait()['tokens_per_s'])"


def execute(client, code: str, timeout: float = 300) -> float:
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
            text = "".join(out)
            if "STEP0" in text:  # (time to first point, compute time of that first step)
                return float(text.split("VALUE")[1].split()[0]), float(text.split("STEP0")[1])
            return float(text.split("VALUE")[1].split()[0]) if "VALUE" in text else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--later", type=int, default=5)
    parser.add_argument("--think", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    km = jupyter_client.KernelManager(kernel_name="python3", transport="ipc")
    km.start_kernel()
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        execute(client, SHOW_PANEL.format(steps=args.steps))
        time.sleep(args.think)
        first = execute(client, RUN_TO_FIRST_POINT)
        later = [execute(client, RUN_TO_FIRST_POINT) for _ in range(args.later)]
        panel, headless = [], []
        for _ in range(args.repeats):
            panel.append(execute(client, WITH_PANEL))
            headless.append(execute(client, HEADLESS))
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)
    report("kernel", {
        "think_s": args.think, "first_launch_to_first_point_s": first[0],
        "later_launches_to_first_point_s": [t for t, _ in later],
        "later_max_s": max(t for t, _ in later),
        # what the launch itself costs: time to first point minus the first step's own compute
        "later_overhead_s": [t - step0 for t, step0 in later],
        "first_step_compute_s": [step0 for _, step0 in [first, *later]],
        "tokens_per_s_with_panel": panel, "tokens_per_s_headless": headless,
        "panel_vs_headless": statistics.median(panel) / statistics.median(headless),
    })


if __name__ == "__main__":
    main()
