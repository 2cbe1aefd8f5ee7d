"""What the learner's own runs showed, kept from lesson to lesson, to answer common claims.

Articles about one GPU or many repeat a few claims that this series measures. Lesson 00 lists
them, and for each the lesson that measures it and what the learner's own run of that lesson
showed. A lesson records its finding with :func:`remember` (a few numbers under a key); lesson 00
reads them back with :func:`claims`. A claim whose lesson has not run yet says so ("not measured
yet"), never a number from somewhere else.

The findings live in one small JSON file, ``~/.cache/gpututor/results.json``, or the file that the
``GPUTUTOR_RESULTS`` environment variable names (the tests point it into a temp folder). Only the
notebook's kernel reads or writes it; ranks never do.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ...checks import InvalidValue
from ...files import write_text_atomically


def results_path() -> Path:
    """Where the findings are kept (``GPUTUTOR_RESULTS``, else ``~/.cache/gpututor/results.json``)."""
    return Path(os.environ.get("GPUTUTOR_RESULTS", Path.home() / ".cache" / "gpututor" / "results.json"))


def _load() -> dict:
    try:
        return json.loads(results_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def remember(key: str, **values: float) -> None:
    """Keep ``values`` (numbers) as this machine's finding ``key``, e.g.
    ``remember("06.bf16", time_ratio=0.8, memory_ratio=0.9)``; the newest run wins."""
    if key not in FINDINGS:
        raise InvalidValue("key", key, FINDINGS)
    missing = set(FINDINGS[key]) - set(values)
    if missing:
        raise ValueError(f"remember({key!r}) needs the values {sorted(FINDINGS[key])}; "
                         f"missing: {sorted(missing)}")
    found = _load()
    found[key] = {"values": {k: float(v) for k, v in values.items()},
                  "when": time.strftime("%Y-%m-%d %H:%M")}
    path = results_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, json.dumps(found, indent=2))   # never half a file of findings


def recall(key: str) -> dict | None:
    """The finding ``key`` ({"values": ..., "when": ...}) if a lesson has recorded it, else None."""
    return _load().get(key)


# finding key -> the values it holds
FINDINGS = {
    "00.speedup": ("speedup", "world_size", "gpus"),
    "02.replica": ("params_ratio", "world_size"),
    "06.bf16": ("time_ratio", "memory_ratio"),
    "07.int8": ("size_ratio", "loss_change"),
}


@dataclass(frozen=True)
class Claim:
    claim: str          # the claim, as articles put it
    lesson: str         # the lesson that measures it
    key: str            # the finding that answers it
    showed: str         # what the finding says, a template over its values (English: the key of i18n)


CLAIMS = (
    Claim("Data parallel is for models too big for one card.", "02", "02.replica",
          "each of {world_size:.0f} data-parallel ranks held {params_ratio:.2f}x the parameters of "
          "one process: the whole model, so data parallel does not make a model fit"),
    Claim("N cards train N times faster.", "00", "00.speedup",
          "{world_size:.0f} ranks ran {speedup:.2f}x as fast as one here, on {gpus:.0f} GPUs "
          "(0: each rank a one-thread CPU process)"),
    Claim("Mixed precision always saves memory and time.", "06", "06.bf16",
          "bf16 autocast took {time_ratio:.2f}x the time of fp32 per step and {memory_ratio:.2f}x its "
          "peak memory here"),
    Claim("Compression avoids the need for more cards.", "07", "07.int8",
          "int8 weights made the model {size_ratio:.2f}x the size, for a validation loss {loss_change:+.3f} "
          "from fp32; compression shrinks a trained model for inference, not the training state"),
)


def claims() -> list[dict]:
    """One row per claim: ``claim``, ``lesson``, ``showed`` (the learner's finding in words, or
    None when that lesson has not run here yet) and ``when``. Texts are English templates:
    ``gpututor.lessons.start_here.figures`` shows them in the notebook's language."""
    rows = []
    for c in CLAIMS:
        found = recall(c.key)
        # a finding recorded before its key held all of today's values reads as not measured
        found = found if found and set(FINDINGS[c.key]) <= set(found["values"]) else None
        rows.append({"claim": c.claim, "lesson": c.lesson, "template": c.showed,
                     "values": found["values"] if found else None,
                     "when": found["when"] if found else None})
    return rows
