"""What the live view costs the run it measures, in JupyterLab + Chromium, as a learner sees it.

One notebook, opened in Debian's Chromium (the browser tests' machinery, tests/jupyterlab_browser.py),
runs lesson 00's spec (the small GPT, global batch 32, 30 steps, ``pin_device(2)``) in four ways,
interleaved, ``--trials`` times each: DDP on 2 ranks and one rank, each with ``launch(spec).wait()``
(no view) and with a new ``RunPanel(spec)`` displayed and ``run(wait=True)`` (as Run All does in
lesson 00: the panel is created and the run started in one go). For every run the kernel records
tokens/s and the CPU seconds that the browser (every Chromium process), the kernel and the Jupyter
server used during it; the driver samples the page's own counters (Chromium's
``Performance.getMetrics``: script, layout, style and task time of the page's main thread) so the
browser's cost can be split. ``--profile`` adds a JavaScript CPU profile of the whole notebook
(the functions with the most self time). ``--lesson00 N`` then runs lesson 00 itself N times in
the browser (Run All) and reads what its cell 19 printed: the speedup without a live view beside
the speedup its panels measured, with the CPU the browser and the kernel used during each panel
run and during the runs without a view.

    python benchmarks/bench_live_view.py [--trials 3] [--steps 30] [--profile] [--lesson00 1]
    python benchmarks/bench_live_view.py --views      # lessons 05 and 11's live views instead
    python benchmarks/bench_live_view.py --settled    # a panel drawn 2 s before its run starts
    python benchmarks/bench_live_view.py --order 12   # lesson 00's order, and A/A, no browser
    python benchmarks/bench_live_view.py --trials 0 --lesson00 8   # lesson 00 alone, 8 times

``--order N`` asks, without a browser (nbclient), whether the order of lesson 00's runs alone
moves the comparison: N trials that alternate between the lesson's order (DDP and one rank with
panels, then both without a view) and the same four runs with no view at all (A/A); for each
trial, the first pair's speedup over the second's. Writes benchmarks/results/live_view_order.json.

``--views`` runs, the same way, lesson 05's live Gantt chart (1F1B on 2 stages, 4 micro-batches,
``live_gantt``) and lesson 11's live expert load (ep on 2 ranks, ``live_expert_load``), each
against the same run with no view, and writes benchmarks/results/live_views.json.

Writes benchmarks/results/live_view.json. Needs /usr/bin/chromium and Playwright (.ci/run
installs them).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from common import report   # noqa: E402
from jupyterlab_browser import (NOTEBOOK, LabServer, launch_chromium,  # noqa: E402
                                open_notebook, run_all_cells)
PANEL_LINE = re.compile(r"finished: \d+ steps of (ddp|single) on \d rank\(s\): ([0-9,]+) tokens/s")
QUIET_LINE = re.compile(r"DDP on 2 ranks ([0-9,]+) tokens/s, one rank ([0-9,]+) tokens/s")
SPEEDUPS = re.compile(r"speedup ([0-9.]+)× \(the panels above, each with its live view: ([0-9.]+)×\)")

SETUP = """\
import json, os, time
import psutil
from gpututor import RunSpec, launch
from gpututor.lessons.mixture_of_experts.figures import live_expert_load
from gpututor.ui.panel import RunPanel
from gpututor.lessons.pipeline_parallel.figures import live_gantt

spec = RunSpec(model="gpt", model_size="small", strategy="ddp", world_size=2,
               batch_size=32, steps={steps}).pin_device(2)
# lesson 05's live Gantt run (1F1B, 4 micro-batches) and lesson 11's ep=2 run, at these steps
PIPE = spec.replace(strategy="pp", seq_len=64,
                    options=(("schedule", "1f1b"), ("microbatches", 4)))
MOE = RunSpec(model="moe", model_size="small", batch_size=16, seq_len=64, strategy="ep",
              world_size=2, steps={steps}).pin_device(2)
DRIVER = psutil.Process({driver_pid})
ME, SERVER = psutil.Process(), psutil.Process().parent()

def cpu(procs):
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total

def browser():
    return [p for p in DRIVER.children(recursive=True) if "chrom" in p.name().lower()]

