"""Lesson 03's views: what each ZeRO stage should keep per rank, next to what the runs measured.

- The formula is the planner's :func:`gpututor.plan.memory.model_state_bytes`: bytes of
  parameters, gradients and optimizer state per rank for a ZeRO stage (0 = data parallel),
  under a stated bytes-per-parameter convention (``CONVENTIONS``; sources disagree, so we
  always say which one we use).
- :func:`memory_rows` / :func:`memory_figure` put measured bytes (from run summaries) and the
  formula side by side; :func:`comm_rows` / :func:`comm_figure` show the bytes sent per step
  (``verdicts.py`` says what they showed, in words).
- :class:`ShardingBoard` runs one spec under several strategies, one after the other, and draws
  each rank's memory bars and the loss curves live while they train.

Formulas are labelled as formulas in every table and plot; measured numbers come from the runs.
"""
from __future__ import annotations

import html
import threading

import ipywidgets as W
from IPython.display import HTML
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...i18n import tr
from ...i18n.shown import NO_MATH, table_html
from ...measure.memory import CATEGORIES as MEMORY_CATEGORIES
from ...parallel import get_strategy
from ...plan.memory import model_state_bytes
from ...runtime.launcher import RunFailed, launch
from ...ui.follow import Follower
from ...ui.live_figure import LiveFigure
from ...ui.series import global_loss, memory_by_rank
from ...ui.style import COLOURS, SERIES, TEMPLATE
from ...formulas import MB

ORDER = ("ddp", "zero1", "zero2", "zero3", "fsdp")   # lesson 03's runs, replicas first
MARK, PEAK = "#24292f", SERIES[3]   # the formula's mark and the measured peak, in every figure
# the loss curves take the palette's colours the memory categories leave free
LOSSES = [c for c in SERIES if c not in {COLOURS[k] for k in MEMORY_CATEGORIES}]


def zero_stage(strategy: str) -> int:
    """What ``strategy`` shards over its ranks, as it says itself (``Strategy.zero_stage``):
    0 nothing (data parallel), else its ZeRO stage."""
    return get_strategy(strategy).zero_stage



# ---- measured vs formula ------------------------------------------------------------------

def memory_rows(summaries: dict[str, dict], rank: int = 0,
                convention: str = "fp32-adamw", buckets: dict | None = None) -> list[dict]:
    """One row per labelled run: measured bytes by category and peak, the formula's state, gap.
    ``buckets`` (label -> bytes) adds DDP's all-reduce buckets as their own slice: a second copy
    of the gradients DDP keeps between steps (``gradient_as_bucket_view=False``), read from DDP
    (``runs.ddp_buckets``), which the runs' ``grads`` (the ``p.grad`` tensors) do not count."""
    buckets = buckets or {}
    rows = []
    for label, s in summaries.items():
        measured = {c: s["mem_by_category"][c][rank] or 0 for c in MEMORY_CATEGORIES}
        state = measured["params"] + measured["grads"] + measured["optimizer"]
        formula = model_state_bytes(s["params"], zero_stage=zero_stage(s["strategy"]),
                                    dp=s["world_size"], convention=convention)
        rows.append({"label": label, "strategy": s["strategy"], "world_size": s["world_size"],
                     **{f"measured_{c}": v for c, v in measured.items()},
                     "measured_state": state, "peak": s["peak_mem_bytes"][rank],
                     "buckets": buckets.get(label, 0),
                     **{f"formula_{c}": v for c, v in formula.items()},
                     "state_gap": state - formula["total"]})
    return rows


def memory_table(rows: list[dict]) -> HTML:
    """The rows as an HTML table, in MB: measured state against the formula, the gap in bytes,
    then activations and the peak ("not measured" where a run has no figure)."""
    def mb(v):
        return tr("not measured") if v is None else f"{v / MB:.2f}"
    heads = [tr("run"), tr("params"), tr("grads"), tr("optimizer"), tr("state (measured)"),
             tr("state (formula)"), tr("gap (bytes)"), tr("DDP's buckets"), tr("activations"),
             tr("peak")]
    body = [[r["label"], mb(r["measured_params"]), mb(r["measured_grads"]),
             mb(r["measured_optimizer"]), mb(r["measured_state"]), mb(r["formula_total"]),
             f"{r['state_gap']:,.0f}", mb(r.get("buckets", 0)), mb(r["measured_activations"]),
             mb(r["peak"])] for r in rows]
    caption = tr("MB per rank, measured on rank 0; the formula counts model state only; the gap "
                 "is in bytes; DDP's buckets, read from DDP, are a second copy of the gradients "
                 "and not in the state")
    return HTML(f"<p class='{NO_MATH}' style='color:#57606a;font-size:0.9em;margin:0.3em 0'>"
                f"{html.escape(caption)}</p>" + table_html(heads, body))


