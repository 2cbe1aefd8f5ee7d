"""Measure, don't guess: run a spec for several values of one field, and take one step apart.

- :func:`sweep` launches one real run per value, one after the other, and returns their
  summaries (the swept field and value added to each).
- :func:`step_anatomy` runs a short single-rank run and reports where its step's time and memory
  went: median seconds per phase, counted FLOPs, achieved FLOP/s, bytes by category.
- The yardstick for achieved FLOP/s on a CPU, whose datasheet peak we do not know (so no MFU
  there), is :func:`gpututor.measure.matmul.measure_matmul_flops`.

Every figure comes from measured records; nothing here is a formula dressed up as a measurement.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from ...config import RunSpec
from ...i18n import show, tr
from ...runtime.launcher import launch
from ...measure.profile import PHASES



def sweep(base_spec: RunSpec, field: str, values: Iterable,
          on_result: Optional[Callable[[dict], None]] = None) -> list[dict]:
    """Run ``base_spec`` once per value of ``field`` (sequentially); return the summaries.

    Each summary gets ``sweep_field`` and ``sweep_value``. ``on_result(summary)`` is called after
    each run; by default a one-line progress report is printed.
    """
    report = on_result or print_result
    summaries = []
    for value in values:
        spec = base_spec.replace(**{field: value})  # validated: a bad value raises ValueError
        summary = launch(spec).wait()
        summary = {**summary, "sweep_field": field, "sweep_value": value}
        report(summary)
        summaries.append(summary)
    return summaries


def print_result(summary: dict) -> None:
    """One line per finished run: the swept value, throughput, step time and peak memory."""
    def shown(what, value, fmt, unit=""):  # a run without a steady step measured nothing: say so
        return f"{tr(what)} " + (tr("not measured") if value is None else format(value, fmt) + unit)
    peak = summary["peak_mem_bytes"][0]
    step = summary["step_time_s"]
    parts = [shown("tokens/s", summary["tokens_per_s"], ",.0f"),
             shown("step time", None if step is None else step * 1e3, ".0f", " ms"),
             shown("peak memory used", peak / 1e6 if peak else None, ".1f", " MB"),
             shown("final loss", summary["final_loss"], ".3f")]
    show(f"{summary['sweep_field']}={summary['sweep_value']!r}: " + ", ".join(parts))


@dataclass(frozen=True)
class StepAnatomy:
    """Where one training step's time and memory go, all measured in one single-rank run."""

    spec: RunSpec
    phase_s: dict             # median seconds per phase (forward, backward, optimizer)
    step_time_s: float        # median wall time of a whole step
    flops_per_step: int       # counted by PyTorch's FlopCounterMode on step 1
    achieved_flops: float     # flops_per_step / step_time_s
    mfu: Optional[float]      # achieved / the device's datasheet peak; None where unknown (CPU)
    memory: dict              # bytes: params, grads, optimizer, activations
    peak_mem_bytes: Optional[int]
    params: int
    tokens_per_step: int
    summary: dict             # the run's summary, as ``run.wait()`` returns it
    records: list             # the run's per-step records, for anyone who wants to look


def step_anatomy(spec: RunSpec) -> StepAnatomy:
    """Run ``spec`` on one rank and take its steps apart (medians over steady-state steps)."""
    spec = spec.replace(strategy="single", world_size=1, inject_fault=None)
    run = launch(spec)
    summary = run.wait()
    records = sorted(run.records, key=lambda r: r["step"])
    # Leave out the steps that counted FLOPs or probed memory (both slow a step down) and the
    # warm-up steps; fall back to whatever there is for very short runs.
    steady = [r for r in records if not r["probe"] and r["step"] >= spec.warmup_steps] \
        or [r for r in records if not r["probe"]] or records
    median = lambda key: statistics.median(r[key] for r in steady)
    phase_s = {name: median(f"{name}_s") for name in PHASES}
    step_time = median("step_time_s")
    flops = summary["flops_per_step"]
    measured = [r for r in records if r["mem_activations"] is not None] or records
    last = measured[-1]
    return StepAnatomy(
        spec=spec,
        phase_s=phase_s,
        step_time_s=step_time,
        flops_per_step=flops,
        achieved_flops=flops / step_time,
        mfu=summary["mfu"],
        memory={c: last[f"mem_{c}"] for c in ("params", "grads", "optimizer", "activations")},
        peak_mem_bytes=last["mem_peak"],
        params=summary["params"],
        tokens_per_step=spec.batch_size * spec.seq_len,
        summary=summary,
        records=records,
    )