def measured(kind, strategy):
    s = {{"ddp": spec, "pp": PIPE, "ep": MOE}}.get(strategy) or spec.replace(strategy="single",
                                                                         world_size=1)
    procs = browser()
    if kind == "settled":   # the panel drawn first, then the run (not what Run All does)
        panel = RunPanel(s)
        display(panel)
        time.sleep(2.0)
    before = (time.time(), cpu(procs), cpu([ME]), cpu([SERVER]))
    if kind in ("panel", "settled"):
        if kind == "panel":
            panel = RunPanel(s)
            display(panel)
        summary = panel.run(wait=True).summary
        view = getattr(panel, "view_cost", None)
    elif kind == "gantt":
        summary, view = live_gantt(launch(s)), None
    elif kind == "experts":
        summary, view = live_expert_load(launch(s)), None
    else:
        summary, view = launch(s).wait(), None
    after = (time.time(), cpu(procs), cpu([ME]), cpu([SERVER]))
    return {{"kind": kind, "strategy": strategy, "tokens_per_s": summary["tokens_per_s"],
            "start": before[0], "end": after[0], "wall_s": after[0] - before[0],
            "browser_cpu_s": after[1] - before[1], "kernel_cpu_s": after[2] - before[2],
            "server_cpu_s": after[3] - before[3], "view": view}}

launch(spec.replace(steps=2)).wait()        # warm the forkserver
launch(PIPE.replace(steps=2)).wait()
launch(MOE.replace(steps=2)).wait()
launch(spec.replace(steps=2, strategy="single", world_size=1)).wait()
"""

TRIALS = """\
rows = []
for trial in range({trials}):
    for kind, strategy in {pairs!r}:
        rows.append({{"trial": trial, **measured(kind, strategy)}})
        time.sleep(1.0)   # let the page settle between runs
json.dump(rows, open({out!r}, "w"))
"""
ORDER = """\
rows = []
for trial in range({trials}):
    design = "lesson" if trial % 2 else "aa"   # lesson: panels first, as in lesson 00
    first = "panel" if design == "lesson" else "none"
    t = [measured(kind, strategy)["tokens_per_s"] for kind, strategy in
         ((first, "ddp"), (first, "single"), ("none", "ddp"), ("none", "single"))]
    rows.append({{"trial": trial, "design": design, "tokens_per_s": t,
                 "first_over_second": (t[0] / t[1]) / (t[2] / t[3])}})
