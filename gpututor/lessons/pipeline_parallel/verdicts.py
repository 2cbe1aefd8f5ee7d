"""Lesson 05's results as a learner reads them: the rows of its tables, and one verdict per result,
its words chosen from the runs' numbers.

Each ``*_verdict`` returns ``(headline, details, tone)`` for :func:`gpututor.i18n.show_verdict`:
one sentence true for the numbers given (on any machine), the figures behind it as details, and
"good", "bad" or "mixed" (a fact the lesson neither hopes for nor fears).
"""
from __future__ import annotations

from typing import Optional

from ...formulas import theoretical_bubble_fraction
from ...i18n import not_measured, ntr, tr
from .bubble import sends_sentence
from .handoffs import span_time

# two bubble fractions closer than this read as "the same" where no run's own spread is known
BUBBLE_BAND = 0.01
# two step times within this share of each other read as "about as fast"
TIME_BAND = 0.10


def _mb(value: Optional[float]) -> str:
    return not_measured(value, ".1f", 1e6)


def stage_row(index: int, stage, n_params: int) -> list[str]:
    """Stage ``index`` (a ``GPTStage``): its number, what it holds, its parameters."""
    holds = ([tr("embeddings")] if stage.is_first else []) + \
        [tr("blocks {blocks}", blocks=", ".join(stage.blocks))] + \
        ([tr("final norm, head")] if stage.is_last else [])
    return [str(index), "; ".join(holds), f"{n_params:,}"]


# ---- section 3: every schedule trains like one process --------------------------------------------

def _loss_gap(summary: dict, reference: dict) -> float:
    """The largest difference between two runs' per-step losses, relative to the reference's."""
    return max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(summary["losses"], reference["losses"]))


def training_rows(summaries: dict, weight_gap: dict) -> list[list[str]]:
    """Per run (name -> summary, the first one process): final loss, the largest relative loss
    difference and the largest weight difference to the first run, and the step time."""
    reference = next(iter(summaries.values()))
    return [[tr(name), f"{s['final_loss']:.5f}", f"{_loss_gap(s, reference):.1e}",
             f"{weight_gap[name]:.1e}",
             tr("not measured") if s.get("step_time_s") is None else f"{s['step_time_s'] * 1e3:.0f}"]
            for name, s in summaries.items()]


def training_verdict(summaries: dict, weight_gap: dict, tol: float = 1e-5) -> tuple[str, str, str]:
    """Whether every run gave the first run's (one process's) losses within ``tol`` (relative and
    absolute, as ``torch.testing.assert_close`` with ``rtol=atol=tol``), and how far apart the
    final weights ended."""
    reference = next(iter(summaries.values()))
    runs = list(summaries)[1:]
    differ = [tr(n) for n in runs
              if any(abs(a - b) > tol + tol * abs(b)
                     for a, b in zip(summaries[n]["losses"], reference["losses"]))]
    values = dict(n=len(runs), tol=tol, worst=max(weight_gap[n] for n in runs),
                  differ=", ".join(differ))
    if differ:
        return tr("{differ}: losses differ from one process's by more than {tol:g}", **values), \
            "", "bad"
    return tr("All {n} pipeline runs gave one process's losses (within {tol:g}), and final weights "
              "that differ from its by at most {worst:.1e}", **values), "", "good"


# ---- section 5: the bubble against the number of micro-batches --------------------------------------

def sweep_verdict(measured: dict[int, float], stages: int) -> tuple[str, str, str]:
    """Whether the measured bubble shrank as m grew (as the theory's does), was smallest at some
    m below the largest and grew again, or did not shrink at all (within :data:`BUBBLE_BAND`)."""
    ms = sorted(measured)
    first, last = measured[ms[0]], measured[ms[-1]]
    best = min(ms, key=lambda m: measured[m])
    values = dict(m0=ms[0], m1=ms[-1], first=first, last=last, best=best, low=measured[best],
                  t0=theoretical_bubble_fraction(stages, ms[0]),
                  t1=theoretical_bubble_fraction(stages, ms[-1]))
    if last >= first - BUBBLE_BAND:
        return tr("The measured bubble did not shrink with more micro-batches: {first:.2f} at "
                  "m={m0}, {last:.2f} at m={m1} (theory: {t0:.2f} to {t1:.2f})", **values), "", "bad"
    if all(measured[b] <= measured[a] + BUBBLE_BAND for a, b in zip(ms, ms[1:])):
        return tr("The measured bubble shrank as m grew, from {first:.2f} at m={m0} to {last:.2f} "
                  "at m={m1} (theory: {t0:.2f} to {t1:.2f})", **values), "", "good"
    if best != ms[-1] and last > measured[best] + BUBBLE_BAND:
        return tr("The measured bubble fell from {first:.2f} at m={m0} to {low:.2f} at m={best}, "
                  "then rose to {last:.2f} at m={m1}, where the theory says {t1:.2f}", **values), \
            "", "mixed"
    return tr("The measured bubble fell from {first:.2f} at m={m0} to {last:.2f} at m={m1} (theory: "
              "{t0:.2f} to {t1:.2f}), but not with every added micro-batch", **values), "", "mixed"


