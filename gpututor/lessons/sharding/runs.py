"""Lesson 03's measurements beyond the board's runs, and the words chosen from them.

- :func:`how_ranks_talk`: what carries a run's messages, chosen from the run's device (gloo over
  loopback TCP between CPU processes, NCCL between GPUs).
- :class:`DDPBuckets` / :func:`ddp_buckets`: the buckets DDP really makes for the lesson's model,
  read from DDP itself in real ranks, with the arguments the ``ddp`` strategy passes.
- :func:`capped_runs`: which stage first fits a memory capacity, planned (the formula's model
  state plus the activations data parallel measured, and DDP's buckets for ddp) and then run
  under that capacity; :func:`outcome_words` says what each capped run did.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from ...i18n import tr
from ...measure.timing import StepContext
from ...models import build_model
from ...parallel import get_strategy
from ...plan.memory import model_state_bytes
from ...runtime.launcher import RunFailed, launch
from ...formulas import MB

STAGES = ("ddp", "zero1", "zero2", "zero3")   # data parallel, then ZeRO stages 1 to 3


def how_ranks_talk(device: str) -> str:
    """One sentence on what carries a run's messages on ``device`` ("cpu", "cuda", or "cuda:0" as
    a run records it: the device's type decides)."""
    if torch.device(device).type == "cuda":
        return tr("Here each rank drives its own GPU, and NCCL (NVIDIA's collective library) "
                  "carries the bytes from GPU to GPU over whatever links this machine has "
                  "(NVLink or PCIe): these times are one machine's, not a cluster's, whose "
                  "links between machines are slower.")
    return tr("Here the ranks are CPU processes on one machine, and gloo (PyTorch's backend for "
              "CPUs) sends each message over loopback TCP: these times say little about a GPU "
              "cluster, where links and compute are both far faster (lesson 02, section 4).")


# ---- DDP's buckets, read from DDP -------------------------------------------------------------

