"""The live dashboard: data shaping (pure functions) and the RunPanel driven headless.

The panel tests click the buttons as a learner would (``Button.click()`` runs the callbacks) and
read the panel's figure and what its live view was sent: that is what the front end draws.
"""
from __future__ import annotations

import math
import threading
import time

import plotly.graph_objects as go
import psutil
import pytest

from gpututor import RunFailed, RunSpec, warm_up
from gpututor.measure.memory import CATEGORIES as MEMORY_CATEGORIES
from gpututor.ui.comparison import Comparison, speedup_figure
from gpututor.ui.live_figure import LiveFigure, charts_of
from gpututor.ui.panel import RunPanel, build_figure, fill_figure
from gpututor.ui.series import (downsample, explain_weak_scaling, global_loss, memory_by_rank,
                                speedup_rows, summary_line, throughput_by_rank, weak_scaling)

TINY = RunSpec(model="gpt", model_size="tiny", strategy="ddp", world_size=2, steps=6,
               batch_size=8)
RUN_TIMEOUT_S = 120  # generous: other work may share this machine's cores


def record(rank, step, loss=1.0, tokens_per_s=100.0, **memory):
    mem = {f"mem_{c}": memory.get(c) for c in MEMORY_CATEGORIES}
    return {"rank": rank, "step": step, "loss": loss, "tokens_per_s": tokens_per_s,
            "step_time_s": 0.1, "compute_s": 0.08 + 0.001 * step, "comm_s": 0.02, **mem}


def summary(world_size, tokens_per_s, model_size="small", batch_size=32, strategy="ddp"):
    return {"model": "gpt", "model_size": model_size, "batch_size": batch_size, "seq_len": 64,
            "precision": "fp32", "device": "cpu", "world_size": world_size,
            "strategy": strategy, "tokens_per_s": tokens_per_s, "compute_s": 0.1, "comm_s": 0.01,
            "steps": 3, "step_time_s": 0.1, "final_loss": 2.0}


# ---- records -> series ----------------------------------------------------------------------

def test_global_loss_averages_ranks_and_waits_for_every_rank():
    records = [record(0, 0, 2.0), record(1, 0, 4.0), record(0, 1, 1.0)]  # step 1: rank 1 missing
    assert global_loss(records, 2) == ([0], [3.0])
    records.append(record(1, 1, 2.0))
    assert global_loss(records, 2) == ([0, 1], [3.0, 1.5])


def test_throughput_by_rank_keeps_each_rank_in_step_order():
    records = [record(1, 0, tokens_per_s=10), record(0, 0, tokens_per_s=20),
               record(0, 1, tokens_per_s=30)]
    assert throughput_by_rank(records, 2) == {0: ([0, 1], [20, 30]), 1: ([0], [10])}


def test_memory_by_rank_takes_the_latest_measured_value():
    records = [record(0, 0, params=10, grads=0, optimizer=0),   # activations None on step 0
               record(0, 1, params=10, grads=10, optimizer=20, activations=50),
               record(1, 1, params=10, grads=10, optimizer=20, activations=40)]
    assert memory_by_rank(records, 2) == {"params": [10, 10], "grads": [10, 10],
                                          "optimizer": [20, 20], "activations": [50, 40]}
    assert memory_by_rank([], 3) == {c: [0, 0, 0] for c in MEMORY_CATEGORIES}


def test_downsample_keeps_short_series_and_ends_of_long_ones():
    assert downsample([1, 2, 3], [4, 5, 6], max_points=5) == ([1, 2, 3], [4, 5, 6])
    xs = list(range(10_000))
    x, y = downsample(xs, [v * 2 for v in xs], max_points=400)
    assert len(x) == 400 and x[0] == 0 and x[-1] == 9_999 and y == [v * 2 for v in x]
    assert x == sorted(x)


