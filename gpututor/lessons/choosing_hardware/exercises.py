"""Lesson 08's exercise checkers: each takes the learner's answer and the lesson's own objects
(a model preset, the recommendation, the calibration) and derives what it expects, so the
notebook shows only the call. ``...`` means "not answered yet".

- :func:`check_bytes_per_param`: the learner's bytes of model state per parameter on one GPU,
  for ZeRO stages and GPU counts it chooses, against ``model_state_bytes`` of one parameter,
  which refuses while the learner's function runs.
- :func:`check_smallest_count`: the learner's fewest GPUs whose usable memory holds a model's
  states with a ZeRO stage, on models, stages and GPUs it chooses and draws, against the planner's
  formula, which refuses while the learner's function runs.
- :func:`check_days_at_hfu`: the learner's days of an estimate at another share of peak on all
  it computes, the planner's ``hfu`` (hardware FLOPs utilisation), run on the recommendation's
  smallest cluster and on layouts with exposed communication, against ``estimate`` (refused
  while the learner's function runs).
- :func:`check_formula_error`: the learner's relative-error function for the general formula's
  peak, run on every run of the calibration (recorded errors taken out) and on made-up peaks.
- :func:`check_state_bytes`: the learner's model-state formula, run against
  ``model_state_bytes`` for conventions, ZeRO stages and GPU counts the learner does not choose.
- :func:`check_implied_mfu`: the learner's implied-MFU formula, run on the published runs of
  ``gpututor.plan.published`` and one more, against the package's formulas.
"""
from __future__ import annotations

import dataclasses
import math
import random
from typing import Callable

from ... import catalog, formulas
from ...i18n import say, tr
from ...plan import published as published_runs
from ...plan import time as plan_time
from ...plan.memory import CONVENTIONS, model_state_bytes, per_device_memory
from ...plan.recommend import USABLE_FRACTION, estimate, recommend
from ..common.code_exercise import call_refusing, number_from
from ..common.exercises import within


# (ZeRO stage, GPUs): every stage, on counts the lesson prints and on ones it does not
BYTES_PER_PARAM_CASES = ((0, 8), (1, 8), (2, 8), (3, 8), (2, 6), (3, 6), (1, 64), (2, 12))
BYTES_PER_PARAM_TOLERANCE = 1e-9


def check_bytes_per_param(candidate: Callable) -> None:
    """Run ``candidate(zero_stage, dp)``, the bytes of model state one GPU keeps per parameter of
    the model (mixed-precision Adam in the ZeRO paper's convention), on
    :data:`BYTES_PER_PARAM_CASES` against ``model_state_bytes`` of one parameter, within a
    relative :data:`BYTES_PER_PARAM_TOLERANCE`; the planner's formulas refuse while it runs.
    Says which case is wrong, not what the answer is."""
    if candidate is ...:
        say("bytes per parameter: not answered yet. Define your function and pass it in.")
        return
    for stage, dp in BYTES_PER_PARAM_CASES:
        expected = model_state_bytes(1, "bf16", "adam", zero_stage=stage, dp=dp)["total"]
        got = call_refusing(candidate, (stage, dp), refused=(model_state_bytes, per_device_memory),
                            called=tr("bytes per parameter: your function called the planner's "
                                      "model_state_bytes: write the arithmetic yourself."),
                            failed=tr("bytes per parameter [ZeRO-{stage} on {dp} GPUs]: your "
                                      "function raised {error}"), stage=stage, dp=dp)
        number = number_from(got, tr("bytes per parameter [ZeRO-{stage} on {dp} GPUs]: your "
                                     "function returned {got}, not a number.", stage=stage, dp=dp,
                                     got=repr(got)))
        if not within(number, expected, BYTES_PER_PARAM_TOLERANCE):
            raise AssertionError(tr("bytes per parameter [ZeRO-{stage} on {dp} GPUs]: yours is "
                                    "not the formula's. Which of weights, gradients and optimizer "
                                    "state does this stage divide over the GPUs?",
                                    stage=stage, dp=dp))
    say("Correct: your bytes per parameter equal the planner's for ZeRO stages 0 to 3, in "
             "{cases} cases.", cases=len(BYTES_PER_PARAM_CASES))