json.dump(rows, open({out!r}, "w"))
"""

PANEL_PAIRS = (("none", "ddp"), ("none", "single"), ("panel", "ddp"), ("panel", "single"))
# --settled: where DDP's loss with a panel comes from: the panel created with the run (Run All)
# against a panel drawn 2 s before its run starts
SETTLED_PAIRS = (("none", "ddp"), ("panel", "ddp"), ("settled", "ddp"))
# lessons 05 and 11: the live Gantt chart and the live expert load, each against no view
VIEW_PAIRS = (("none", "pp"), ("gantt", "pp"), ("none", "ep"), ("experts", "ep"))

METRICS = ("ScriptDuration", "LayoutDuration", "RecalcStyleDuration", "TaskDuration")


def write_notebook(path: Path, trials: int, steps: int, out: Path,
                   pairs=PANEL_PAIRS) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(SETUP.format(steps=steps, driver_pid=os.getpid())),
                nbformat.v4.new_code_cell(TRIALS.format(trials=trials, out=str(out), pairs=pairs))]
    nbformat.write(nb, path)


def page_metrics(cdp) -> dict:
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]
            if m["name"] in METRICS}


def run_notebook(page, cdp, done: Path, timeout_s: float) -> list[tuple[float, dict]]:
    """Run All Cells; sample the page's counters every 0.5 s until the results file exists.
    (Asking the page for its counters costs it little; querying its DOM, as the browser tests
    do, would cost the browser more, so errors are read only from the server's side: a cell that
    raises leaves no results file, and the deadline names it.)"""
    page.locator(".lm-MenuBar-item").get_by_text("Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    samples, deadline = [], time.monotonic() + timeout_s
    while not done.exists():
        assert time.monotonic() < deadline, "the benchmark notebook did not finish: a cell raised?"
        samples.append((time.time(), page_metrics(cdp)))
        page.wait_for_timeout(500)
    samples.append((time.time(), page_metrics(cdp)))
    return samples


def bracket(samples: list, start: float, end: float) -> tuple:
    """The last sample at or before ``start`` and the first at or after ``end`` (each sample's
    first item is its time; the first and the last sample where none is)."""
    before = [s for s in samples if s[0] <= start] or samples[:1]
    after = [s for s in samples if s[0] >= end] or samples[-1:]
    return before[-1], after[0]


def page_time_during(samples, start: float, end: float) -> dict:
    """Seconds of each page counter between the samples that bracket ``start`` .. ``end``."""
    (_, before), (_, after) = bracket(samples, start, end)
    return {k: round(after[k] - before[k], 3) for k in METRICS}


def top_functions(profile: dict, n: int = 25) -> list[dict]:
    """The JavaScript functions with the most self time in a CPU profile."""
    nodes = {node["id"]: node for node in profile["nodes"]}
    interval = (profile["endTime"] - profile["startTime"]) / max(1, len(profile["samples"])) / 1e6
    self_s = defaultdict(float)
    for sample in profile["samples"]:
        frame = nodes[sample]["callFrame"]
        where = frame["url"].rsplit("/", 1)[-1][:60]
        self_s[(frame["functionName"] or "(anonymous)", where)] += interval
    ranked = sorted(self_s.items(), key=lambda kv: -kv[1])[:n]
    return [{"function": f, "file": w, "self_s": round(s, 3)} for (f, w), s in ranked]


def summarize(rows: list[dict]) -> dict:
    by = defaultdict(list)
    for row in rows:
        by[(row["kind"], row["strategy"])].append(row)
    med = lambda key, kind, strategy: statistics.median(r[key] for r in by[(kind, strategy)])
    out = {}
    if ("panel", "ddp") not in by:   # the lessons' other live views, each against no view
        for (kind, strategy), group in by.items():
            out[f"{strategy}_{kind}"] = {
                "tokens_per_s": [round(r["tokens_per_s"]) for r in group],
                "browser_cpu_share": [round(r["browser_cpu_s"] / r["wall_s"], 3) for r in group]}
        for view, strategy in (("gantt", "pp"), ("experts", "ep")):
            out[f"{strategy}_{view}_over_none"] = round(med("tokens_per_s", view, strategy)
                                                        / med("tokens_per_s", "none", strategy), 3)
            out[f"{strategy}_{view}_median_browser_cpu_share"] = round(statistics.median(
                r["browser_cpu_s"] / r["wall_s"] for r in by[(view, strategy)]), 3)
        return out
    if ("settled", "ddp") in by:   # --settled: each panel kind against its trial's no-view run
        none = {r["trial"]: r["tokens_per_s"] for r in by[("none", "ddp")]}
        for kind in ("panel", "settled"):
            ratios = [r["tokens_per_s"] / none[r["trial"]] for r in by[(kind, "ddp")]]
            out[f"ddp_{kind}_over_none_per_trial"] = [round(x, 3) for x in ratios]
            out[f"ddp_{kind}_over_none_median_of_pairs"] = round(statistics.median(ratios), 3)
            out[f"ddp_{kind}_median_browser_cpu_share"] = round(statistics.median(
                r["browser_cpu_s"] / r["wall_s"] for r in by[(kind, "ddp")]), 3)
        return out
    for (kind, strategy), group in by.items():
        out[f"{strategy}_{kind}"] = {
            "tokens_per_s": [round(r["tokens_per_s"]) for r in group],
            "browser_cpu_share": [round(r["browser_cpu_s"] / r["wall_s"], 3) for r in group],
            **{f"median_{k}": round(med(k, kind, strategy), 3) for k in
               ("tokens_per_s", "wall_s", "browser_cpu_s", "kernel_cpu_s", "server_cpu_s")}}
    out["ddp_panel_over_none"] = round(med("tokens_per_s", "panel", "ddp")
                                       / med("tokens_per_s", "none", "ddp"), 3)
    # each trial's panel run over the run next to it without one: slow spells of a shared
    # machine hit both runs of a pair, so the pairs' median is the steadier figure
    pairs = {(r["trial"], r["kind"]): r["tokens_per_s"] for r in by[("panel", "ddp")]
             + by[("none", "ddp")]}
    ratios = [pairs[(t, "panel")] / pairs[(t, "none")] for t, kind in pairs if kind == "panel"
              and (t, "none") in pairs]
    out["ddp_panel_over_none_per_trial"] = [round(x, 3) for x in ratios]
    out["ddp_panel_over_none_median_of_pairs"] = round(statistics.median(ratios), 3)
    out["single_panel_over_none"] = round(med("tokens_per_s", "panel", "single")
                                          / med("tokens_per_s", "none", "single"), 3)
    out["speedup_none"] = round(med("tokens_per_s", "none", "ddp")
                                / med("tokens_per_s", "none", "single"), 3)
    out["speedup_panel"] = round(med("tokens_per_s", "panel", "ddp")
                                 / med("tokens_per_s", "panel", "single"), 3)
    return out


WINDOWS = """\
import json as _json, time as _time
_windows = {{"ddp_panel": [panel.view_cost["started"], panel.view_cost["started"] + panel.view_cost["wall_s"]],
            "single_panel": [solo.view_cost["started"], solo.view_cost["started"] + solo.view_cost["wall_s"]]}}
