"""Check the planner on this machine: measure it, predict the lessons' runs, run them, compare.

1. :func:`~gpututor.lessons.choosing_hardware.machine.measure_machine` times the model's own matmul shapes (``measure.matmul.measure_matmul_flops``:
   the yardstick "peak" of a CPU, whose datasheet peak we do not know) on one rank alone and on
   every rank at once (ranks that share a CPU slow each other down), and the collectives between
   ranks (``runtime.bench.run_comm_benchmark``), fitting latency α and bandwidth β per collective to
   the ring formulas of ``gpututor.formulas``.
2. :func:`predict_run` predicts one run of a :class:`~gpututor.RunSpec`, before it runs: peak
   memory and activations from ``plan.as_built.tiny_gpt_memory`` (the tiny GPT as built, held as its
   strategy holds it); step time = (fixed cost + FLOPs / (matmul rate x efficiency)) x the
   slowdown of sharing the machine, + collectives.
3. :func:`calibrate` runs two single-rank references (the batch and half of it) and fits the
   fixed cost and the *efficiency* to them (efficiency plays MFU's part: the share of the peak a
   real step reaches). With those, every other registered strategy is predicted, then launched,
   and the two compared.

The references' step-time error is zero by construction (they were fitted); every other row
is a prediction made before its run. All collectives are counted as exposed: gloo on CPU runs
them blocking (DDP's one bucket of a small model starts only when backward is done).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from ...checks import InvalidValue
from ...formulas import block_params, bubble_to_compute_ratio, training_flops_per_token
from ...i18n import tr
from ...i18n.shown import table_text
from ...models import build_model, config_of
from ...parallel import STRATEGIES, check_spec, get_strategy
from ...plan.as_built import as_built, tiny_gpt_memory
from ...plan.layouts import transformer_of
from ...plan.memory import per_device_memory
from ...runtime.launcher import RunFailed, launch
from .machine import Machine, measure_machine, ranks_available
from ...formulas import MB



# ---- predictions ---------------------------------------------------------------------------------

def step_flops(spec) -> float:
    """The busiest rank's FLOPs in one step (matmuls; ``6·N + 12·L·s·h`` per token shared out).

    Data parallel divides the tokens; tensor parallel the blocks' matmuls and attention (the
    tied head stays whole on every rank); pipeline parallel the blocks (the largest stage's
    share, plus the head, which the last stage runs). Activation checkpointing runs the blocks'
    forward again: 4/3 of their work.
    """
    cfg, s = config_of(spec), spec.seq_len
    layout = _described(spec).memory_layout
    n = spec.world_size
    dp = get_strategy(spec.strategy).data_parallel_size(spec)
    tp = n if layout.tensor_parallel else 1
    tokens = spec.batch_size * s / dp
    # the one formula, for the blocks' matmul weights (12·d² each) and for the tied head;
    # checkpointing recomputes the blocks (not the head): "full" recomputation for them
    blocks = training_flops_per_token(
        block_params(cfg.d_model) * cfg.n_layer, cfg.n_layer, s, cfg.d_model,
        recompute="full" if spec.activation_checkpointing else "none")
    head = training_flops_per_token(cfg.vocab_size * cfg.d_model)
    if layout.pipeline:
        per, extra = divmod(cfg.n_layer, n)
        return tokens * (blocks * (per + (extra > 0)) / cfg.n_layer + head)
    return tokens * (blocks / tp + head)


def _described(spec):
    """``spec``'s strategy, if it says how it holds the model (``Strategy.memory_layout``);
    ``ValueError`` naming the strategies that do, else."""
    known = as_built()
    if spec.strategy not in known:
        raise InvalidValue("strategy", spec.strategy, "a registered strategy that describes how "
                           "it holds the model (Strategy.memory_layout): " + ", ".join(known),
                           "for a prediction")
    return known[spec.strategy]


def collectives(spec) -> list[tuple[str, float]]:
    """The collectives one rank runs in a step of ``spec``, as (op, bytes of the full buffer):
    what its strategy says (``Strategy.step_collectives``)."""
    ops = get_strategy(spec.strategy).step_collectives(spec, build_model(spec))
    if ops is None:
        raise InvalidValue("strategy", spec.strategy, "a strategy that says which collectives a "
                           "step runs (Strategy.step_collectives)",
                           "for a prediction: this one does not say")
    return ops


def predict_run(spec, machine: Machine) -> dict:
    """Predicted peak memory, activations and step time of ``spec`` (rank 0), before it runs."""
    strategy = _described(spec)
    for name, built in (("model", "gpt"), ("precision", "fp32"), ("grad_accum", 1)):
        if getattr(spec, name) != built:
            raise InvalidValue(name, getattr(spec, name), f"{built!r} (a prediction is for "
                               "model='gpt', precision='fp32', grad_accum=1: the tiny GPT as "
                               "built, in fp32)", "for a prediction")
    cfg, layout = config_of(spec), strategy.memory_layout
    m = strategy.option(spec, "microbatches") or 1    # micro-batches of a pipeline (else 1)
    memory = tiny_gpt_memory(cfg, spec.batch_size, spec.seq_len, spec.strategy, spec.world_size,
                             spec.activation_checkpointing,
                             "sgd" if spec.optimizer == "sgd" else "adamw", m)
    efficiency = machine.efficiency or 1.0
    compute = machine.overhead_s + step_flops(spec) / (machine.matmul_flops * efficiency)
    slowdown = machine.sharing_slowdown if spec.world_size > 1 else 1.0
    comm = sum(machine.collective_seconds(op, nbytes) for op, nbytes in collectives(spec))
    if layout.pipeline:   # the pipeline's idle slots come on top of its m busy ones
        p = spec.world_size
        # the fixed cost follows the operations: a stage runs 1/p of the blocks, m times
        compute = machine.overhead_s * m / p + step_flops(spec) / (machine.matmul_flops
                                                                   * efficiency)
        stretch = 1 + bubble_to_compute_ratio(p, m)
        compute, comm = compute * stretch, comm * stretch
    compute *= slowdown
    return {**memory, "formula_peak": _general_formula(spec, cfg), "compute_s": compute,
            "comm_s": comm, "step_time_s": compute + comm}


def _general_formula(spec, cfg) -> float:
    """What the general planner says: model states + Korthikanti activations (fp32, no dropout)."""
    strategy = _described(spec)
    layout, n = strategy.memory_layout, spec.world_size
    dp = strategy.data_parallel_size(spec)
    tp = n if layout.tensor_parallel else 1
    pp = n if layout.pipeline else 1
    model = transformer_of(spec)
    if cfg.n_layer % pp:
        return float("nan")
    m = strategy.option(spec, "microbatches") or 1
    micro = spec.batch_size // dp // (m if pp > 1 else 1)
    return per_device_memory(model, micro, strategy.zero_stage, dp, tp, pp, "fp32", "adam",
                             "full" if spec.activation_checkpointing else "none",
                             dropout=False, microbatches=m)["total"]


# ---- predicted vs measured -----------------------------------------------------------------------

@dataclass
class Calibration:
    machine: Machine
    rows: list
    skipped: list             # (strategy, why)
    reference: dict           # the fitted single-rank run's summary


def calibration_specs(base, strategies=None, world_size: int = 2) -> list[tuple[str, object]]:
    """(label, spec) of the runs: two single-rank references (the batch, and half of it: what
    each of 2 data-parallel ranks computes), then activation checkpointing, then each strategy
    on ``world_size`` ranks. Where a strategy cannot run this spec (or is not registered, or
    has no memory layout), the second item is the reason why."""
    names = strategies or list(as_built())
    single = base.replace(strategy="single", world_size=1)
    out = [("single (reference)", single),
           ("single, half batch (ref.)", single.replace(batch_size=base.batch_size // 2)),
           ("single + checkpointing", single.replace(activation_checkpointing=True))]
    available = ranks_available(base)
    for name in names:
        if name == "single":
            continue
        if available < world_size:
            out.append((name, f"needs {world_size} CUDA devices, this machine has {available}"))
            continue
        if name not in STRATEGIES or name not in as_built():
            out.append((name, "not registered" if name not in STRATEGIES
                        else "it does not say how it holds the model (Strategy.memory_layout)"))
            continue
        try:
            out.append((name, check_spec(base.replace(strategy=name, world_size=world_size))))
        except ValueError as exc:
            out.append((name, str(exc)))
    return out


def fit_step_time(machine: Machine, runs: list[tuple[object, float]]) -> None:
    """Fit ``step = overhead + FLOPs / (matmul rate x efficiency)`` to (spec, step time) pairs.

    Two runs of different batch give both numbers; one run (or a fit that comes out negative,
    e.g. from noise) gives the efficiency alone with no overhead.
    """
    (spec1, t1), *rest = runs
    f1 = step_flops(spec1)
    machine.overhead_s, machine.efficiency = 0.0, f1 / t1 / machine.matmul_flops
    if rest:
        spec2, t2 = rest[0]
        f2 = step_flops(spec2)
        if f1 != f2:
            seconds_per_flop = (t1 - t2) / (f1 - f2)
            overhead = t1 - f1 * seconds_per_flop
            if seconds_per_flop > 0 and overhead >= 0:
                machine.overhead_s = overhead
                machine.efficiency = 1 / (seconds_per_flop * machine.matmul_flops)


def calibrate(base, strategies=None, machine: Machine | None = None, world_size: int = 2,
              repeats: int = 1, report=print) -> Calibration:
    """Measure the machine, fit the step-time model on one rank, predict and run each strategy.

    ``base`` is a :class:`~gpututor.RunSpec` (fp32 tiny GPT, even batch); ``strategies``
    defaults to every registered one (those the memory model does not know, or that fail to
    run, are listed in ``skipped`` with why). The two references run first and the model is
    fitted to them (rows marked ``fitted``); then every other run is predicted, and only then
    launched. ``repeats`` > 1 runs everything again, interleaved, and reports the median step
    time of each (the predictions stay those made before the first launch).
    """
    base = base.pin_device(world_size)   # one kind of device for every run, 1 rank or many
    machine = machine or measure_machine(base, world_size)
    plan = calibration_specs(base, strategies, world_size)
    skipped = [(label, spec) for label, spec in plan if isinstance(spec, str)]
    runs = [(label, spec) for label, spec in plan if not isinstance(spec, str)]
    summaries, failed = {label: [] for label, _ in runs}, {}

    def run(label, spec):
        try:
            summaries[label].append(launch(spec).wait())
        except RunFailed as exc:   # a strategy broken here must not stop the others
            failed[label] = "run failed: " + str(exc).splitlines()[0]

    for label, spec in runs[:2]:
        summaries[label].append(launch(spec).wait())
    fit_step_time(machine, [(spec, summaries[label][0]["step_time_s"]) for label, spec in runs[:2]])
    predicted = {label: predict_run(spec, machine) for label, spec in runs}   # before they run
    for label, spec in runs[2:]:
        run(label, spec)
    for _ in range(repeats - 1):
        for label, spec in runs:
            if label not in failed:
                run(label, spec)
    rows = []
    for i, (label, spec) in enumerate(runs):
        if label in failed:
            skipped.append((label, failed[label]))
            continue
        rows.append(_row(label, spec, predicted[label], _median(summaries[label]), fitted=i < 2))
        if report:
            report(_line(rows[-1]))
    return Calibration(machine, rows, skipped, summaries[runs[0][0]][0])


def _median(summaries: list[dict]) -> dict:
    """The summary with the median step time (memory is the same in every repeat)."""
    ordered = sorted(summaries, key=lambda s: s["step_time_s"])
    return ordered[(len(ordered) - 1) // 2]


def _row(label, spec, predicted, summary, fitted: bool) -> dict:
    measured_peak = summary["peak_mem_bytes"][0]
    measured_act = summary["mem_by_category"]["activations"][0]
    err = lambda p, m: None if p is None or not m else (p - m) / m
    return {"run": label, "strategy": spec.strategy, "world_size": spec.world_size,
            "predicted_peak": predicted["peak"], "measured_peak": measured_peak,
            "peak_error": err(predicted["peak"], measured_peak),
            "formula_peak": predicted["formula_peak"],
            "formula_error": err(predicted["formula_peak"], measured_peak),
            "predicted_activations": predicted["activations"],
            "measured_activations": measured_act,
            "predicted_step_s": predicted["step_time_s"],
            "measured_step_s": summary["step_time_s"],
            "step_error": err(predicted["step_time_s"], summary["step_time_s"]),
            "predicted_comm_s": predicted["comm_s"], "measured_comm_s": summary["comm_s"],
            "fitted": fitted, "note": get_strategy(spec.strategy).memory_layout.note}


def _line(row: dict) -> str:
    pct = lambda v: "  n/a" if v is None else f"{v:+6.1%}"
    return (f"{row['run']:<26} peak {row['measured_peak'] / MB:7.2f} MB measured, "
            f"{row['predicted_peak'] / MB:7.2f} predicted ({pct(row['peak_error'])}); step "
            f"{row['measured_step_s'] * 1e3:6.1f} ms measured, {row['predicted_step_s'] * 1e3:6.1f}"
            f" predicted ({pct(row['step_error'])}{', fitted' if row['fitted'] else ''})")


def calibration_rows(cal: Calibration) -> tuple[list[str], list[list[str]]]:
    """Predicted vs measured, one row per run: peak memory (MB; as built, and by the general
    formula) and step time (ms), each with its relative error, in the notebook's language
    (numbers, units and strategy names as they are); ``*``: the step time was fitted."""
    shown = {"single (reference)": tr("single (reference)"),
             "single, half batch (ref.)": tr("single, half batch (ref.)"),
             "single + checkpointing": tr("single + checkpointing")}
    columns = [tr("run"), tr("ranks"), tr("measured peak MB"), tr("predicted MB"),
               tr("predicted error"), tr("formula MB"), tr("formula error"),
               tr("measured step ms"), tr("predicted ms"), tr("step error (* fitted)")]
    pct = lambda v: "n/a" if v is None or v != v else f"{v:+.1%}"
    rows = [[shown.get(r["run"], r["run"]), str(r["world_size"]), f"{r['measured_peak'] / MB:.2f}",
             f"{r['predicted_peak'] / MB:.2f}", pct(r["peak_error"]), f"{r['formula_peak'] / MB:.2f}",
             pct(r["formula_error"]), f"{r['measured_step_s'] * 1e3:.1f}",
             f"{r['predicted_step_s'] * 1e3:.1f}", pct(r["step_error"]) + ("*" if r["fitted"] else "")]
            for r in cal.rows]
    return columns, rows


def calibration_notes(cal: Calibration) -> list[str]:
    """What goes with the table: the machine's fitted figures, what was skipped."""
    m = cal.machine
    shared = tr(", {shared:.1f} per rank with {n} busy (x{slowdown:.2f} slower)",
                shared=m.matmul_flops_shared / 1e9, n=m.world_size,
                slowdown=m.sharing_slowdown) if m.matmul_flops_shared else ""
    comm = tr(", all-reduce β {beta:.2f} GB/s, α {alpha:.0f} µs",
              beta=m.comm["all_reduce"][1] / 1e9, alpha=m.comm["all_reduce"][0] * 1e6) \
        if m.comm else ""
    load = tr("; load average {load:.1f}", load=m.load_average) if m.load_average else ""
    lines = [tr("machine: {device}, matmul {flops:.1f} GFLOP/s on one rank{shared}; fitted on "
                "the references: efficiency {efficiency:.0%} of the matmul rate + {overhead:.1f} "
                "ms per step{comm}{load}", device=m.device, flops=m.matmul_flops / 1e9,
                shared=shared, efficiency=m.efficiency, overhead=m.overhead_s * 1e3,
                comm=comm, load=load)]
    return lines + [tr("skipped {name}: {why}", name=name, why=why) for name, why in cal.skipped]


def calibration_table(cal: Calibration) -> str:
    """:func:`calibration_rows` as plain text, with :func:`calibration_notes` under it."""
    return "\n".join([table_text(*calibration_rows(cal))] + calibration_notes(cal))


def summary_errors(cal: Calibration) -> dict:
    """Largest absolute peak-memory error, and median/largest step-time error of the predictions."""
    peaks = [abs(r["peak_error"]) for r in cal.rows if r["peak_error"] is not None]
    steps = [abs(r["step_error"]) for r in cal.rows if not r["fitted"]]
    return {"max_peak_error": max(peaks, default=None),
            "median_step_error": statistics.median(steps) if steps else None,
            "max_step_error": max(steps, default=None)}
