"""The corpus, a character tokenizer, and a deterministic sampler that shards a global batch.

The sampler is the reason data parallel can be *proven* equal to one process: for step ``s`` the
global batch is drawn from a generator seeded by ``(seed, s)``, and data-parallel rank ``r`` of
``n`` takes rows ``r*B/n .. (r+1)*B/n`` of it. Concatenate what the ``n`` ranks see and you get
exactly the batch one process sees.
"""
from __future__ import annotations

import site
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from . import checks
from .config import CORPORA

TRAIN_FRACTION = 0.9
# Where the corpora are: the repository's data/ (a checkout, an editable install), or the
# environment's share/gpututor/data, where `pip install .` and a wheel put them (pyproject.toml's
# data-files; a `pip install --user` puts them under the user base).
INSTALLED = Path("share") / "gpututor" / "data"


def data_dirs() -> list[Path]:
    """The folders searched for the corpora, in order."""
    dirs = [Path(__file__).resolve().parent.parent / "data", Path(sys.prefix) / INSTALLED]
    if site.USER_BASE:
        dirs.append(Path(site.USER_BASE) / INSTALLED)
    return dirs


def corpus_path(corpus: str = "en") -> Path:
    """The file of corpus ``corpus``; a FileNotFoundError naming every folder looked in."""
    name = CORPORA[corpus]
    for folder in data_dirs():
        if (folder / name).is_file():
            return folder / name
    looked = "\n  ".join(map(str, data_dirs()))
    raise FileNotFoundError(
        f"gpututor's corpus {name!r} (corpus={corpus!r}) is in none of these folders:\n  {looked}\n"
        "Install gpututor with `pip install .` from its repository (the wheel carries data/), "
        "or use it from a checkout (`make install`).")




@dataclass(frozen=True)
class CharTokenizer:
    """Maps each character of the corpus to an integer id and back."""

    chars: str

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        index = {c: i for i, c in enumerate(self.chars)}
        return [index[c] for c in text]

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


def load_corpus(corpus: str = "en") -> tuple[CharTokenizer, torch.Tensor]:
    """Read corpus ``corpus`` ("en" or "zh", ``config.CORPORA``) once per process; return its
    tokenizer (one id per distinct character, in code-point order) and all token ids (int64).
    Any Unicode text works: the characters are read as UTF-8."""
    checks.choice("corpus", corpus, CORPORA)
    return _read_corpus(corpus)   # one cache entry per corpus, however the caller names it


def vocab_size(corpus: str = "en") -> int:
    """How many distinct characters corpus ``corpus`` has: the vocabulary of a model trained on
    it (the one home of this number; ``models.config_of`` gives a spec's model its corpus's)."""
    return load_corpus(corpus)[0].vocab_size


@lru_cache(maxsize=4)
def _read_corpus(corpus: str) -> tuple[CharTokenizer, torch.Tensor]:
    text = corpus_path(corpus).read_text(encoding="utf-8")
    points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    alphabet = np.unique(points)                       # sorted code points
    ids = torch.from_numpy(np.searchsorted(alphabet, points).astype(np.int64))
    return CharTokenizer("".join(map(chr, alphabet))), ids


def split(ids: torch.Tensor, which: str) -> torch.Tensor:
    """The training (first 90 %) or validation (last 10 %) part of the token ids."""
    cut = int(len(ids) * TRAIN_FRACTION)
    return ids[:cut] if which == "train" else ids[cut:]


def global_batch(ids: torch.Tensor, step: int, batch_size: int, seq_len: int, seed: int):
    """The ``(inputs, targets)`` one process would train on at ``step``: ``batch_size`` windows."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
    starts = torch.randint(0, len(ids) - seq_len - 1, (batch_size,), generator=gen)
    offsets = torch.arange(seq_len + 1)
    windows = ids[starts[:, None] + offsets]
    return windows[:, :-1], windows[:, 1:]


def shard(batch: tuple[torch.Tensor, torch.Tensor], rank: int, world_size: int):
    """Rows of the global batch that data-parallel ``rank`` of ``world_size`` trains on."""
    inputs, targets = batch
    per_rank = inputs.shape[0] // world_size
    rows = slice(rank * per_rank, (rank + 1) * per_rank)
    return inputs[rows], targets[rows]


def batches(spec, rank: int = 0, world_size: int = 1, split_name: str = "train",
            start_step: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield, for each step of ``spec`` from ``start_step`` on, the ``(inputs, targets)`` that
    data-parallel ``rank`` sees. A step's global batch depends only on the seed and the step, so a
    run resumed from a checkpoint (with any world size) continues with the same samples."""
    _, ids = load_corpus(spec.corpus)
    part = split(ids, split_name)
    for step in range(start_step, spec.steps):
        full = global_batch(part, step, spec.batch_size, spec.seq_len, spec.seed)
        yield shard(full, rank, world_size)
