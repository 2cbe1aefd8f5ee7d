"""Live dashboards for a notebook: edit a run, launch it, watch it train, compare runs.

- :class:`RunPanel`: controls for the fields of a :class:`~gpututor.RunSpec`, Run and Stop
  buttons, a status line and plots (loss, tokens/s per rank, memory per rank) that fill while the
  ranks train. A click returns at once: a background thread follows the run, so Stop still works.
- Finished runs go to a :class:`~gpututor.ui.comparison.Comparison` (speedup over one rank);
  records become plot series in :mod:`gpututor.ui.series`; colours are :mod:`gpututor.ui.style`'s.

The plots are a plain ``go.Figure`` (:func:`build_figure`, :func:`fill_figure`), drawn while the
ranks train by a :class:`~gpututor.ui.live_figure.LiveFigure`: canvases and a few kilobytes of
JavaScript, so the view does not take the cores the ranks measure on (plotly's ``FigureWidget``
took most of a core of a 2-core laptop: benchmarks/bench_live_view.py). It redraws at most every
``UPDATE_INTERVAL_S`` and downsamples long series; a grey line under it says what it cost the run.
:func:`show_static` displays the same figures with plotly.
"""
from __future__ import annotations

import dataclasses
import html
import threading
import time

import ipywidgets as W
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..checks import InvalidValue
from ..config import DEVICES, OPTIMIZERS, PRECISIONS, RunSpec
from ..model_sizes import MODEL_SIZES
from ..i18n import error_text, ntr, tr
from ..measure.memory import CATEGORIES as MEMORY_CATEGORIES
from ..parallel import STRATEGIES, check_spec
from ..runtime.guard import check_machine
from ..runtime.ranks.checks import check_cpu_world_size
from ..runtime.launcher import Run, RunFailed, launch, warm_up
from ..runtime.summary import failure_note
from .comparison import Comparison
from .follow import UPDATE_INTERVAL_S, Follower
from .live_figure import LiveFigure
from .style import COLOURS
from .series import (downsample, failure_marks, global_loss, memory_by_rank,
                     step_breakdown_by_rank, summary_line, throughput_by_rank)

LOG_LINES = 40               # lines of the ranks' output kept in the log area
DEFAULT_FIELDS = ("model_size", "strategy", "world_size", "batch_size", "steps", "precision")
CHOICES = {"model": lambda spec: list(MODEL_SIZES),
           "model_size": lambda spec: list(MODEL_SIZES[spec.model]),
           "strategy": lambda spec: list(STRATEGIES), "precision": lambda spec: list(PRECISIONS),
           "optimizer": lambda spec: list(OPTIMIZERS), "device": lambda spec: list(DEVICES)}
STATUS_COLORS = {"finished": "#1a7f37", "failed": "#cf222e", "invalid": "#cf222e",
                 "stopped": "#9a6700"}


def build_figure(world_size: int, title: str = "") -> go.Figure:
    """Empty live-run plots: trace 0 is the loss, then tokens/s per rank, then memory bars,
    then the step-time breakdown bars (compute, exposed communication)."""
    fig = make_subplots(rows=2, cols=2, horizontal_spacing=0.1, vertical_spacing=0.18,
                        subplot_titles=(
        tr("loss (mean over ranks)"), tr("tokens/s of each rank"), tr("memory per rank (MB)"),
        tr("last step per rank (ms)")))
    fig.add_scatter(x=[], y=[], mode="lines+markers", name=tr("loss"), row=1, col=1)
    for rank in range(world_size):
        fig.add_scatter(x=[], y=[], mode="lines", name=tr("rank {rank} tokens/s", rank=rank), row=1, col=2)
    ranks = [tr("rank {rank}", rank=rank) for rank in range(world_size)]
    for category in MEMORY_CATEGORIES:
        fig.add_bar(x=ranks, y=[0] * world_size, name=tr(category), row=2, col=1, marker_color=COLOURS[category])
    for name, kind in (("compute", "compute"), ("waiting for communication", "communication")):
        fig.add_bar(x=ranks, y=[0] * world_size, name=tr(name), row=2, col=2, marker_color=COLOURS[kind])
    fig.update_layout(barmode="stack", height=620, title=title, margin=dict(t=70, b=40),
                      legend=dict(orientation="h", y=-0.2))
    fig.update_xaxes(title_text=tr("step"), row=1, col=1)
    fig.update_xaxes(title_text=tr("step"), row=1, col=2)
    return fig


FAILURE_COLOR = "#cf222e"