# ---- exercise 2 (code): the fewest GPUs that hold a model's states -----------------------------

def smallest_count(n_params: float, gpu: str, zero_stage: int = 3,
                   usable_fraction: float = USABLE_FRACTION, most: int = 1_000_000) -> int | None:
    """The fewest GPUs of type ``gpu`` whose usable memory holds ``n_params``' model states
    (mixed-precision Adam) with ``zero_stage`` over them (activations left out), searched on
    ``model_state_bytes``, which falls as GPUs are added; None if ``most`` do not."""
    usable = usable_fraction * catalog.get_gpu(gpu).memory_bytes

    def fits(n: int) -> bool:
        return model_state_bytes(n_params, "bf16", "adam", zero_stage=zero_stage,
                                 dp=n)["total"] <= usable
    if not fits(most):
        return None
    low, high = 0, most   # low does not fit (0 GPUs hold nothing), high does
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if middle and fits(middle) else (middle, high)
    return high


# (parameters, ZeRO stage, GPU): exercise 2's question first, then every stage, counts that need
# the reserve, the stage's whole states, a ceiling, and models no count holds
COUNT_CASES = ((70e9, 3, "H200-141GB"), (1.3e9, 0, "V100-32GB"), (7e9, 0, "A100-80GB"),
               (7e9, 1, "A100-40GB"), (13e9, 2, "H100-80GB"), (70e9, 2, "H100-80GB"),
               (175e9, 3, "A100-80GB"), (30e9, 1, "L40S-48GB"))


def drawn_count_cases(count: int = 3, rng: random.Random | None = None) -> list[tuple]:
    """``count`` cases drawn afresh at each check (a table of answers to :data:`COUNT_CASES`
    does not cover them): models from 0.5B to 200B parameters, every stage, the catalogue's GPUs;
    none whose count falls within 10^-6 of a whole number (where float rounding could decide)."""
    rng = rng or random.Random()
    cases = []
    while len(cases) < count:
        n_params, stage = round(rng.uniform(0.5, 200), 1) * 1e9, rng.randint(0, 3)
        gpu = rng.choice(sorted(catalog.GPUS))
        usable = USABLE_FRACTION * catalog.get_gpu(gpu).memory_bytes
        kept = model_state_bytes(n_params, zero_stage=stage, dp=10**9)["total"]
        ratio = (16 * n_params - kept) / (usable - kept) if usable > kept else None
        if ratio is None or abs(ratio - round(ratio)) > 1e-6:
            cases.append((n_params, stage, gpu))
    return cases


def check_smallest_count(candidate: Callable, model, gpu: str = "H200-141GB",
                         zero_stage: int = 3) -> None:
    """Run ``candidate(n_params, zero_stage, memory_gb)``, the fewest GPUs of ``memory_gb`` GB
    (90 % usable, the planner's share) that hold the model states with that ZeRO stage (None
    where no count does), on :data:`COUNT_CASES` and :func:`drawn_count_cases` against
    :func:`smallest_count`, exactly; the planner's memory formulas refuse while it runs. Then
    says what it gives for ``model`` on ``gpu`` with ZeRO-``zero_stage``."""
    if candidate is ...:
        say("fewest GPUs for the states: not answered yet. Define your function and pass it in.")
        return
    if not callable(candidate):
        raise AssertionError(tr("fewest GPUs for the states: pass your function "
                                "my_smallest_count itself, not {got!r}.", got=candidate))
    refused = (model_state_bytes, per_device_memory, smallest_count, estimate, recommend)
    cases = list(COUNT_CASES) + drawn_count_cases()
    answers = {}
    for n_params, stage, name in cases + [(model.n_params, zero_stage, gpu)]:
        memory_gb = catalog.get_gpu(name).memory_bytes / 1e9
        case = tr("{b:g}B parameters, ZeRO-{stage}, {gb:g} GB GPUs", b=n_params / 1e9, stage=stage,
                  gb=memory_gb)
        got = call_refusing(candidate, (n_params, stage, memory_gb), refused=refused,
                            called=tr("fewest GPUs for the states: your function called the "
                                      "planner's memory formulas: write the arithmetic "
                                      "yourself."),
                            failed=tr("fewest GPUs for the states [{case}]: your function "
                                      "raised {error}"), case=case)
        answers[n_params, stage, name] = got
        expected = smallest_count(n_params, name, stage)
        if expected is None or got is None:
            if got is not expected:
                raise AssertionError(tr(
                    "fewest GPUs for the states [{case}]: yours is {got!r}. Which states stay "
                    "whole on every GPU at this stage, and do they fit in the usable memory?",
                    case=case, got=got))
            continue
        number = number_from(got, tr("fewest GPUs for the states [{case}]: your function "
                                     "returned {got!r}, not a number of GPUs (or None).",
                                     case=case, got=got))
        if number != expected:
            how = tr("too many") if number > expected else tr("too few")
            raise AssertionError(tr(
                "fewest GPUs for the states [{case}]: yours are {how}. How much of each GPU is "
                "usable, what does the stage divide over the GPUs, and which way does a count "
                "that is not a whole number round?", case=case, how=how))
    say("Correct: your counts are the planner's in {cases} cases (every stage, the catalogue's "
        "GPUs, {drawn} drawn at this check). For the {model} model on {gpu} with ZeRO-{stage}, your "
        "function gives {count}.", cases=len(cases), drawn=len(cases) - len(COUNT_CASES),
        model=model.name, gpu=gpu, stage=zero_stage,
        count=answers[model.n_params, zero_stage, gpu])