def test_speedup_rows_compare_with_the_latest_matching_one_rank_run():
    runs = [summary(2, 150.0), summary(1, 90.0), summary(1, 100.0), summary(4, 300.0),
            summary(2, 50.0, model_size="tiny")]   # no 1-rank run of "tiny"
    rows = speedup_rows(runs)
    # the earlier 1-rank run is 0.9x the latest: run-to-run noise, shown as measured
    assert [r["speedup"] for r in rows][:4] == [1.5, 0.9, 1.0, 3.0]
    assert rows[3]["efficiency"] == 0.75
    assert rows[4]["speedup"] is None and rows[4]["efficiency"] is None
    assert speedup_rows([summary(2, 150.0, batch_size=16), summary(1, 100.0)])[0]["speedup"] is None


def test_weak_scaling_keeps_the_batch_per_rank_and_says_what_was_lost():
    one = summary(1, 100.0, batch_size=32)
    two = dict(summary(2, 170.0, batch_size=64), step_time_s=0.1176)
    w = weak_scaling(two, one)
    assert w["throughput_ratio"] == pytest.approx(1.7) and w["efficiency"] == pytest.approx(0.85)
    assert w["step_ratio"] == pytest.approx(1.176)
    assert "efficiency of 85%" in explain_weak_scaling(two, one)
    assert "15% of the ideal throughput was lost: waiting for communication took 10 ms of each 118 ms" \
        in explain_weak_scaling(two, one)
    perfect = explain_weak_scaling(summary(2, 200.0, batch_size=64), one)
    assert "every rank kept its single-rank speed" in perfect
    with pytest.raises(ValueError, match="same batch per rank"):   # that is strong scaling
        weak_scaling(summary(2, 170.0, batch_size=32), one)
    with pytest.raises(ValueError, match="world_size=2"):
        weak_scaling(two, two)
    with pytest.raises(ValueError, match="differ in model"):
        weak_scaling(summary(2, 170.0, batch_size=64, model_size="tiny"), one)


def test_the_weak_scaling_run_has_a_chart_and_a_line_of_its_own():
    from gpututor.ui.comparison import weak_scaling_figure
    one = summary(1, 100.0, batch_size=32)
    fig = weak_scaling_figure(summary(2, 170.0, batch_size=64), one)
    ideal, line = fig.data
    assert list(ideal.x) == [1, 2] and list(ideal.y) == [1, 2]
    assert list(line.y) == [1.0, pytest.approx(1.7)] and line.name == "weak scaling, 32 sequences per rank"
    assert list(line.text) == ["1.00×", "1.70×"]
    assert len(weak_scaling_figure(summary(2, None, batch_size=64), one).data) == 1   # ideal only


def test_unmetered_communication_is_drawn_and_said_as_not_measured():
    from gpututor.ui import plots
    metered = summary(2, 150.0)
    unmetered = dict(summary(2, 140.0, strategy="tp-dtensor"), comm_s=None, compute_s=None)
    fig = plots.step_breakdown({"tp": metered, "tp-dtensor": unmetered})
    compute, comm, whole = fig.data
    assert list(compute.y) == [100.0, None] and list(comm.y) == [10.0, None]
    assert list(whole.x) == ["tp-dtensor"] and "not measured" in whole.name
    comparison = Comparison()
    for s in (summary(1, 100.0), unmetered):
        comparison.add(s)
    assert "communication not measured for this strategy" in comparison.explain()
    assert "not measured" in comparison.table.value


def test_figures_have_the_traces_the_panel_updates():
    fig = build_figure(world_size=3)
    assert len(fig.data) == 1 + 3 + len(MEMORY_CATEGORIES) + 2
    records = [record(r, s, params=1e6, grads=1e6, optimizer=2e6, activations=3e6)
               for s in range(5) for r in range(3)]
    fill_figure(fig, records, 3)
    assert list(fig.data[0].x) == [0, 1, 2, 3, 4]
    assert all(list(fig.data[1 + r].x) == [0, 1, 2, 3, 4] for r in range(3))
    assert list(fig.data[-3].y) == [3.0, 3.0, 3.0]   # activations in MB, one bar per rank
    assert list(fig.data[-2].y) == pytest.approx([84.0] * 3)  # compute of the last step, ms
    assert list(fig.data[-1].y) == pytest.approx([20.0] * 3)  # exposed communication, ms
    assert "EMULATED" not in fig.data[-1].name
    fill_figure(fig, records + [dict(record(0, 5), emulated_comm_s=0.01)], 3)
    assert "EMULATED" in fig.data[-1].name
    ideal, measured = speedup_figure(speedup_rows([summary(1, 100.0), summary(2, 170.0)])).data
    assert list(ideal.x) == list(ideal.y) == [1, 2]
    assert list(measured.x) == [1, 2] and list(measured.y) == [1.0, 1.7]