_json.dump(_windows, open({out!r}, "w"))
"""


def cpu_sampler(stop, samples: list) -> None:
    """Every 0.2 s: (monotonic time, CPU seconds of every Chromium process, of the kernel)."""
    import psutil
    me = psutil.Process()
    while not stop.is_set():
        browser = kernel = 0.0
        for p in me.children(recursive=True):
            try:
                name, t = p.name().lower(), p.cpu_times()
                if "chrom" in name:
                    browser += t.user + t.system
                elif "gpututor.runtime.kernel" in " ".join(p.cmdline()):
                    kernel += t.user + t.system
            except psutil.Error:
                pass
        samples.append((time.monotonic(), browser, kernel))
        stop.wait(0.2)


def cpu_during(samples: list, start: float, end: float) -> dict:
    """CPU seconds of the browser and the kernel between the samples around start .. end, and
    as a share of the window's wall time."""
    before, after = bracket(samples, start, end)
    wall = end - start
    b, k = after[1] - before[1], after[2] - before[2]
    return {"wall_s": round(wall, 2), "browser_cpu_s": round(b, 2), "kernel_cpu_s": round(k, 2),
            "browser_share": round(b / wall, 3), "kernel_share": round(k / wall, 3)}


def lesson_00(base: Path, profile: bool = False) -> dict:
    """Lesson 00 in the browser, Run All; the two speedups its cell 19 printed, and the CPU the
    browser and the kernel used during the DDP and one-rank panel runs (a cell added after them
    writes their windows) and during cell 19's runs without a view."""
    import threading
    from playwright.sync_api import sync_playwright
    nb = nbformat.read(NOTEBOOK, as_version=4)
    windows = base / "windows.json"
    solo_cell = next(i for i, c in enumerate(nb.cells) if "solo_summary = solo.run" in c.source)
    quiet_cell = next(i for i, c in enumerate(nb.cells) if "quiet = without_view(spec)" in c.source)
    mark = "_quiet_window = [_time.monotonic()]\n"
    nb.cells[quiet_cell].source = (mark + nb.cells[quiet_cell].source
                                   + "\n_quiet_window.append(_time.monotonic())\n"
                                   + "_windows['quiet_cell'] = _quiet_window\n"
                                   + f"_json.dump(_windows, open({str(windows)!r}, 'w'))\n")
    nb.cells.insert(solo_cell + 1, nbformat.v4.new_code_cell(WINDOWS.format(out=str(windows))))
    base.mkdir(parents=True, exist_ok=True)
    copy = base / NOTEBOOK.name
    nbformat.write(nb, copy)
    server = LabServer(base / "lab", copy)
    samples, stop = [], threading.Event()
    sampler = threading.Thread(target=cpu_sampler, args=(stop, samples), daemon=True)
    try:
        server.start()
        with sync_playwright() as pw:
            context, page = launch_chromium(pw, server, base / "chromium")
            open_notebook(page, server)
            sampler.start()
            if profile:
                cdp = context.new_cdp_session(page)
                cdp.send("Profiler.enable")
                cdp.send("Profiler.setSamplingInterval", {"interval": 1000})
                cdp.send("Profiler.start")
            timings: dict = {}
            cells = run_all_cells(page, timings)
            top = top_functions(cdp.send("Profiler.stop")["profile"]) if profile else None
            text = cells.filter(has_text="without_view(spec)").locator(".jp-OutputArea").inner_text()
            everything = "\n".join(cells.locator(".jp-OutputArea").all_inner_texts())
            context.close()
    finally:
        stop.set()
        server.close()
    found = SPEEDUPS.search(text)
    assert found, f"lesson 00's cell 19 printed no speedups: {text[:2000]}"
    without, with_view = map(float, found.groups())
    # each run's tokens/s: the panels' status lines, and cell 19's runs without a view
    number = lambda text: float(text.replace(",", ""))
    panels = {strategy: number(tps) for strategy, tps in PANEL_LINE.findall(everything)}
    quiet = QUIET_LINE.search(text)
    spans = json.loads(windows.read_text())
    return {"speedup_without_view": without, "speedup_with_panels": with_view,
            "panels_over_without": round(with_view / without, 3),
            "tokens_per_s": {"ddp_panel": panels.get("ddp"), "single_panel": panels.get("single"),
                             "ddp_none": number(quiet[1]) if quiet else None,
                             "single_none": number(quiet[2]) if quiet else None},
            "cpu": {name: cpu_during(samples, *span) for name, span in spans.items()},
            "run_all_cells_s": timings.get("run_all_cells_s"), "printed": text.strip(),
            **({"top_js_functions": top} if top is not None else {})}