# layouts of the 7B on 64 GPUs whose step is not all compute: (config, overlap, hfu). ZeRO-3 with
# half of backward hiding the sync leaves some exposed at 40 %, none at 30 %; tensor and pipeline
# parallel add communication and a bubble; scaling the whole step by 0.40 / hfu is wrong for both
DAYS_LAYOUTS = ((dict(count=64, zero_stage=3), 0.5, 0.30),
                (dict(count=64, zero_stage=1, tp=2, pp=2, recompute="selective"), 0.25, 0.50))
DAYS_TOLERANCE = 1e-6


def check_days_at_hfu(candidate: Callable, recommendation, model, tokens: float = 140e9,
                      hfu: float = 0.30) -> None:
    """Run ``candidate(est, hfu)``, the days the estimate ``est`` would take if its GPUs reached
    ``hfu`` of their peak on all the FLOPs a step runs (recomputation included: HFU) instead of
    the share it assumed, on the ``recommendation``'s smallest cluster (at ``hfu``) and on
    :data:`DAYS_LAYOUTS` of ``model`` (on the smallest cluster's GPU type), against ``estimate``
    at that HFU within a relative :data:`DAYS_TOLERANCE`; ``estimate`` and the step-time model
    refuse while it runs. Says which case is wrong, not what the answer is."""
    if candidate is ...:
        say("days at another HFU: not answered yet. Define your function and pass it in.")
        return
    smallest = recommendation.smallest
    if smallest is None:
        raise AssertionError(tr("days at another HFU: this recommendation has no cluster that "
                                "meets its deadline and budget."))
    cases = [(smallest, hfu)]
    for layout, overlap, at in DAYS_LAYOUTS:
        config = dataclasses.replace(smallest.config, **layout)
        cases.append((estimate(model, tokens, config, overlap=overlap), at))
    for est, at in cases:
        config, overlap = est.config, est.assumptions["overlap"]
        expected = estimate(model, tokens, config, hfu=at, overlap=overlap).days
        case = tr("{label}, overlap {overlap:g}, HFU {hfu:.0%}", label=config.shown,
                  overlap=overlap, hfu=at)
        got = call_refusing(candidate, (est, at),
                            refused=(estimate, plan_time.step_time, recommend),
                            called=tr("days at another HFU: your function called the planner's "
                                      "estimate: work from the step's parts yourself."),
                            failed=tr("days at another HFU [{case}]: your function raised "
                                      "{error}"), case=case)
        number = number_from(got, tr("days at another HFU [{case}]: your function returned "
                                     "{got}, not a number of days.", case=case, got=repr(got)))
        if not within(number, expected, DAYS_TOLERANCE):
            raise AssertionError(tr("days at another HFU [{case}]: yours are not the planner's. "
                                    "Which parts of the step grow when the GPUs compute more "
                                    "slowly, and what does a longer backward hide?", case=case))
    say("Correct: your days equal the planner's for {cases} layouts, the smallest cluster "
             "among them.", cases=len(cases))