@dataclass(frozen=True)
class DDPBuckets:
    """In every rank: the lesson's model wrapped by the ``ddp`` strategy (DDP with the
    strategy's own arguments), three forward and backward passes, and after each the bucket
    sizes DDP reports (``_get_ddp_logging_data``: the first iteration's buckets, and the ones it
    rebuilds in the order gradients became ready)."""

    iterations: int = 3

    def __call__(self, spec, rank, world, device, emit):
        model = build_model(spec).to(device)
        ddp = get_strategy("ddp").wrap(model, StepContext(spec, rank, world, device))
        gen = torch.Generator().manual_seed(rank)
        tokens = torch.randint(0, model.cfg.vocab_size, (2, spec.seq_len + 1), generator=gen)
        tokens = tokens.to(device)
        for i in range(self.iterations):
            logits = ddp(tokens[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
            loss.backward()
            data = ddp._get_ddp_logging_data()
            emit({"step": i, "iteration": i,
                  "buckets": _sizes(data.get("bucket_sizes")),
                  "rebuilt": _sizes(data.get("rebuilt_bucket_sizes"))})


def _sizes(text) -> list[int] | None:
    return None if not text else [int(s) for s in str(text).split(",")]


def ddp_buckets(spec) -> dict:
    """DDP's buckets for ``spec``'s model, in bytes: ``first`` (the first iteration's) and
    ``later`` (rebuilt after it, in gradient-ready order: the last bucket holds the gradients
    backward makes last), read on rank 0 of ``spec``'s ranks."""
    records = launch(spec.replace(strategy="ddp"), task=DDPBuckets()).wait()
    mine = sorted((r for r in records if r.get("rank", 0) == 0), key=lambda r: r["iteration"])
    later = next((r["rebuilt"] for r in reversed(mine) if r["rebuilt"]), mine[-1]["buckets"])
    return {"first": mine[0]["buckets"], "later": later}


def bucket_words(buckets: dict) -> str:
    """What DDP's buckets mean for overlap, in words chosen from their sizes."""
    later = buckets["later"]
    total = sum(later)
    sizes = " + ".join(f"{b / MB:.2f}" for b in later)
    text = tr("DDP's buckets for this model, read from DDP: {first} on the first step, "
              "{n_later} ({sizes} MB) from the second on.",
              first=tr("one bucket") if len(buckets["first"]) == 1 else
              tr("{n} buckets", n=len(buckets["first"])),
              n_later=tr("one bucket") if len(later) == 1 else tr("{n} buckets", n=len(later)),
              sizes=sizes)
    if len(later) == 1:
        return text + " " + tr("A bucket's all-reduce starts once every gradient in it is "
                               "ready, so here it starts only when backward is over: DDP "
                               "overlaps nothing with this model, and waits as zero1 does.")
    return text + " " + tr("A bucket's all-reduce starts once every gradient in it is ready; "
                           "the last bucket ({last_mb:.2f} MB, {share:.0%} of the bytes) holds "
                           "the gradients backward makes last, so that much cannot overlap "
                           "backward: only the earlier buckets' all-reduces can.",
                           last_mb=later[-1] / MB, share=later[-1] / total)


# ---- which stage first fits: planned, then run under a capacity -------------------------------

def planned_bytes(n_params: int, activations: float, world_size: int,
                  bucket_bytes: float = 0.0) -> dict[str, float]:
    """The plan per strategy: the formula's model state (fp32 AdamW) plus the activations data
    parallel measured (no stage shards them); ``ddp`` also plus ``bucket_bytes``, DDP's
    all-reduce buckets (a second copy of the gradients, kept between steps: read from DDP by
    :func:`ddp_buckets`)."""
    return {name: model_state_bytes(n_params, zero_stage=stage, dp=world_size,
                                    convention="fp32-adamw")["total"] + activations
            + (bucket_bytes if name == "ddp" else 0.0)
            for stage, name in enumerate(STAGES)}


def capped_runs(spec, capacity: int, n_params: int, activations: float,
                steps: int = 3, bucket_bytes: float = 0.0) -> list[dict]:
    """Data parallel and ZeRO stages 1-3, each planned (``bucket_bytes``: DDP's buckets, added
    to ddp's plan) and then run with ``device_memory = capacity`` per rank: one row per strategy
    (planned bytes, whether the plan fits, whether the run fitted, its largest per-rank peak or
    the out-of-memory error's fields: ``error`` its first line, ``oom`` the exception's fields
    when the launcher passed them on)."""
    plan = planned_bytes(n_params, activations, spec.world_size, bucket_bytes)
    rows = []
    for name in STAGES:
        row = {"strategy": name, "planned": plan[name], "planned_fits": plan[name] <= capacity}
        try:
            summary = launch(spec.replace(strategy=name, device_memory=capacity,
                                          steps=steps)).wait()
            row.update(fits=True, peak=max(summary["peak_mem_bytes"]), error=None)
        except RunFailed as failure:
            if "out of memory" not in str(failure):
                raise
            row.update(fits=False, peak=None, error=failure.cause, oom=oom_fields(failure.cause))
        rows.append(row)
    return rows


_OOM = re.compile(r"rank (\d+) ran out of memory at step (\d+) \((\w+)\): tried to hold .*?"
                  r"\(([\d,]+) bytes\)")


def oom_fields(cause: str) -> dict | None:
    """The fields of a capacity's out-of-memory error (``measure.capacity.DeviceOutOfMemory``'s
    first line): rank, step, phase and the bytes it tried to hold; None for another text (CUDA's
    own out-of-memory error)."""
    found = _OOM.search(cause or "")
    if not found:
        return None
    rank, step, phase, held = found.groups()
    return {"rank": int(rank), "step": int(step), "phase": phase, "held": int(held.replace(",", ""))}


def outcome_words(row: dict) -> str:
    """What a capped run did, in the notebook's language: fitted (with its peak), or ran out of
    memory, told from the error's fields (the error's own text where it has none we read)."""
    if row["fits"]:
        return tr("fits, peak {mb:.1f} MB", mb=row["peak"] / MB)
    oom = row.get("oom")
    if oom is None:
        return tr("out of memory: {error}", error=row["error"])
    return tr("out of memory: rank {rank} at step {step} ({phase}) would hold {mb:.1f} MB",
              rank=oom["rank"], step=oom["step"], phase=tr(oom["phase"]), mb=oom["held"] / MB)


def first_fit(rows: list[dict], key: str) -> str | None:
    """The first strategy, in the order of ``rows``, whose ``key`` ("fits", "planned_fits") holds."""
    return next((r["strategy"] for r in rows if r[key]), None)