def fill_figure(fig: go.Figure, records: list[dict], world_size: int,
                failures: list[dict] = (), attempts: int = 1) -> None:
    """Put the series of ``records`` into the traces of a :func:`build_figure` figure, and a
    dotted vertical line on the loss at each of the run's ``failures`` (``Run.failures``), named
    with the failed rank and step and where the run restarted (of ``attempts`` allowed)."""
    steps, losses = global_loss(records, world_size)
    fig.data[0].update(dict(zip("xy", downsample(steps, losses))))
    for rank, series in throughput_by_rank(records, world_size).items():
        fig.data[1 + rank].update(dict(zip("xy", downsample(*series))))
    memory = memory_by_rank(records, world_size)
    for i, category in enumerate(MEMORY_CATEGORIES):
        fig.data[1 + world_size + i].y = [b / 1e6 for b in memory[category]]
    breakdown = step_breakdown_by_rank(records, world_size)
    first_bar = 1 + world_size + len(MEMORY_CATEGORIES)
    fig.data[first_bar].y = breakdown["compute"]
    fig.data[first_bar + 1].y = breakdown["comm"]
    if any(r.get("emulated_comm_s") for r in records):  # say so wherever a link is emulated
        fig.data[first_bar + 1].name = tr("waiting for communication (EMULATED link)")
    fig.data = fig.data[:first_bar + 2]   # the failure lines are drawn anew each time
    for mark in failure_marks(failures, steps, losses, attempts):
        fig.add_scatter(**mark, mode="lines", line=dict(dash="dot", color=FAILURE_COLOR),
                        row=1, col=1)


# ---- the widget ---------------------------------------------------------------------------------