# made-up peaks the checker adds to the calibration's rows: the formula above and below the
# measurement, so that a sign turned round or a division by the prediction is found out
MADE_UP_PEAKS = ({"measured_peak": 41.3e6, "formula_peak": 52.9e6},
                 {"measured_peak": 75.7e6, "formula_peak": 60.1e6})
FORMULA_ERROR_TOLERANCE = 1e-6


def check_formula_error(candidate: Callable, calibration) -> None:
    """Run ``candidate(row)`` on every run ``calibration`` measured and on :data:`MADE_UP_PEAKS`;
    ``row`` holds only ``measured_peak`` and ``formula_peak`` (the recorded errors are taken out),
    and the answer is ``(formula - measured) / measured`` within a relative
    :data:`FORMULA_ERROR_TOLERANCE`. Says which run is wrong, not what the answer is."""
    if candidate is ...:
        say("formula error: not answered yet. Define your function and pass it in.")
        return
    measured = [r for r in calibration.rows
                if r.get("measured_peak") is not None and r.get("formula_peak") is not None]
    if not measured:
        raise AssertionError(tr("relative error of the formula's peak: this notebook has not "
                                "measured it yet. Run section 1 first."))
    cases = [(r.get("run", r.get("strategy", "?")), r["measured_peak"], r["formula_peak"])
             for r in measured]
    cases += [(tr("made-up peaks {n}", n=i + 1), r["measured_peak"], r["formula_peak"])
              for i, r in enumerate(MADE_UP_PEAKS)]
    for name, measured_peak, formula_peak in cases:
        row = {"measured_peak": measured_peak, "formula_peak": formula_peak}
        got = call_refusing(candidate, (row,), failed=tr("formula error [{case}]: your function "
                                                         "raised {error}"), case=name)
        number = number_from(got, tr("formula error [{case}]: your function returned {got}, not "
                                     "a number.", case=name, got=repr(got)))
        expected = (formula_peak - measured_peak) / measured_peak
        if not within(number, expected, FORMULA_ERROR_TOLERANCE):
            raise AssertionError(tr("formula error [{case}]: yours is not (formula - measured) / "
                                    "measured. Which peak is the reference, and which sign means "
                                    "the formula predicted too little?", case=name))
    say("Correct: your formula error equals (formula - measured) / measured for {runs} "
             "measured runs and {made_up} made-up ones.", runs=len(measured),
             made_up=len(MADE_UP_PEAKS))


# ---- exercise 5: the model states of a ZeRO stage, as code -------------------------------------

# (parameters, convention, stage, GPUs): every stage, with conventions whose three parts differ,
# so that a formula right for one convention or one stage only is found out
STATE_CASES = ((7.5e9, "mixed-adam", 0, 64), (7.5e9, "mixed-adam", 1, 64),
               (7.5e9, "mixed-adam", 2, 64), (7.5e9, "mixed-adam", 3, 64),
               (1.3e9, "fp32-adamw", 1, 6), (1.3e9, "mixed-adam-fp32-grads", 2, 6),
               (1.3e9, "mixed-sgd", 3, 6), (70e9, "mixed-adam-fp32-grads", 3, 512),
               (70e9, "fp32-sgd", 2, 12))