def handoff_verdict(forward_s: float, handoff: Optional[float], words: str) -> tuple[str, str, str]:
    """One micro-batch's forward on stage 0 against the shortest hand-off to stage 1 (``handoff_s``;
    None where no micro-batch was handed over): small beside it (under 10 %) or not. ``words``:
    what a hand-off is in these runs (:func:`~.bubble.handoff_words`), as details."""
    if handoff is None:
        return tr("On stage 0 a micro-batch's forward took {forward:.1f} ms; no hand-off was "
                  "timed", forward=forward_s * 1e3), words, "mixed"
    values = dict(forward=forward_s * 1e3, handoff=span_time(handoff), share=handoff / forward_s)
    if handoff < 0.1 * forward_s:
        return tr("On stage 0 a micro-batch's forward took {forward:.1f} ms and the shortest "
                  "hand-off to stage 1 {handoff}: small beside a forward ({share:.0%})",
                  **values), words, "mixed"
    return tr("On stage 0 a micro-batch's forward took {forward:.1f} ms and even the shortest "
              "hand-off to stage 1 {handoff}, {share:.0%} of a forward", **values), words, \
        "mixed"


# ---- section 6: activation memory and the parts of the bubble ----------------------------------------

def activation_rows(gpipe: dict, one_f_one_b: dict) -> list[list[str]]:
    """Per stage: the activations GPipe and 1F1B held (MB) and their ratio."""
    g, f = gpipe["mem_by_category"]["activations"], one_f_one_b["mem_by_category"]["activations"]
    return [[str(s), _mb(a), _mb(b), tr("not measured") if a is None or b is None else f"{b / a:.2f}"]
            for s, (a, b) in enumerate(zip(g, f))]


def activation_verdict(gpipe: dict, one_f_one_b: dict) -> tuple[str, str, str]:
    """Whether 1F1B held less activation memory than GPipe (5 % less or more) on every stage, on
    some, or on none; "not measured" where a run has no figure."""
    g, f = gpipe["mem_by_category"]["activations"], one_f_one_b["mem_by_category"]["activations"]
    if any(v is None for v in g + f):
        return tr("Activation memory was not measured on every stage: nothing to compare"), "", \
            "mixed"
    less = [s for s, (a, b) in enumerate(zip(g, f)) if b < 0.95 * a]
    values = dict(ratios=", ".join(f"{b / a:.2f}" for a, b in zip(g, f)),
                  stages=", ".join(map(str, less)))
    if len(less) == len(g):
        return tr("1F1B held less activation memory than GPipe on every stage: {ratios} of "
                  "GPipe's", **values), "", "good"
    if less:
        return ntr("1F1B held less activation memory than GPipe only on stage {stages} ({ratios} "
                   "of GPipe's)", "1F1B held less activation memory than GPipe only on stages "
                   "{stages} ({ratios} of GPipe's)", len(less), **values), "", "mixed"
    return tr("1F1B held no less activation memory than GPipe on any stage ({ratios} of GPipe's)",
              **values), "", "bad"


def parts_table(split: dict[str, dict]) -> tuple[list[str], list[list[str]]]:
    """``(columns, rows)``: per run (name -> :func:`~.bubble.bubble_parts`) the measured bubble,
    the theory, what unequal and uneven compute added, what handing over added, and the steady
    steps averaged."""
    none = tr("no theory")
    columns = [tr("run"), tr("measured"), tr("theory"), tr("+ unequal compute"),
               tr("+ handing over"), tr("steady steps")]
    return columns, [[tr(name), f"{p['measured']:.3f}",
                      none if p["theory"] is None else f"{p['theory']:.3f}",
                      none if p["compute"] is None else f"{p['compute']:+.3f}",
                      f"{p['handoff']:+.3f}", str(p["steps"])] for name, p in split.items()]


def schedule_rows(parts: dict[str, dict], summaries: dict[str, dict]) -> list[list[str]]:
    """Per run: the theory's bubble, the measured one (:func:`~.bubble.bubble_parts`) and the
    step time."""
    return [[tr(name), tr("no theory") if p["theory"] is None else f"{p['theory']:.3f}",
             f"{p['measured']:.3f}", f"{summaries[name]['step_time_s'] * 1e3:.0f}"]
            for name, p in parts.items()]


