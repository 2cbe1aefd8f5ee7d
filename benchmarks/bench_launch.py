"""Load: many launches in a row in one process leave nothing behind (issue 15, item 7).

Runs ``--launches`` (default 50) 2-rank DDP launches of the tiny GPT one after another and
reports what this process held before and after: resident memory, file descriptors, threads,
inet sockets, and rank processes still alive 5 s after the last run (the forkserver and the
resource tracker are helpers that live on by design, not counted). Also each launch's time to
its first record and to the end. tests/runtime/test_launch_paths.py runs 25 of these in CI.

    python benchmarks/bench_launch.py [--launches 50]
"""
from __future__ import annotations

import argparse
import statistics
import time

import psutil

from common import report
from gpututor import RunSpec, launch


def held(me: psutil.Process) -> dict:
    return {"rss_mb": me.memory_info().rss / 1e6, "fds": me.num_fds(),
            "threads": me.num_threads(), "inet_sockets": len(me.net_connections(kind="inet"))}


def rank_processes(me: psutil.Process) -> int:
    alive = 0
    for child in me.children(recursive=True):
        try:
            line = " ".join(child.cmdline())
            if child.status() != psutil.STATUS_ZOMBIE and "forkserver" not in line \
                    and "resource_tracker" not in line:
                alive += 1
        except psutil.Error:
            pass
    return alive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=50)
    args = parser.parse_args()
    spec = RunSpec(model="gpt", model_size="tiny", strategy="ddp", world_size=2, steps=1,
                   batch_size=4, seq_len=32, device="cpu")
    launch(spec).wait()   # start the forkserver, which lives on by design
    me = psutil.Process()
    before = held(me)
    first, total, every_10 = [], [], []
    for k in range(args.launches):
        run = launch(spec)
        summary = run.wait(timeout=120)
        assert summary["status"] == "finished", summary
        first.append(run.first_record_at - run.launched_at)
        total.append(time.perf_counter() - run.launched_at)
        if (k + 1) % 10 == 0:   # a leak grows with the launches; a one-time cost does not
            every_10.append({"launches": k + 1, **held(me)})
            print(every_10[-1], flush=True)
    time.sleep(5)
    after = held(me)
    report("launch", {
        "launches": args.launches, "spec": "tiny GPT, ddp, 2 ranks, 1 step",
        "before": before, "after": after,
        "grown": {k: after[k] - before[k] for k in before},
        "grown_from_launch_10": {k: after[k] - every_10[0][k] for k in before}
        if every_10 else None,
        "every_10_launches": every_10,
        "rank_processes_left": rank_processes(me),
        "first_record_s": {"median": statistics.median(first), "max": max(first)},
        "launch_to_end_s": {"median": statistics.median(total), "max": max(total)},
    })


if __name__ == "__main__":
    main()