def memory_figure(rows: list[dict], title: str = "Per-rank memory: measured bars, formula "
                  "marks") -> go.Figure:
    """Stacked measured bytes per run, with the formula's model state and the measured peak."""
    labels = [r["label"] for r in rows]
    fig = go.Figure()
    for c in MEMORY_CATEGORIES:
        fig.add_bar(x=labels, y=[r[f"measured_{c}"] / MB for r in rows],
                    name=tr("{category} (measured)", category=tr(c)), marker_color=COLOURS[c])
    if any(r.get("buckets") for r in rows):
        fig.add_bar(x=labels, y=[r.get("buckets", 0) / MB for r in rows],
                    name=tr("DDP's buckets (read from DDP)"),
                    marker=dict(color=COLOURS["grads"], pattern=dict(shape="/")))
    fig.add_scatter(x=labels, y=[r["formula_total"] / MB for r in rows], mode="markers",
                    name=tr("params+grads+optimizer (formula)"),
                    marker=dict(symbol="line-ew-open", size=36, color=MARK,
                                line=dict(width=3, color=MARK)))
    fig.add_scatter(x=labels, y=[None if r["peak"] is None else r["peak"] / MB for r in rows],
                    mode="markers",
                    name=tr("peak during a step (measured)"),
                    marker=dict(symbol="diamond", size=10, color=PEAK))
    fig.update_layout(barmode="stack", title=tr(title), yaxis_title="MB", template=TEMPLATE,
                      height=380, margin=dict(l=60, r=20, t=70, b=50))
    return fig


def comm_rows(summaries: dict[str, dict], baseline: str = "ddp") -> list[dict]:
    """Measured communication per step and rank; bytes also relative to ``baseline``'s."""
    base = summaries[baseline]["comm_wire_bytes_per_step"] if baseline in summaries else None
    rows = []
    for label, s in summaries.items():
        wire = s["comm_wire_bytes_per_step"]
        rows.append({"label": label, "wire_bytes": wire, "data_bytes": s["comm_bytes_per_step"],
                     "vs_baseline": wire / base if base and wire is not None else None,
                     "step_time_s": s["step_time_s"], "comm_s": s["comm_s"],
                     "compute_s": s["compute_s"], "n_params": s["params"]})
    return rows


def comm_figure(rows: list[dict], baseline: str = "ddp") -> go.Figure:
    """Bars of the bytes each rank sends per step, labelled with the ratio to ``baseline``.
    (For the step time split into compute and waiting, see ``plots.step_breakdown``.)"""
    labels = [r["label"] for r in rows]
    fig = go.Figure(go.Bar(x=labels, y=[None if r["wire_bytes"] is None else r["wire_bytes"] / MB
                                        for r in rows],
                           text=[f"{r['vs_baseline']:.2f}x {baseline}" if r["vs_baseline"]
                                 else "" for r in rows], textposition="outside",
                           marker_color=COLOURS["communication"]))
    fig.update_layout(title=tr("Sent by each rank per step (counted: each collective's "
                               "metered size × its ring bus factor)"),
                      yaxis_title=tr("MB per step"), template=TEMPLATE, height=360,
                      margin=dict(l=60, r=20, t=70, b=50))
    return fig


