"""Lesson 10's exercise checkers: each takes the learner's answer and the lesson's own objects
(section 1's activation rows, section 4's runs) and derives what it expects, so the notebook
shows only the call. ``...`` means "not answered yet".

- :func:`check_visible_pairs`: the query-key pairs one rank's causal attention computes under a
  split (``gpututor.parallel.context_parallel.causal_work``).
- :func:`check_activation_shrink`: one process's activations over a cp rank's, as section 1
  measured them.
- :func:`check_cp_bytes`: the bytes a cp run sent per step, as its ranks counted them.
- :func:`check_merge`: the learner's merge of two partial attention results (ring attention's
  step), against attention over all the keys at once, on queries, keys and causal masks the
  learner does not choose; then as the merge of ``ring_forward`` in real ranks (3, zig-zag).
  The package's own merge refuses while it runs.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Callable

import torch

from ...config import RunSpec
from ...i18n import tr
from ...parallel.context_parallel import Ring, causal_work, split_positions
from ...parallel.context_parallel.ring_attention import merge, ring_forward, visible_tile
from ..common.code_exercise import CalledTheReference, call_refusing
from ..common.exercises import check_answer, records_in_ranks
from ..common.guards import RefusedWhileRunning


def check_visible_pairs(answer, seq_len: int = 64, ranks: int = 2, split: str = "contiguous",
                        rank: int = 0) -> None:
    """Query-key pairs rank ``rank``'s causal attention computes when ``seq_len`` tokens are
    split over ``ranks`` ranks (the defaults: exercise 1)."""
    check_answer(answer, causal_work(seq_len, ranks, split)[rank],
                 f"visible pairs of rank {rank}, {split} split", rel_tol=0, source="formula")


def check_activation_shrink(answer, rows: list[dict], seq_len: int = 256,
                            whole: str = "one process", split: str = "cp=2, per rank") -> None:
    """By what factor the ``split`` layout's rank 0 keeps fewer activation bytes than ``whole``
    at ``seq_len``, in ``rows`` (section 1's ``activations_by_length``)."""
    by = {(r["layout"], r["seq_len"]): r["activations"] for r in rows}
    one, per_rank = by.get((whole, seq_len)), by.get((split, seq_len))
    check_answer(answer, one / per_rank if one and per_rank else None,
                 "activations, one process / a cp=2 rank", rel_tol=0.01)


def check_cp_bytes(answer, runs: dict, run: str = "cp=2, zig-zag") -> None:
    """The bytes per step the ranks of ``runs[run]`` counted themselves sending."""
    summary = runs.get(run)
    check_answer(answer, summary["comm_bytes_per_step"] if summary else None,
                 "bytes sent per step by cp=2", rel_tol=1e-6)


# ---- exercise 4: merge two partial attentions (ring attention's step) -------------------------

def partial_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      visible: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(out, lse)`` of ``q`` over one block of keys (``visible``: queries x keys, which pairs
    causal attention allows). A query that sees no key of the block gets ``out = 0``,
    ``lse = -inf``: the nothing-yet that ``ring_forward`` starts its sum from."""
    s = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~visible, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    seen = torch.isfinite(lse)[..., None]
    p = torch.where(seen, torch.exp(s - torch.where(seen, lse[..., None], 0.0)), 0.0)
    return p @ v, lse


def _case(seed: int, queries: int, blocks: list[list[int]], causal: bool, dtype=torch.float64,
          loud: float = 1.0):
    """Queries at positions 0.. and keys cut into ``blocks`` (lists of key positions): the
    blocks' partial results (in ``dtype``) and attention over all the keys (float64)."""
    gen = torch.Generator().manual_seed(seed)
    keys = sum(len(b) for b in blocks)
    q = torch.randn(2, 3, queries, 5, generator=gen, dtype=torch.float64) * loud
    k = torch.randn(2, 3, keys, 5, generator=gen, dtype=torch.float64) * loud
    v = torch.randn(2, 3, keys, 5, generator=gen, dtype=torch.float64)
    positions = torch.arange(keys)
    allowed = positions[None, :] <= torch.arange(queries)[:, None] if causal else \
        torch.ones(queries, keys, dtype=torch.bool)
    parts = []
    for block in blocks:
        cols = torch.tensor(block)
        out, lse = partial_attention(q, k[..., cols, :], v[..., cols, :], allowed[:, cols])
        parts.append((out.to(dtype), lse.to(dtype)))
    full_out, full_lse = partial_attention(q, k, v, allowed)
    return parts, full_out, full_lse


# name, the hint when the result is not finite, the case's inputs
MERGE_CASES = (
    ("11 keys in blocks of 4 and 7, no mask", None,
     dict(seed=0, queries=6, blocks=[[0, 1, 2, 3], list(range(4, 11))], causal=False)),
    ("causal, the earlier half of the keys first (the first 6 queries see none of the second "
     "block: lse_b = -inf, out_b = 0)", "-inf",
     dict(seed=1, queries=12, blocks=[list(range(6)), list(range(6, 12))], causal=True)),
    ("causal, the later half of the keys first (lse_a = -inf for the first 6 queries)", "-inf",
     dict(seed=2, queries=12, blocks=[list(range(6, 12)), list(range(6))], causal=True)),
    ("causal, zig-zag blocks: chunks 0 and 3 against chunks 1 and 2", "-inf",
     dict(seed=3, queries=12, blocks=[[0, 1, 2, 9, 10, 11], [3, 4, 5, 6, 7, 8]], causal=True)),
    ("large scores in float32 (log-sum-exps of a few hundred)", "large",
     dict(seed=4, queries=6, blocks=[[0, 1, 2, 3, 4], [5, 6, 7, 8, 9, 10]], causal=False,
          dtype=torch.float32, loud=12.0)),
    ("four blocks merged in turn from out = 0, lse = -inf, as ring_forward does", "-inf",
     dict(seed=5, queries=12, blocks=[[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]],
          causal=True)),
)
HINTS = {"-inf": "A query that sees no key of a block has lse = -inf and out = 0 there: its "
                 "weight must come out 0, not nan.",
         "large": "exp of a log-sum-exp this large overflows: exponentiate only differences of "
                  "log-sum-exps."}


def _as_merged(result, out_b: torch.Tensor, lse_b: torch.Tensor):
    """``result`` if it is an ``(out, lse)`` pair of the partial results' shapes; else TypeError."""
    if not (isinstance(result, (tuple, list)) and len(result) == 2
            and all(isinstance(t, torch.Tensor) for t in result)):
        raise TypeError(f"returned {type(result).__name__}, not (out, lse)")
    out, lse = result
    if out.shape != out_b.shape or lse.shape != lse_b.shape:
        raise TypeError(f"returned out of shape {tuple(out.shape)} and lse of shape "
                        f"{tuple(lse.shape)}, not out_a's {tuple(out_b.shape)} and lse_a's "
                        f"{tuple(lse_b.shape)}")
    return out, lse


def _merged(candidate, parts):
    """The candidate's merge of ``parts`` in turn: two blocks at once, more from nothing yet."""
    out, lse = torch.zeros_like(parts[0][0]), torch.full_like(parts[0][1], float("-inf"))
    if len(parts) == 2:
        (out, lse), parts = parts[0], parts[1:]
    for out_i, lse_i in parts:
        out, lse = _as_merged(candidate(out, lse, out_i, lse_i), out_i, lse_i)
    return out, lse


@dataclass(frozen=True)
class MergeInTheRing:
    """In every rank: ``ring_forward`` with the candidate as its merge (the package's refuses),
    on this rank's zig-zag positions, against causal attention over the whole sequence."""

    candidate: Callable
    seq_len: int = 24

    def __call__(self, spec, rank, world, device, emit):
        module = sys.modules[ring_forward.__module__]   # where ring_forward finds its merge
        gen = torch.Generator().manual_seed(11)
        q, k, v = (torch.randn(2, 3, self.seq_len, 8, generator=gen, dtype=torch.float64)
                   for _ in range(3))
        causal = torch.ones(self.seq_len, self.seq_len, dtype=torch.bool).tril()
        full_out, full_lse = partial_attention(q, k, v, causal)
        positions = split_positions(self.seq_len, world, "zigzag")
        mine = positions[rank]
        tiles = [visible_tile(mine, positions[(rank - s) % world]) for s in range(world)]
        failures = []

        def guarded(*partials):
            # a merge that fails must not stop this rank: the others would wait for its blocks.
            # The package's merge refuses for the whole ring (below), not only in this call.
            try:
                return call_refusing(self.candidate, partials,
                                     read=lambda got: _as_merged(got, partials[2], partials[3]))
            except CalledTheReference:
                failures.append("reference")
            except Exception as exc:   # noqa: BLE001 - reported to the checker
                failures.append(f"{type(exc).__name__}: {exc}")
            return partials[2], partials[3]

        module.merge = guarded
        try:
            with RefusedWhileRunning(merge):
                out, lse = ring_forward(q[..., mine, :], k[..., mine, :], v[..., mine, :], tiles,
                                        Ring(rank, world), 1.0 / math.sqrt(q.shape[-1]))
        finally:
            module.merge = merge
        errors = [(out - full_out[..., mine, :]).abs().max().item(),
                  (lse - full_lse[..., mine]).abs().max().item()]
        emit({"step": 0, "max_error": max(e if math.isfinite(e) else math.inf for e in errors),
              "called": "reference" in failures,
              "failure": next((f for f in failures if f != "reference"), "")})


def check_merge(candidate: Callable, world_size: int = 3) -> None:
    """Run ``candidate(out_a, lse_a, out_b, lse_b) -> (out, lse)`` on the partial attentions of
    :data:`MERGE_CASES`; the merged output and log-sum-exp must be attention's over all the keys.
    Then ``ring_forward`` runs with it as its merge in ``world_size`` real ranks (zig-zag, so
    every rank merges blocks it half sees). The package's ``merge`` refuses while it runs (and
    ``ring_forward`` too in the first part)."""
    if candidate is ...:
        print(tr("merge: not answered yet. Define your function and pass it in."))
        return
    for name, hint, inputs in MERGE_CASES:
        parts, full_out, full_lse = _case(**inputs)
        case = tr(name)
        out, lse = call_refusing(_merged, (candidate, parts), refused=(merge, ring_forward),
                                 called=tr("merge: your function called the package's merge "
                                           "(ring attention's own): write the merge yourself."),
                                 failed=tr("merge [{case}]: your function failed: {error}"),
                                 case=case)
        out, lse = out.detach().to(torch.float64), lse.detach().to(torch.float64)
        if not (torch.isfinite(out).all() and torch.isfinite(lse).all()):
            raise AssertionError(tr("merge [{case}]: your merge gives inf or nan.", case=case)
                                 + " " + tr(HINTS[hint] if hint else ""))
        tight = parts[0][0].dtype == torch.float64
        close = dict(rtol=1e-9, atol=1e-11) if tight else dict(rtol=1e-4, atol=1e-4)
        if not torch.allclose(out, full_out, **close):
            raise AssertionError(tr("merge [{case}]: your merged output is not attention's over "
                                    "all the keys. What share of the whole softmax does each "
                                    "block's partial output stand for?", case=case))
        if not torch.allclose(lse, full_lse, **close):
            raise AssertionError(tr("merge [{case}]: the output is right, but your lse is not "
                                    "the log-sum-exp of the scores over all the keys.", case=case))
    spec = RunSpec(strategy="cp", world_size=world_size, device="cpu", timeout=30)
    records = records_in_ranks(MergeInTheRing(candidate), spec,
                               "merge: as ring_forward's merge on {world} ranks your function "
                               "failed: {error}")
    if any(r["called"] for r in records):
        raise AssertionError(tr("merge: your function called the package's merge (ring "
                                "attention's own): write the merge yourself."))
    failure = next((r["failure"] for r in records if r["failure"]), "")
    if failure:
        raise AssertionError(tr("merge: as ring_forward's merge on {world} ranks your function "
                                "failed: {error}", world=world_size, error=failure))
    if not max(r["max_error"] for r in records) <= 1e-9:
        raise AssertionError(tr("merge: as ring_forward's merge on {world} ranks your function "
                                "does not give causal attention over the whole sequence.",
                                world=world_size))
    print(tr("Correct: your merge gives attention over all the keys, output and log-sum-exp, in "
             "{cases} cases: causal blocks a query does not see, large scores, four blocks in "
             "turn; and as ring_forward's merge on {world} ranks.", cases=len(MERGE_CASES),
             world=world_size))
