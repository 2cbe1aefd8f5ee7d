"""Lesson 05: where a pipeline's measured bubble parts from the theory, read from the run's own
timelines, and what posting the sends without waiting changed.

The theory, (p-1)/(m+p-1) (GPipe, Huang et al. 2019 [ref: huang2019-bubble]; 1F1B, Narayanan
et al. 2021, §2.2.1 [ref: narayanan2021-1f1b]) or
(p-1)/(v·m+p-1) interleaved, assumes equal stages and free hand-offs. Replaying each rank's
measured events with their measured durations but free hand-offs
(:func:`~gpututor.parallel.pipeline.timeline.free_handoff_bubble`) splits what was measured:

    measured = theory + (free - theory: unequal and uneven compute) + (measured - free: hand-offs)
"""
from __future__ import annotations

import statistics

from ...formulas import theoretical_bubble_fraction
from ...i18n import tr
from ...parallel.mesh import degree_of
from ...parallel.pipeline.stages import microbatches, virtual_stages
from ...parallel.pipeline.timeline import free_handoff_bubble, step_events, step_stages
from ...parallel.pipeline.torch_pipelining import SPLIT_BACKWARD
from ...runtime.summary import steady_steps


def bubble_parts(run) -> dict:
    """A finished pipeline run's bubble in parts, each the mean over its steady steps:
    ``measured`` (the ranks' own figure), ``free`` (the same steps replayed with free
    hand-offs), ``theory`` (None for the zero-bubble schedules, whose idle time depends on how
    long each kind of pass takes), ``handoff`` = measured - free and ``compute`` = free - theory
    (None without a theory); ``spread``, how far its steady steps' measured bubbles lie apart.
    One pipeline per run (no data-parallel copies)."""
    spec, records = run.spec, run.records
    measured, free = [], []
    for step in steady_steps(spec, records):
        replayed = free_handoff_bubble(step_events(records, step),
                                       step_stages(records, step) or None)
        ranks = [r["bubble_fraction"] for r in records if r["step"] == step]
        if replayed is not None and None not in ranks:
            measured.append(statistics.fmean(ranks))
            free.append(replayed)
    if not measured:
        raise ValueError(f"run of {spec.strategy} with steps={spec.steps} has no steady step "
                         "with a timeline: run more steps")
    theory = None if spec.option("schedule") in SPLIT_BACKWARD else theoretical_bubble_fraction(
        degree_of(spec, "pp")[0], microbatches(spec), virtual_stages(spec))
    parts = {"measured": statistics.fmean(measured), "free": statistics.fmean(free),
             "theory": theory, "steps": len(measured),
             "spread": max(measured) - min(measured)}   # step to step, this run: its noise
    parts["handoff"] = parts["measured"] - parts["free"]
    parts["compute"] = None if theory is None else parts["free"] - theory
    return parts


def parts_sentence(name: str, parts: dict) -> str:
    """One line: the measured bubble as theory + compute + hand-offs, and which added more."""
    if parts["theory"] is None:
        return tr("{name}: measured {measured:.3f} = {free:.3f} with free hand-offs "
                  "{handoff:+.3f} from handing over", name=name, **parts)
    template = ("{name}: measured {measured:.3f} = theory {theory:.3f} {compute:+.3f} "
                "(unequal and uneven compute) {handoff:+.3f} (handing over): handing over "
                "added more" if parts["handoff"] >= parts["compute"] else
                "{name}: measured {measured:.3f} = theory {theory:.3f} {compute:+.3f} "
                "(unequal and uneven compute) {handoff:+.3f} (handing over): the unequal "
                "and uneven compute added more")
    return tr(template, name=name, **parts)


def sends_sentence(waited: float, posted: float, torchs: float, noise: float = 0.0) -> str:
    """Whether posting the sends without waiting closed the gap from the from-scratch bubble
    (sends waited) to torch's, for the same schedule: fully, partly, or not. ``noise``: the
    step-to-step spread of the runs compared; a difference within it is not told apart."""
    values = dict(waited=waited, posted=posted, torchs=torchs, noise=noise)
    if waited <= torchs:
        return tr("from scratch with sends waited {waited:.3f}, pp-torch {torchs:.3f}: no gap "
                  "to close in this run (sends posted: {posted:.3f})", **values)
    if waited - torchs <= noise:
        return tr("from scratch with sends waited {waited:.3f}, pp-torch {torchs:.3f}: a gap "
                  "within the step-to-step spread of these runs ({noise:.3f}), so none to close "
                  "(sends posted: {posted:.3f})", **values)
    if abs(posted - waited) <= noise:
        return tr("from scratch {waited:.3f} with sends waited, {posted:.3f} with sends posted, "
                  "pp-torch {torchs:.3f}: posting the sends changed the bubble by less than the "
                  "step-to-step spread of these runs ({noise:.3f}), no measurable effect",
                  **values)
    if posted <= torchs:
        return tr("from scratch {waited:.3f} with sends waited, {posted:.3f} with sends "
                  "posted, pp-torch {torchs:.3f}: posting the sends closed the gap", **values)
    if posted < waited:
        return tr("from scratch {waited:.3f} with sends waited, {posted:.3f} with sends "
                  "posted, pp-torch {torchs:.3f}: posting the sends closed {share:.0%} of the "
                  "gap; the rest is elsewhere", share=(waited - posted) / (waited - torchs),
                  **values)
    return tr("from scratch {waited:.3f} with sends waited, {posted:.3f} with sends posted, "
              "pp-torch {torchs:.3f}: posting the sends did not close the gap", **values)


def handoff_words(device: str) -> str:
    """What one hand-off is in a run on ``device`` (a summary's ``"device"``, e.g. "cuda:0" or
    "cpu"): words chosen from the device, not assumed."""
    import torch
    if torch.device(device).type == "cuda":
        return tr("In these runs each hand-off is an NCCL message between two GPUs; the ranks' "
                  "host processes also wait for them (the pipeline synchronizes the device "
                  "around each exchange to time it).")
    return tr("In these runs each hand-off is a gloo message between two processes on this "
              "machine's CPU, and a send completes only once the neighbour has posted its "
              "receive; on a busy machine a waiting rank may also wait for a core to run on.")


def posting_words(device: str) -> str:
    """What ``sends="post"`` can change in a run on ``device``: with gloo,
    ``batch_isend_irecv`` returns a handle per message and the sends' are kept; NCCL coalesces
    the batch into one handle (``PointToPoint.exchange``), so the stage waits for all of it."""
    import torch
    if torch.device(device).type == "cuda":
        return tr("On these GPUs (NCCL) batch_isend_irecv returns one handle for the whole "
                  "exchange, so a stage cannot wait for its receives without its sends: "
                  "sends=\"post\" waits for everything as before, and the posted run can differ "
                  "from the waited one only by run-to-run noise.")
    return tr("Here (gloo) batch_isend_irecv returns one handle per message: with "
              "sends=\"post\" a stage waits for its receives and keeps its sends' handles until "
              "the end of the step.")