def fit_figure(rows: list[dict], capacity: float, peaks: dict[str, float]) -> go.Figure:
    """Which stage first fits a capacity: per strategy the plan (bars: formula's model state,
    measured activations, DDP's buckets for ddp), the uncapped run's peak (``peaks``, diamonds),
    the capacity (a line), and over each bar what the capped run did (``rows``: fits or OOM)."""
    labels = [r["strategy"] for r in rows]
    fig = go.Figure()
    fig.add_bar(x=labels, y=[r["planned"] / MB for r in rows],
                name=tr("plan: model state (formula) + activations (measured) "
                       "+ DDP's buckets (ddp)"),
                text=[tr("fits") if r["fits"] else tr("out of memory") for r in rows],
                textposition="inside", insidetextanchor="start", textangle=0,
                marker_color=SERIES[4])
    fig.add_scatter(x=labels, y=[None if peaks.get(n) is None else peaks[n] / MB
                                 for n in labels], mode="markers",
                    name=tr("peak during a step, uncapped run (measured)"),
                    marker=dict(symbol="diamond", size=10, color=PEAK))
    fig.add_hline(y=capacity / MB, line_dash="dash",
                  annotation_text=tr("capacity {mb:.0f} MB", mb=capacity / MB))
    fig.update_layout(title=tr("Under a capacity per rank: the plan, and what the capped runs "
                               "did"), yaxis_title="MB", template=TEMPLATE, height=400,
                      margin=dict(l=60, r=20, t=70, b=50), legend=dict(orientation="h", y=-0.15))
    return fig


def variants_figure(summaries: dict[str, dict], rank: int = 0) -> go.Figure:
    """The same model under several variants of one strategy, side by side, all measured on
    ``rank``: bytes sent per step, what forward left for backward (activations) and the peak.
    A run that did not measure a figure gets no bar there (never a bar of 0)."""
    labels = list(summaries)
    panels = [("sent per step", lambda s: s["comm_wire_bytes_per_step"]),
              ("activations", lambda s: s["mem_by_category"]["activations"][rank]),
              ("peak during a step", lambda s: s["peak_mem_bytes"][rank])]
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[tr(t) for t, _ in panels])
    for col, (_, value) in enumerate(panels, start=1):
        ys = [value(s) for s in summaries.values()]
        fig.add_bar(x=labels, y=[None if y is None else y / MB for y in ys], showlegend=False,
                    text=[tr("not measured") if y is None else f"{y / MB:.2f}" for y in ys],
                    textposition="outside", row=1, col=col)
        fig.update_yaxes(title_text="MB", row=1, col=col)
    fig.update_layout(title=tr("FSDP variants, measured per rank"), template=TEMPLATE,
                      height=380, margin=dict(l=60, r=20, t=80, b=50))
    return fig


# ---- the live board -----------------------------------------------------------------------