def test_summary_line():
    assert "2 ranks" in summary_line(summary(2, 1234.0)) and "1,234 tokens/s" in \
        summary_line(summary(2, 1234.0))
    line = summary_line(dict(summary(2, 1234.0), losses=[4.2, 3.0, 2.0]))
    assert "loss 4.200 at the first step, 2.000 at the last" in line
    assert "loss n/a at the first step" in summary_line(dict(summary(2, 1.0), losses=[]))


def test_panel_controls_make_the_spec():
    panel = RunPanel(TINY, fields=("model", "model_size", "world_size", "inject_fault"))
    assert panel.spec_from_controls() == TINY
    panel.controls["model"].value = "mlp"   # the sizes on offer follow the model
    assert list(panel.controls["model_size"].options) == ["small", "large"]
    panel.controls["inject_fault"].value = "1:3"
    assert panel.spec_from_controls() == TINY.replace(model="mlp", model_size="small",
                                                      inject_fault="1:3")
    with pytest.raises(ValueError, match="fields"):
        RunPanel(TINY, fields=("world_size", "no_such_field"))


# ---- the panel, headless, with real ranks -----------------------------------------------------

@pytest.fixture(scope="module", autouse=True)
def warm_forkserver():
    warm_up(block=True)


def wait_until(condition, timeout=RUN_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def all_ranks_gone(run) -> bool:
    return all(not psutil.pid_exists(pid) or psutil.Process(pid).status() ==
               psutil.STATUS_ZOMBIE for pid in run.pids)


def test_run_click_returns_at_once_and_fills_the_live_plots(monkeypatch):
    import gpututor.ui.panel as panel_module
    release, real_launch = threading.Event(), panel_module.launch

    def held_launch(spec):   # the launch waits until the click has returned: order, not seconds
        assert release.wait(RUN_TIMEOUT_S)
        return real_launch(spec)

    monkeypatch.setattr(panel_module, "launch", held_launch)
    panel = RunPanel(TINY)
    panel.run_button.click()   # a button callback must not block the kernel: it returns first
    assert panel.busy and panel.state == "starting" and panel.current is None
    assert panel.run_button.disabled and not panel.stop_button.disabled
    release.set()
    panel.wait(RUN_TIMEOUT_S)
    assert panel.state == "finished" and "finished" in panel.status.value
    loss, ranks, bars = panel.fig.data[0], panel.fig.data[1:3], panel.fig.data[3:7]
    compute, comm = panel.fig.data[7:9]
    assert list(loss.x) == list(range(TINY.steps))  # one point per step
    assert list(loss.y) == panel.current.summary["losses"]  # the summary's global loss
    assert [t.name for t in ranks] == ["rank 0 tokens/s", "rank 1 tokens/s"]
    assert all(len(t.y) == TINY.steps and min(t.y) > 0 for t in ranks)
    assert [b.name for b in bars] == list(MEMORY_CATEGORIES)
    assert all(list(b.x) == ["rank 0", "rank 1"] and min(b.y) > 0 for b in bars)
    assert min(compute.y) > 0 and min(comm.y) >= 0 and len(compute.y) == 2
    assert panel.comparison.summaries == [panel.current.summary]
    assert not panel.run_button.disabled and panel.stop_button.disabled
    static = panel.static_figure()
    assert isinstance(static, go.Figure) and list(static.data[0].y) == list(loss.y)


def test_bad_field_shows_the_value_error_and_starts_nothing():
    panel = RunPanel(TINY)
    panel.controls["batch_size"].value = 7   # does not split into 2 ranks
    panel.run_button.click()
    assert panel.state == "invalid"
    assert "ValueError" in panel.status.value and "batch_size=7 is invalid" in panel.status.value
    assert panel.current is None and not panel.busy and not panel.run_button.disabled
    panel.controls["batch_size"].value = 8
    panel.controls["precision"].value = "fp16"   # a GPU format: invalid on CPU
    with pytest.raises(ValueError, match="precision"):
        panel.run(wait=True)
    assert panel.current is None


def test_a_typed_world_size_above_the_cpu_ceiling_starts_nothing(monkeypatch):
    """256 typed by mistake would start 256 copies of torch: the panel holds a typed world size
    to %ranks' ceiling (4 CPU ranks per usable core), and never below the lesson's own size."""
    import gpututor.runtime.ranks.checks as checks
    monkeypatch.setattr(checks, "usable_cpu_cores", lambda: 1)
    panel = RunPanel(TINY)
    panel.controls["world_size"].value = 256
    panel.controls["batch_size"].value = 256
    panel.run_button.click()
    assert panel.state == "invalid" and panel.current is None
    assert "world_size=256 is invalid on CPU here" in panel.status.value
    assert "allowed is 1 to 4" in panel.status.value
    panel.controls["world_size"].value = 4   # at the ceiling: accepted
    panel.controls["batch_size"].value = 8
    assert panel.spec_from_controls().world_size == 4
    big = RunPanel(TINY.replace(world_size=8))   # a lesson's own 8 ranks on 1 core stay allowed
    assert big.spec_from_controls().world_size == 8


def test_stop_during_a_run_ends_every_rank():
    panel = RunPanel(TINY.replace(steps=5000))
    panel.run_button.click()
    wait_until(lambda: panel.current is not None and len(panel.current.records) >= 2)
    run = panel.current
    release, real_stop = threading.Event(), run.stop

    def held_stop():   # the stop waits until the click has returned: order, not seconds
        assert release.wait(RUN_TIMEOUT_S)
        real_stop()

    run.stop = held_stop
    panel.stop_button.click()   # returns while the ranks are still being stopped
    assert panel.state == "stopping" and run.status == "running"
    release.set()
    panel.wait(30)
    assert panel.state == "stopped" and run.status == "stopped"
    assert "stopped" in panel.status.value
    wait_until(lambda: all_ranks_gone(run), timeout=10)
    assert len(panel.fig.data[0].x) < 5000
    assert panel.comparison.summaries == []   # only finished runs are compared


def test_failing_rank_shows_its_traceback():
    panel = RunPanel(TINY.replace(inject_fault="1:2"))
    with pytest.raises(RunFailed, match="rank 1"):
        panel.run(wait=True)
    assert panel.state == "failed"
    assert "InjectedFault" in panel.status.value and "traceback of rank 1" in panel.status.value
    assert "<pre>" in panel.status.value
    assert all_ranks_gone(panel.current)


def test_comparison_plots_speedup_after_one_and_two_rank_runs():
    comparison = Comparison()
    solo = RunPanel(TINY.replace(strategy="single", world_size=1), comparison=comparison)
    pair = RunPanel(TINY, comparison=comparison)
    solo.run(wait=True)
    pair.run(wait=True)
    rows = comparison.rows()
    assert [r["world_size"] for r in rows] == [1, 2]
    assert rows[0]["speedup"] == 1.0 and rows[1]["speedup"] > 0
    assert comparison.speedup(pair.current.summary) == rows[1]["speedup"]
    measured = [t for t in comparison.fig.data if t.name != "ideal (N ranks = N×)"]
    assert len(measured) == 1 and list(measured[0].x) == [1, 2]
    assert math.isclose(measured[0].y[1], rows[1]["speedup"])
    assert "×" in comparison.explain() and "<table>" in comparison.table.value
    assert len(comparison.static_figure().data) == 2


# ---- the live view: what it is sent, and what it says it cost --------------------------------

def test_live_view_is_sent_the_figures_numbers():
    fig = build_figure(world_size=2, title="a title")
    records = [record(r, s, loss=2.0 - 0.1 * s, tokens_per_s=100.0 + r, params=1e6, grads=1e6,
                      optimizer=2e6, activations=3e6) for s in range(4) for r in range(2)]
    records.append(record(0, 4, tokens_per_s=float("nan")))   # not finite: sent as null
    fill_figure(fig, records, 2)
    view = LiveFigure()
    view.show(fig)
    assert view.title == "a title"
    loss, speed, memory, breakdown = view.charts
    assert [c["title"] for c in view.charts] == [a.text for a in fig.layout.annotations]
    assert loss["kind"] == "lines" and loss["xlabel"] == "step"
    assert loss["series"][0]["x"] == [0, 1, 2, 3] and loss["series"][0]["y"] == \
        pytest.approx([2.0, 1.9, 1.8, 1.7])
    assert [s["name"] for s in speed["series"]] == ["rank 0 tokens/s", "rank 1 tokens/s"]
    assert speed["series"][0]["y"][-1] is None   # the NaN record of rank 0
    assert memory["kind"] == "bars" and memory["categories"] == ["rank 0", "rank 1"]
    assert [s["name"] for s in memory["series"]] == list(MEMORY_CATEGORIES)
    assert memory["series"][-1]["y"] == [3.0, 3.0]   # activations, MB
    assert [s["name"] for s in breakdown["series"]] == ["compute", "waiting for communication"]
    assert len(charts_of(go.Figure())) == 0


def test_panel_says_what_its_live_view_cost():
    panel = RunPanel(TINY)
    run = panel.run(wait=True)
    cost = panel.view_cost
    assert cost["redraws"] >= 2 and 0 < cost["kernel_cpu_s"] < cost["wall_s"]
    assert cost["browser_draw_s"] is None   # no browser drew it here: not measured, never 0
    assert f"{cost['redraws']} redraws" in panel.cost.value
    assert "drawing code not measured" in panel.cost.value
    summary = panel.cost.value.split("<summary", 1)[1].split("</summary>")[0]   # the visible line
    assert "live view:" in summary and "in the kernel" in summary
    assert "drawing not measured" in summary   # never 0
    assert panel.view.charts[0]["series"][0]["y"] == pytest.approx(run.summary["losses"])
    panel.view.draw_ms = 12.5   # what a front end reports: its drawing time, in ms
    assert panel.view_cost["browser_draw_s"] == pytest.approx(0.0125)
    assert "drawing code 0.013 s" in panel.cost.value
    assert " %</summary>" in panel.cost.value and "drawing not measured" not in panel.cost.value


def test_a_comparison_draws_with_the_live_view():
    comparison = Comparison()
    comparison.add(summary(1, 100.0))
    comparison.add(summary(2, 150.0))
    speedup, = comparison.view.charts   # one chart, named by the figure's title
    assert speedup["title"] == comparison.fig.layout.title.text
    ideal, measured = speedup["series"]
    assert ideal["dash"] == "dash" and ideal["x"] == [1, 2] and ideal["y"] == [1, 2]
    assert measured["x"] == [1, 2] and measured["y"] == [1.0, 1.5]
    assert "1.50" in comparison.table.value


# ---- one follower for every widget that starts and follows runs -------------------------------

def test_the_panel_and_the_board_share_one_follower():
    from gpututor.ui.follow import Follower
    from gpututor.lessons.sharding.figures import ShardingBoard
    assert isinstance(RunPanel(TINY), Follower) and isinstance(ShardingBoard({"ddp": TINY}), Follower)


def test_follow_draws_at_the_first_ready_record_then_by_interval():
    from gpututor.ui.follow import Follower
    seen, draws = [], []
    records = [{"step": s} for s in range(5)]
    Follower.follow(iter(records), lambda: draws.append(len(seen)), ready=lambda: len(seen) >= 2,
                    on_record=seen.append, interval=1e9)   # no redraw by time: only the ready one
    assert seen == records and draws == [2]
    draws.clear(), seen.clear()
    Follower.follow(iter(records), lambda: draws.append(len(seen)), on_record=seen.append,
                    interval=0.0)                          # every record redraws
    assert draws == [1, 2, 3, 4, 5]