def order(trials: int, steps: int) -> dict:
    """Lesson 00's order (panels first, then no view) against the same four runs with no view
    at all, alternating, in one kernel with no browser: how much the order alone moves the
    speedups' ratio."""
    from nbclient import NotebookClient
    out = Path(tempfile.mkdtemp(prefix="gpututor-order-")) / "rows.json"
    nb = nbformat.v4.new_notebook()
    # the benchmark's own setup cell (its runs and measured()); no browser, so none is counted
    nb.cells = [nbformat.v4.new_code_cell(SETUP.format(steps=steps, driver_pid=os.getpid())),
                nbformat.v4.new_code_cell(ORDER.format(trials=trials, out=str(out)))]
    NotebookClient(nb, timeout=120 * trials + 120, kernel_name="gpututor").execute()
    rows = json.loads(out.read_text())
    summary = {}
    for design in ("aa", "lesson"):
        ratios = [r["first_over_second"] for r in rows if r["design"] == design]
        summary[design] = {"first_over_second": [round(x, 3) for x in ratios],
                           "median": round(statistics.median(ratios), 3) if ratios else None}
    return {"spec": {"model_size": "small", "batch_size": 32, "steps": steps}, "trials": trials,
            "summary": summary, "runs": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--profile", action="store_true", help="a JavaScript CPU profile too")
    parser.add_argument("--lesson00", type=int, default=0, help="run lesson 00 this many times")
    parser.add_argument("--views", action="store_true",
                        help="lessons 05 and 11's live views (Gantt, expert load) instead of the panel")
    parser.add_argument("--settled", action="store_true",
                        help="DDP with no view, a panel created with its run, a panel drawn first")
    parser.add_argument("--order", type=int, default=0,
                        help="this many trials of lesson 00's order and of A/A, no browser")
    args = parser.parse_args()
    if args.order:
        report("live_view_order", order(args.order, args.steps))
        return
    if args.lesson00 and args.trials == 0:   # lesson 00 alone
        tmp = Path(tempfile.mkdtemp(prefix="gpututor-lesson00-"))
        report("live_view_lesson00", {"lesson_00": [lesson_00(tmp / f"lesson00-{k}", args.profile)
                                                    for k in range(args.lesson00)]})
        return
    from playwright.sync_api import sync_playwright
    tmp = Path(tempfile.mkdtemp(prefix="gpututor-live-view-"))
    notebook = tmp / "live_view.ipynb"
    out = tmp / "lab" / "root" / "rows.json"
    write_notebook(notebook, args.trials, args.steps, out, VIEW_PAIRS if args.views else
                   SETTLED_PAIRS if args.settled else PANEL_PAIRS)
    server = LabServer(tmp / "lab", notebook)
    try:
        server.start()
        with sync_playwright() as pw:
            context, page = launch_chromium(pw, server, tmp / "chromium")
            open_notebook(page, server)
            cdp = context.new_cdp_session(page)
            cdp.send("Performance.enable")
            if args.profile:
                cdp.send("Profiler.enable")
                cdp.send("Profiler.setSamplingInterval", {"interval": 1000})
                cdp.send("Profiler.start")
            samples = run_notebook(page, cdp, out, timeout_s=60 * (4 + args.trials * 2))
            profile = cdp.send("Profiler.stop")["profile"] if args.profile else None
            context.close()
    finally:
        server.close()
    rows = json.loads(out.read_text())
    for row in rows:
        row["page"] = page_time_during(samples, row["start"], row["end"])
    payload = {"spec": {"model_size": "small", "batch_size": 32, "steps": args.steps},
               "trials": args.trials, "summary": summarize(rows), "runs": rows}
    if profile is not None:
        payload["top_js_functions"] = top_functions(profile)
    if args.lesson00:
        payload["lesson_00"] = [lesson_00(tmp / f"lesson00-{k}") for k in range(args.lesson00)]
    report("live_views" if args.views else "live_view_settled" if args.settled else "live_view",
           payload)


if __name__ == "__main__":
    main()