def check_state_bytes(candidate: Callable) -> None:
    """Run ``candidate(n_params, per_param, zero_stage, dp)`` (``per_param`` has ``.params``,
    ``.grads`` and ``.optimizer`` bytes) against ``model_state_bytes(...)["total"]`` on
    :data:`STATE_CASES`; the package's formula refuses while it runs. Says which case is wrong,
    not what the answer is."""
    if candidate is ...:
        say("model-state bytes: not answered yet. Define your function and pass it in.")
        return
    for n_params, name, stage, dp in STATE_CASES:
        per_param = CONVENTIONS[name]
        expected = model_state_bytes(n_params, zero_stage=stage, dp=dp, convention=name)["total"]
        got = call_refusing(candidate, (n_params, per_param, stage, dp),
                            refused=(model_state_bytes, per_device_memory),
                            called=tr("model-state bytes: your function called the planner's "
                                      "model_state_bytes: write the formula yourself."))
        case = tr("ZeRO stage {stage} on {dp} GPUs, {n:g} parameters, {p:g}+{g:g}+{o:g} bytes per "
                  "parameter ({name})", stage=stage, dp=dp, n=n_params, p=per_param.params,
                  g=per_param.grads, o=per_param.optimizer, name=name)
        number = number_from(got, tr("model-state bytes [{case}]: your function returned {got}, "
                                     "not a number of bytes.", case=case, got=repr(got)))
        if not math.isclose(number, expected, rel_tol=1e-6):
            raise AssertionError(tr("model-state bytes [{case}]: your bytes per GPU are not the "
                                    "formula's. Which of weights, gradients and optimizer state "
                                    "does stage {stage} divide over the GPUs?",
                                    case=case, stage=stage))
    say("Correct: your bytes per GPU equal the planner's model_state_bytes for ZeRO stages "
             "0 to 3, in {cases} cases with {conventions} conventions.", cases=len(STATE_CASES),
             conventions=len({name for _, name, _, _ in STATE_CASES}))


# ---- exercise 6: the MFU a published run implies, as code --------------------------------------

def mfu_cases() -> list[tuple]:
    """(n_params, n_layer, seq_len, d_model, tokens, gpu_seconds, peak_flops, name): every run of
    ``plan.published.RUNS`` (a throughput as one GPU-hour at its rate) and one made up here."""
    cases = []
    for run in published_runs.RUNS:
        m, peak = run.model, catalog.get_gpu(run.gpu).peak("bf16")
        if run.measure == "GPU-hours":
            tokens, seconds = run.tokens, run.published * published_runs.HOUR
        else:
            tokens, seconds = run.published * published_runs.HOUR, published_runs.HOUR
        cases.append((m.n_params, m.n_layer, m.seq_len, m.d_model, tokens, seconds, peak, run.name))
    cases.append((1.3e9, 24, 2048, 2048, 26e9, 5.0e5, catalog.get_gpu("V100-32GB").peak("fp16"),
                  "1.3B on V100s"))
    return cases


def check_implied_mfu(candidate: Callable) -> None:
    """Run ``candidate(n_params, n_layer, seq_len, d_model, tokens, gpu_seconds, peak_flops)``
    on :func:`mfu_cases` against the model's FLOPs (causal attention) over GPU-seconds x peak;
    the package's FLOPs formulas refuse while it runs. A percentage passes as well as a
    fraction. Says which case is wrong, not what the answer is."""
    if candidate is ...:
        say("implied MFU: not answered yet. Define your function and pass it in.")
        return
    cases = mfu_cases()
    for n, layers, seq, width, tokens, seconds, peak, name in cases:
        expected = formulas.flops_utilization(
            formulas.training_flops_per_token(n, layers, seq, width, causal=True) * tokens,
            seconds, peak)
        got = call_refusing(candidate, (n, layers, seq, width, tokens, seconds, peak),
                            refused=(formulas.training_flops_per_token,
                                     formulas.attention_flops_per_token,
                                     formulas.flops_utilization,
                                     plan_time.training_flops_per_token,
                                     published_runs.implied_mfu),
                            called=tr("implied MFU: your function called the package's FLOPs "
                                      "formula: write it yourself."))
        number = number_from(got, tr("implied MFU [{case}]: your function returned {got}, not a "
                                     "number.", case=name, got=repr(got)))
        if math.isclose(number, 100 * expected, rel_tol=1e-6):
            number /= 100   # given as a percentage
        if not math.isclose(number, expected, rel_tol=1e-6):
            raise AssertionError(tr("implied MFU [{case}]: yours is not the formula's. Are the "
                                    "FLOPs the model's (no recomputation), with attention counted "
                                    "causal, and the time in GPU-seconds?", case=name))
    say("Correct: your implied MFU equals the package's for {cases} runs, the published "
             "ones of section 5 among them.", cases=len(cases))