def parts_verdict(split: dict[str, dict]) -> tuple[str, str, str]:
    """Which part lifted the measured bubbles above the theory: handing over or unequal compute,
    in every run with a theory, or one in some and the other in the rest."""
    judged = {tr(n): p for n, p in split.items() if p["theory"] is not None}
    handoff = [n for n, p in judged.items() if p["handoff"] >= p["compute"]]
    compute = [n for n in judged if n not in handoff]
    values = dict(handoff=", ".join(handoff), compute=", ".join(compute),
                  added=", ".join(f"{p['handoff']:+.3f}" for p in judged.values()))
    if not judged:
        return tr("These schedules have no theory to split the bubble against"), "", "mixed"
    if not compute:
        return tr("Handing over added more to the bubble than unequal compute in every run "
                  "({added} from handing over)", **values), "", "mixed"
    if not handoff:
        return tr("Unequal and uneven compute added more to the bubble than handing over in every "
                  "run"), "", "mixed"
    return tr("Handing over added more to the bubble in {handoff}; unequal and uneven compute in "
              "{compute}", **values), "", "mixed"


# ---- sections 7 to 9 --------------------------------------------------------------------------------

def implementations_verdict(pairs: dict[str, tuple[dict, dict]]) -> tuple[str, str, str]:
    """Per schedule, pp-torch's step time against the from-scratch one's (``pairs``: schedule ->
    (from scratch, pp-torch) summaries): faster, slower or about as fast (:data:`TIME_BAND`)."""
    pieces = []
    for schedule, (ours, torchs) in pairs.items():
        a, b = ours["step_time_s"], torchs["step_time_s"]
        words = tr("about as fast") if abs(b / a - 1) <= TIME_BAND else \
            tr("faster") if b < a else tr("slower")
        pieces.append(tr("{schedule} {words} ({torch_ms:.0f} against {ours_ms:.0f} ms)",
                         schedule=schedule, words=words, torch_ms=b * 1e3, ours_ms=a * 1e3))
    return tr("pp-torch's step against the from-scratch one's: {pieces}", pieces="; ".join(pieces)), \
        tr("The runs ran one after another, not at the same moment: on a shared machine a few % "
           "between them can be the machine."), "mixed"


def traffic_verdict(pipeline_bytes: float, tp_bytes: float) -> tuple[str, str, str]:
    """What tensor parallel of degree 2 would move per step (forward and backward) against what
    the 2-stage pipeline sends forward and back (activations, then their gradients), on the same
    batch: like for like."""
    ratio = tp_bytes / pipeline_bytes
    if ratio > 1:
        return tr("On this batch, tensor parallel of degree 2 would move {ratio:.0f}× the bytes the "
                  "2-stage pipeline sends forward and back per step", ratio=ratio), "", "mixed"
    return tr("On this batch, tensor parallel of degree 2 would move no more than the 2-stage "
              "pipeline sends forward and back per step ({ratio:.2f}×)", ratio=ratio), "", "mixed"


def interleaved_verdict(plain: dict[str, float], interleaved: dict[str, float], noise: float,
                        stages: int = 2, m: int = 4, v: int = 2) -> tuple[str, str, str]:
    """Whether interleaving (``v`` chunks per rank) shrank each implementation's measured bubble
    against its plain 1F1B (``plain``, ``interleaved``: implementation -> measured bubble), beyond
    ``noise`` (the runs' step-to-step spread), as the theory says it should."""
    change = {k: interleaved[k] - plain[k] for k in plain}
    how = {k: tr("shrank") if c < -noise else tr("grew") if c > noise else tr("within the spread")
           for k, c in change.items()}
    values = dict(t1=theoretical_bubble_fraction(stages, m), noise=noise,
                  t2=theoretical_bubble_fraction(stages, m, virtual_stages=v),
                  pairs="; ".join(f"{tr(k)} {plain[k]:.2f} → {interleaved[k]:.2f}, {how[k]}"
                                  for k in plain))
    if all(c < -noise for c in change.values()):
        return tr("Interleaving shrank the measured bubble, as the theory says ({t1:.2f} → "
                  "{t2:.2f}): {pairs}", **values), "", "good"
    if all(c > noise for c in change.values()):
        return tr("Interleaving grew the measured bubble here, against the theory ({t1:.2f} → "
                  "{t2:.2f}): {pairs}", **values), "", "bad"
    return tr("Interleaving did not shrink the measured bubble in every implementation (theory "
              "{t1:.2f} → {t2:.2f}; the runs' step-to-step spread {noise:.3f}): {pairs}",
              **values), "", "mixed"


def sends_verdict(waited: dict, posted: dict, torchs: dict, words: str) -> tuple[str, str, str]:
    """What posting the sends did to the from-scratch interleaved bubble against torch's
    (:func:`~.bubble.sends_sentence`, each argument a run's :func:`~.bubble.bubble_parts`; their
    largest step-to-step spread is the noise), and ``words`` (:func:`~.bubble.posting_words`) as
    details."""
    noise = max(p["spread"] for p in (waited, posted, torchs))
    a, b, c = waited["measured"], posted["measured"], torchs["measured"]
    sentence = sends_sentence(a, b, c, noise=noise)
    closed = a - c > noise and abs(b - a) > noise and b < a   # the sentence's "closed" branches
    return sentence[:1].upper() + sentence[1:], words, "good" if closed else "mixed"
