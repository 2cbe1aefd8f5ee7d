"""Lesson 13's runs: every lever that cuts communication, on one emulated link, for the same
model, seed and number of tokens, measured side by side; and what each run is reduced to for the
trade-off figure (bytes each rank sent per token, held-out loss at the end, seconds per thousand
tokens on the link).

The runs differ from plain DDP only where the lever says (``lever_specs``): the same global batch
and steps, except accumulation, which takes twice the batch per step for half the steps (the same
tokens, half the all-reduces and half the optimizer steps). Each saves its final weights; their
held-out loss is measured here, in one process, on the same held-out batches for every run.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from ...compression.measure import eval_loss, validation_batches
from ...config import RunSpec
from ...i18n import say, tr
from ...models import build_model
from ...parallel.data_parallel.ddp import POWERSGD_START_ITER
from ...runtime.launcher import launch
from ...runtime.summary import steady_steps

# the meetings of local SGD and DiLoCo: every MEET_EVERY optimizer steps (our runs are short:
# see the lesson for the paper's H)
MEET_EVERY = 4
HELD_OUT_BATCHES = 4


@dataclass(frozen=True)
class Lever:
    """One run of the lesson: its name, its spec, and the lever it is compared with."""

    name: str
    spec: RunSpec
    against: str | None   # the name of the run this one changes one thing of (None: the base)
    other_link: bool = False   # on another link than the others: left out of the time ranking


def lever_specs(base: RunSpec, slow, fast) -> list[Lever]:
    """The lesson's runs: ``base`` (a DDP spec) on the emulated link ``slow`` with each lever,
    and plain DDP on ``fast`` (``EmulatedLink`` objects: ``parallel/link.py``). The two
    overlap runs record a timeline."""
    ddp = base.replace(strategy="ddp")
    on = lambda spec, link=slow, **options: spec.replace(
        options=tuple(options.items()) + link.options())
    bucketed = ddp.replace(strategy="dp-bucketed", timeline=True)
    plain = "DDP"
    return [
        Lever(plain, on(ddp), None),
        Lever("DDP, fast link", on(ddp, fast), plain, other_link=True),
        Lever("small buckets, overlap", on(bucketed, bucket_cap_mb=0.25, overlap=True), plain),
        Lever("small buckets, no overlap", on(bucketed, bucket_cap_mb=0.25, overlap=False),
              "small buckets, overlap"),
        Lever("one bucket, overlap", on(bucketed.replace(timeline=False), bucket_cap_mb=25,
                                        overlap=True), "small buckets, overlap"),
        Lever("accumulation x2", on(ddp.replace(batch_size=2 * ddp.batch_size, grad_accum=2,
                                                steps=ddp.steps // 2)), plain),
        Lever("bf16 gradients", on(ddp, comm_hook="bf16"), plain),
        Lever("PowerSGD, matrix rank 1", on(ddp, comm_hook="powersgd", powersgd_rank=1), plain),
        Lever("PowerSGD, matrix rank 4", on(ddp, comm_hook="powersgd", powersgd_rank=4), plain),
        Lever(f"local SGD, H={MEET_EVERY}", on(ddp.replace(strategy="local-sgd"),
                                               sync_every=MEET_EVERY), plain),
        Lever(f"DiLoCo, H={MEET_EVERY}", on(ddp.replace(strategy="diloco"),
                                            sync_every=MEET_EVERY), plain),
    ]


def run_levers(levers: list[Lever], workdir: str | Path | None = None) -> dict[str, dict]:
    """Run each lever in turn (a line of progress each) and measure it: name -> the run's
    ``summary``, ``records`` and :func:`lever_measures`."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="gpututor-13-"))
    held_out = None
    results = {}
    for i, lever in enumerate(levers, 1):
        say("run {i} of {n}: {name} ...", i=i, n=len(levers), name=tr(lever.name))
        spec = lever.spec.replace(save_state=str(workdir / f"lever{i}.pt"))
        run = launch(spec)
        summary = run.wait()
        if held_out is None:   # the same held-out text for every run
            held_out = validation_batches(spec, HELD_OUT_BATCHES)
        results[lever.name] = {"lever": lever, "summary": summary, "records": run.records,
                               **lever_measures(spec, run.records, held_out)}
    return results


def lever_measures(spec: RunSpec, records: list[dict], held_out: list) -> dict:
    """What the trade-off figure plots for one run: ``tokens`` trained (all ranks), ``sent_per
    _token`` (bytes rank 0 sent over the run, by the meter's ring count, per token; None where
    not measured), ``ms_per_k_tokens`` (rank 0's mean step time over the run's steady steps,
    ``runtime.summary.steady_steps``: after the warm-up, never a step slowed by counting FLOPs
    or probing memory; in milliseconds per thousand of their tokens; the mean, not the median,
    so that local SGD's and DiLoCo's meetings count), ``timed_steps`` (those steps), and
    ``held_out_loss`` of the saved final weights. A PowerSGD run also gets ``compressed_sent
    _per_token``: its bytes per token over the steps after its uncompressed warm-up."""
    mine = sorted((r for r in records if r["rank"] == 0 and r.get("loss") is not None),
                  key=lambda r: r["step"])
    per_step = spec.batch_size * spec.seq_len
    tokens = per_step * len(mine)
    sent = [r.get("comm_wire_bytes") for r in mine]
    steady = set(steady_steps(spec, records))
    later = [r["step_time_s"] for r in mine if r["step"] in steady]
    warm_up = POWERSGD_START_ITER if spec.option("comm_hook", "none") == "powersgd" else None
    compressed = [r.get("comm_wire_bytes") for r in mine[warm_up or 0:]]
    model = build_model(spec)
    model.load_state_dict(torch.load(spec.save_state))
    return {"tokens": tokens, "steps": len(mine),
            "timed_steps": sorted(steady), "warm_up_steps": warm_up,
            "compressed_sent_per_token": None if warm_up is None or None in compressed
            or not compressed else sum(compressed) / (per_step * len(compressed)),
            "sent_per_token": None if None in sent else sum(sent) / tokens,
            "ms_per_k_tokens": sum(later) * 1e3 / (per_step * len(later)) * 1e3 if later
            else None,
            "held_out_loss": eval_loss(model, held_out)}