class ShardingBoard(Follower):
    """Run specs one after the other; draw live each rank's memory and every run's loss curve.

    ``runs`` maps a label to a :class:`~gpututor.RunSpec`, e.g. one per strategy. Over each
    memory bar a mark shows the formula's model state for that strategy
    (:func:`model_state_bytes`, ``convention``); bars are measured.
    """

    def __init__(self, runs: dict, convention: str = "fp32-adamw"):
        self.runs, self.convention = dict(runs), convention
        self.records = {label: [] for label in self.runs}
        self.summaries: dict[str, dict] = {}
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._current = None
        self.status = W.HTML(tr("ready: press Run"))
        Follower.__init__(self, "Run all")   # the Run and Stop buttons and their thread
        self.fig = self._figure()    # what is plotted (a plain go.Figure)
        self.view = LiveFigure()     # what draws it while the runs train (ui/live_figure.py)
        self.view.show(self.fig)
        self.widget = W.VBox([W.HBox([self.run_button, self.stop_button]), self.status,
                              self.view])

    @property
    def bars(self) -> list[tuple[str, int]]:
        return [(label, rank) for label, spec in self.runs.items()
                for rank in range(spec.world_size)]

    def run(self, wait: bool = False) -> dict | None:
        """Start the runs in a background thread (the button); ``wait=True`` blocks until done."""
        if self.busy:
            raise RuntimeError("the board is still running: stop it or wait for it")
        self._stop.clear()
        self.error = None
        self.records = {label: [] for label in self.runs}
        self.summaries = {}
        self.start_following(self._follow, name="gpututor-board")
        if not wait:
            return None
        self.wait()
        if self.error is not None:
            raise self.error
        return self.summaries

    def wait(self) -> dict:
        self.join()
        return self.summaries

    def stop(self, wait: bool = False) -> None:
        """Stop the current run and skip the rest (returns at once; ``wait=True``: when all
        has ended)."""
        self._stop.set()
        run = self._current
        if run is not None:
            self.stop_in_background(run)
        if wait:
            self.join()

    def static_figure(self) -> go.Figure:
        fig = self._figure(live=False)
        self._fill(fig)
        return fig

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # ---- in the background thread ------------------------------------------------------------
    def _follow(self) -> None:
        try:
            for label, spec in self.runs.items():
                if self._stop.is_set():
                    break
                self._status(tr("running <b>{label}</b> on {n} ranks", label=html.escape(label),
                                n=spec.world_size))
                self._current = run = launch(spec)
                try:
                    self.follow(run, self._draw, on_record=self.records[label].append)
                except RunFailed as exc:
                    if not self._stop.is_set():
                        self.error = exc
                        self._status(tr("<b>{label}</b> failed: <pre>{error}</pre>",
                                        label=html.escape(label), error=html.escape(str(exc))))
                        return
                if run.status == "finished":
                    self.summaries[label] = run.summary
                self._draw()
            self._status(tr("stopped") if self._stop.is_set() else
                         tr("finished {n} runs", n=len(self.summaries)))
        except Exception as exc:  # noqa: BLE001 - whatever it is, the status line must say it
            self.error = exc
            self._status(tr("failed: {error}", error=html.escape(repr(exc))))
        finally:
            self._current = None

    def _status(self, text: str) -> None:
        self.status.value = text

    def _draw(self) -> None:
        self._fill(self.fig)
        self.view.show(self.fig)

    # ---- figure --------------------------------------------------------------------------------
    def _figure(self, live: bool = True) -> go.Figure:
        """The board's figure. Its bars, one per rank, are named "zero1 r0", "r1", ... in the
        live view (its canvas is narrow: a run's name under its first rank only), and on two
        levels, run over rank, in plotly's static copy."""
        fig = make_subplots(rows=1, cols=2, column_widths=[0.35, 0.65], horizontal_spacing=0.08,
                            subplot_titles=(tr("loss (mean over ranks)"),
                                            tr("memory of each rank (MB, measured)")))
        dashes = ("solid", "dash", "dot", "dashdot", "longdash")
        for i, label in enumerate(self.runs):  # equal curves lie on top of each other: dash them
            fig.add_scatter(x=[], y=[], mode="lines+markers", name=tr("loss {label}", label=label),
                            row=1, col=1, line=dict(dash=dashes[i % len(dashes)],
                                                    color=LOSSES[i % len(LOSSES)]),
                            marker=dict(size=max(3, 10 - 2 * i)))
        x = ([f"{label} r{rank}" if rank == 0 else f"r{rank}" for label, rank in self.bars] if live
             else [[label for label, _ in self.bars], [f"r{rank}" for _, rank in self.bars]])
        for c in MEMORY_CATEGORIES:
            fig.add_bar(x=x, y=[0] * len(self.bars), name=tr(c), row=1, col=2,
                        marker_color=COLOURS[c])
        fig.add_scatter(x=x, y=[None] * len(self.bars), mode="markers",
                        name=tr("params+grads+optimizer (formula)"), row=1, col=2,
                        marker=dict(symbol="line-ew-open", size=18, color=MARK,
                                    line=dict(width=3, color=MARK)))
        fig.update_layout(barmode="stack", height=420, template=TEMPLATE,
                          margin=dict(l=50, r=20, t=60, b=40), legend=dict(orientation="h",
                                                                           y=-0.3))
        fig.update_xaxes(title_text=tr("step"), row=1, col=1)
        return fig

    def _formula_mb(self, label: str):
        """The formula's model state per rank, once the run has said how many parameters."""
        records, spec = self.records.get(label), self.runs[label]
        if not records:
            return None
        return model_state_bytes(records[0]["params"], zero_stage=zero_stage(spec.strategy),
                                 dp=spec.world_size, convention=self.convention)["total"] / MB

    def _fill(self, fig: go.Figure) -> None:
        n = len(self.runs)
        for i, label in enumerate(self.runs):
            steps, losses = global_loss(self.records[label], self.runs[label].world_size)
            fig.data[i].x, fig.data[i].y = steps, losses
        memory = {label: memory_by_rank(self.records[label], spec.world_size)
                  for label, spec in self.runs.items()}
        for j, c in enumerate(MEMORY_CATEGORIES):
            fig.data[n + j].y = [memory[label][c][rank] / MB for label, rank in self.bars]
        fig.data[n + len(MEMORY_CATEGORIES)].y = [self._formula_mb(label)
                                                  for label, _ in self.bars]