class RunPanel(Follower):
    """Edit a RunSpec, launch it with Run, cancel with Stop, and watch loss, speed and memory."""

    def __init__(self, spec: RunSpec | None = None, fields: tuple = DEFAULT_FIELDS,
                 comparison: Comparison | None = None):
        self.spec = spec or RunSpec()
        self.comparison = comparison if comparison is not None else Comparison()
        self.current: Run | None = None     # the latest run, once its ranks have started
        self.state = "ready"
        self._lock = threading.Lock()
        self._stop_requested = False
        if set(fields) - {f.name for f in dataclasses.fields(RunSpec)}:
            raise InvalidValue("fields", fields, "a tuple of RunSpec field names")
        self.controls = {name: _control(name, self.spec) for name in fields}
        if "model" in self.controls and "model_size" in self.controls:
            self.controls["model"].observe(self._model_changed, names="value")
        Follower.__init__(self, "Run")   # the Run and Stop buttons and the thread behind them
        self.status = W.HTML()
        self.log = W.HTML()   # what the ranks print, prefixed with the rank (the last lines)
        self.fig = build_figure(self.spec.world_size)   # what is plotted (a plain go.Figure)
        self.view = LiveFigure()                          # what draws it, cheaply
        self.view.show(self.fig)
        self.view_cost: dict | None = None   # redraws, kernel CPU, browser drawing of the last run
        self.cost = W.HTML()                  # the cost line: what the view cost that run
        self.view.observe(self._show_cost, names="draw_ms")
        self.widget = W.VBox([W.HBox(list(self.controls.values()),
                                     layout=W.Layout(flex_flow="row wrap")),
                              W.HBox([self.run_button, self.stop_button]), self.status, self.cost,
                              self.log, self.view])
        self._set_status("ready", tr("press Run (worker processes are warming up meanwhile)"))
        warm_up()  # import torch in the forkserver now, so the first Run starts at once

    def spec_from_controls(self) -> RunSpec:
        """The spec the controls describe; ``ValueError`` (naming the field) if a value is bad
        or this machine cannot run it (fp16 on a CPU, more CUDA ranks than GPUs)."""
        values = {name: (None if w.value == "" else w.value) for name, w in self.controls.items()}
        spec = check_spec(self.spec.replace(**values))
        if check_machine(spec) == "cpu":
            # a typed world size, not the lesson's own, is held to %ranks' ceiling (4 CPU ranks
            # per usable core): a slip of the keyboard (256) would start 256 copies of torch
            check_cpu_world_size(spec.world_size, floor=self.spec.world_size)
        return spec

    def run(self, wait: bool = False) -> Run | None:
        """Start the controls' spec in the background and return at once (the Run button).

        A bad field shows its ``ValueError`` in the status line and starts nothing. With
        ``wait=True`` block until the run has ended, return it, and raise if it failed (or a
        field was bad): cells that must finish their run before the next cell use this.
        """
        if self.busy:
            if wait:
                raise RuntimeError("this panel's run is still going: stop it or wait for it")
            return None
        try:
            spec = self.spec_from_controls()
            if self.comparison is not None:
                spec = self.comparison.pin(spec)
        except ValueError as exc:
            self._set_status("invalid", html.escape(f"ValueError: {error_text(exc)}"))
            if wait:
                raise
            return None
        self.fig = build_figure(spec.world_size, title=ntr(
            "{strategy} on {n} rank, {model} {size}, global batch {batch}",
            "{strategy} on {n} ranks, {model} {size}, global batch {batch}", spec.world_size,
            strategy=spec.strategy, model=spec.model, size=spec.resolved_model_size,
            batch=spec.batch_size))
        self.view.show(self.fig)   # drawn (empty) before the ranks start
        device, why = spec.device_choice()
        self._set_status("starting", html.escape(ntr("starting {n} rank on {device} ({why})...",
                                                     "starting {n} ranks on {device} ({why})...",
                                                     spec.world_size, device=device, why=why)))
        self.current, self._stop_requested = None, False
        # launch() itself runs in the thread: the first one may wait seconds for the forkserver.
        self.start_following(self._follow, spec, name="gpututor-panel")
        if not wait:
            return None
        self.wait()
        if self.current is None:
            raise RuntimeError("the run did not start; the status line says why")
        if self.current.error is not None:
            raise self.current.error
        return self.current

    def wait(self, timeout: float | None = None) -> dict | None:
        """Block until the panel has drawn the end of its run; return the run's summary."""
        if self._thread is None:
            return None
        try:
            ended = self.join(timeout)
        except KeyboardInterrupt:  # kernel interrupt: take the ranks down too
            self.stop()
            raise
        if not ended:
            raise TimeoutError(f"the run has not ended after {timeout} s")
        return self.current.summary if self.current else None

    def stop(self, wait: bool = True) -> None:
        """Cancel the current run; with ``wait=False`` (the Stop button) return at once."""
        with self._lock:
            self._stop_requested, run = True, self.current
        if not self.busy:
            return
        self._set_status("stopping", tr("ending every rank..."))
        if run is not None:
            if wait:
                run.stop()
            else:
                self.stop_in_background(run)
        if wait:
            self.wait()

    def static_figure(self) -> go.Figure:
        """A plain ``go.Figure`` copy of the plots of the current (or last) run."""
        spec = self.current.spec if self.current else self.spec
        fig = build_figure(spec.world_size, title=self.fig.layout.title.text or "")
        if self.current:
            fill_figure(fig, list(self.current.records), spec.world_size,
                        list(self.current.failures), spec.max_restarts + 1)
        return fig

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # ---- the follower thread: launch, draw while records arrive, show the end ----------------
    def _follow(self, spec: RunSpec) -> None:
        self.view_cost = {"redraws": 0, "kernel_cpu_s": 0.0, "browser_draw_s": None,
                          "draw_ms_before": self.view.draw_ms or 0.0,
                          "started": time.monotonic(), "wall_s": None}
        try:
            run = launch(spec)
        except Exception as exc:  # noqa: BLE001 - whatever it is, the status line must say it
            self._set_status("failed", tr("could not start: {error}", error=html.escape(repr(exc))))
            return
        run.echo = None   # the ranks' output goes to the log area, not to whichever cell runs
        self.log.value = ""
        with self._lock:
            self.current, stop_now = run, self._stop_requested
        if stop_now:
            run.stop()
        problem = None
        world = spec.world_size
        try:   # the first complete step at once, then at most every UPDATE_INTERVAL_S
            self.follow(run, lambda: self._draw(run), interval=UPDATE_INTERVAL_S,
                        ready=lambda: len(run.records) >= world and
                        len(global_loss(run.records, world)[0]) > 0)
        except RunFailed:
            pass  # kept in run.error, shown below
        except Exception as exc:  # noqa: BLE001 - a bug while drawing: never leave ranks running
            problem = exc
            run.stop()
        self.buttons_idle()   # before the status line says the run has ended
        if problem is None:
            self._draw(run)  # the final state, every step
        self.view_cost["wall_s"] = time.monotonic() - self.view_cost["started"]
        self._show_end(run, problem)
        self._show_cost()

    def _show_cost(self, _change=None) -> None:
        """The cost line: what the live view cost the last run, as measured here (the panel's kernel
        thread; the front end's drawing code). benchmarks/bench_live_view.py measures all of it."""
        cost = self.view_cost
        if cost is None:
            return
        ms = self.view.draw_ms
        cost["browser_draw_s"] = drawn = None if ms is None else (ms - cost["draw_ms_before"]) / 1000
        wall = cost["wall_s"] or (time.monotonic() - cost["started"])
        share = 100 * cost["kernel_cpu_s"] / wall
        browser = tr("not measured (no browser has drawn it)") if drawn is None else tr(
            "{seconds:.3f} s ({share:.1f} % of the run's wall time)", seconds=drawn, share=100 * drawn / wall)
        summary = tr("live view: {share:.1f} % of the run in the kernel, drawing {drawn}", share=share,
                     drawn=tr("not measured") if drawn is None else f"{100 * drawn / wall:.1f} %")
        whole = html.escape(tr(
            "part of what the live view cost: {redraws} redraws; the panel's kernel thread {cpu:.3f} "
            "s of CPU ({share:.1f} % of the run's wall time); the browser's drawing code {browser} "
            "(not counted: sending the messages, and the browser's painting)",
            redraws=cost["redraws"], cpu=cost["kernel_cpu_s"], share=share, browser=browser))
        self.cost.value = (f"<details style='color:#57606a'><summary>{html.escape(summary)}"
                           f"</summary>{whole}</details>")

    def show_log(self, run: Run) -> None:
        """The last lines the ranks of ``run`` printed, prefixed with the rank, in the log area."""
        if run.output:
            lines = "\n".join(f"[rank {r}] {line}" for r, _, line in run.output[-LOG_LINES:])
            self.log.value = (f"<pre style='max-height:12em;overflow:auto;margin:0'>"
                              f"{html.escape(lines)}</pre>")

    def _draw(self, run: Run) -> None:
        started = time.thread_time()   # this thread's CPU: what the view costs the kernel
        self.show_log(run)
        records, world = list(run.records), run.spec.world_size
        failures, attempts = list(run.failures), run.spec.max_restarts + 1
        fill_figure(self.fig, records, world, failures, attempts)
        self.view.show(self.fig)
        self.view_cost["redraws"] += 1
        self.view_cost["kernel_cpu_s"] += time.thread_time() - started
        if not run.done and not self._stop_requested:
            steps = global_loss(records, world)[0]
            text = ntr("step {step} of {steps} on {n} rank", "step {step} of {steps} on {n} ranks",
                       world, step=steps[-1] + 1 if steps else 0, steps=run.spec.steps)
            if failures:   # the latest failure and restart, until the run ends
                text += "; " + failure_note(failures[-1], attempts)
            self._set_status("running", html.escape(text))

    def _show_end(self, run: Run, problem: Exception | None) -> None:
        if run.status == "finished":
            self.comparison.add(run.summary)
            notes = [failure_note(f, run.spec.max_restarts + 1) for f in run.failures]
            self._set_status("finished", html.escape("; ".join([summary_line(run.summary),
                                                                *notes])))
        elif run.status == "failed":
            self._set_status("failed", f"<pre>{html.escape(str(run.error))}</pre>")
        elif problem is not None:
            self._set_status("failed", tr("the panel could not draw: {error}",
                                          error=html.escape(repr(problem))))
        else:
            steps = len(global_loss(run.records, run.spec.world_size)[0])
            self._set_status("stopped", tr("after {steps} complete steps; every rank has ended",
                                           steps=steps))

    def _model_changed(self, change) -> None:
        self.controls["model_size"].options = list(MODEL_SIZES[change["new"]])

    def _set_status(self, state: str, text: str) -> None:
        self.state = state
        color = STATUS_COLORS.get(state, "#57606a")
        self.status.value = f'<b style="color:{color}">{tr(state)}</b>: {text}'


def _control(name: str, spec: RunSpec) -> W.Widget:
    """An input widget for one RunSpec field; IntText etc. so a bad value reaches validation."""
    value = spec.resolved_model_size if name == "model_size" else getattr(spec, name)
    common = dict(description=tr(name.replace("_", " ")), style={"description_width": "initial"},
                  layout=W.Layout(width="auto", min_width="150px"))
    if name in CHOICES:
        return W.Dropdown(options=CHOICES[name](spec), value=value, **common)
    if isinstance(value, bool):
        return W.Checkbox(value=value, **common)
    if isinstance(value, int):
        return W.IntText(value=value, **common)
    if isinstance(value, float):
        return W.FloatText(value=value, **common)
    if value is None or isinstance(value, str):
        return W.Text(value=value or "", **common)
    raise ValueError(f"fields: {name}={value!r} cannot be edited in a panel")
