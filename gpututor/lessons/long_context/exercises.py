"""Lesson 10's exercise checkers: each takes the learner's answer and the lesson's own objects
(section 1's activation rows, section 4's runs) and derives what it expects, so the notebook
shows only the call. ``...`` means "not answered yet".

- :func:`check_visible_pairs`: the learner's count of the query-key pairs one rank's causal
  attention sees under a split, run against ``gpututor.parallel.context_parallel.causal_work``
  on cases the checker picks (``causal_work``, ``ring_step_work`` and ``split_positions`` refuse
  while it runs).
- :func:`check_activation_prediction`: one process's activation bytes at a length no run here
  reaches (``T = 512``), predicted by the fit ``a·T + b·T²`` through section 1's two longest
  lengths (the checker measures them again and fits them itself).
- :func:`check_cp_bytes`: the bytes a cp run no cell launched (cp=4) sends per step, by the
  ring's count (tests/lessons/long_context check the count against the meter of a real run).
- :func:`check_merge`: the learner's merge of two partial attention results (ring attention's
  step), against attention over all the keys at once, on queries, keys and causal masks the
  learner does not choose; then as the merge of ``ring_forward`` in real ranks (3, zig-zag).
  The package's own merge refuses while it runs.
"""
from __future__ import annotations

import random

import math
import sys
from dataclasses import dataclass
from typing import Callable

import torch

from ...config import RunSpec
from ...formulas import ring_attention_shifts
from ...i18n import say, tr
from ...models import build_model, count_parameters
from ...parallel.context_parallel import Ring, causal_work, ring_step_work, split_positions
from ...parallel.context_parallel.ring_attention import merge, ring_forward, visible_tile
from ..common.code_exercise import CalledTheReference, call_refusing, number_from
from ..common.exercises import check_answer, records_in_ranks
from ..common.guards import RefusedWhileRunning


# (T, n, split, rank): exercise 1's cases; every split and an end rank, a middle rank, rank 0,
# n from 2 to 8, none where two of the tested mistakes give the same count
VISIBLE_CASES = ((96, 3, "contiguous", 2), (96, 3, "zigzag", 2), (64, 4, "zigzag", 0),
                 (120, 5, "contiguous", 1), (48, 2, "zigzag", 1), (256, 8, "zigzag", 5))


def drawn_cases(count: int = 3, rng: random.Random | None = None) -> list[tuple]:
    """``count`` more cases drawn afresh at each check: a table of answers made beforehand for
    :data:`VISIBLE_CASES` (with ``causal_work``, outside the check) does not cover them."""
    rng = rng or random.Random()
    cases = []
    for _ in range(count):
        n = rng.randint(2, 8)
        cases.append((2 * n * rng.randint(2, 12), n, rng.choice(("contiguous", "zigzag")),
                      rng.randrange(n)))
    return cases


def check_visible_pairs(candidate: Callable) -> None:
    """Run ``candidate(T, n, split, rank)`` on :data:`VISIBLE_CASES` and three cases drawn at
    random (:func:`drawn_cases`): the query-key pairs rank
    ``rank``'s causal attention sees when ``T`` tokens are split over ``n`` ranks, exactly
    :func:`~gpututor.parallel.context_parallel.causal_work`'s. ``causal_work``,
    ``ring_step_work`` and ``split_positions`` refuse while it runs."""
    if candidate is ...:
        say("visible pairs: not answered yet. Define your function and pass it in.")
        return
    if not callable(candidate):
        raise AssertionError(tr("visible pairs: pass your function my_visible_pairs itself, not "
                                "{got!r}.", got=candidate))
    cases = list(VISIBLE_CASES) + drawn_cases()
    for seq_len, n, split, rank in cases:
        expected = causal_work(seq_len, n, split)[rank]
        where = tr("T = {T}, {n} ranks, {split} split, rank {rank}", T=seq_len, n=n, split=split,
                   rank=rank)
        got = call_refusing(candidate, (seq_len, n, split, rank),
                            refused=(causal_work, ring_step_work, split_positions),
                            called=tr("visible pairs: your function called the package's "
                                      "causal_work, ring_step_work or split_positions: count the "
                                      "pairs yourself."),
                            failed=tr("visible pairs [{where}]: your function failed: {error}"),
                            where=where)
        number = number_from(got, tr("visible pairs: for {where} your function returned {got!r} "
                                     "(a {kind}), not a number.", where=where, got=got,
                                     kind=type(got).__name__))
        if number != expected:
            raise AssertionError(tr(
                "visible pairs: for {where} yours gives {got:,.0f}, not the count of the pairs "
                "causal attention allows. Which positions does this rank hold (zig-zag: chunks r "
                "and 2n − 1 − r of 2n), and how many keys does the query at position p see?",
                where=where, got=number))
    say("Correct: your function counts the visible pairs of {cases} cases exactly: both "
             "splits, 2 to 8 ranks, first, middle and last ranks.", cases=len(cases))


PREDICTED_SEQ_LEN = 512    # exercise 2: beyond the longest length a RunSpec allows (256)
FIT_LENGTHS = (128, 256)   # section 1's two longest lengths


def quadratic_fit(bytes_at: dict) -> tuple[float, float]:
    """``(a, b)`` of ``a·T + b·T²`` through the two lengths of ``bytes_at`` (``{T: bytes}``):
    activations per token, and those that grow with the score matrix (section 1)."""
    (t1, y1), (t2, y2) = sorted(bytes_at.items())
    b = (y2 / t2 - y1 / t1) / (t2 - t1)
    return y1 / t1 - b * t1, b


def check_activation_prediction(answer, base: RunSpec, seq_len: int = PREDICTED_SEQ_LEN,
                                lengths: tuple = FIT_LENGTHS, rel_tol: float = 0.01) -> None:
    """The learner's prediction of one process's activation bytes (rank 0's, as section 1
    measures them) at ``seq_len``, within ``rel_tol`` of the checker's own: it runs one process
    at ``lengths`` again (``activations_by_length``, as section 1), fits ``a·T + b·T²`` through
    them (:func:`quadratic_fit`) and evaluates it at ``seq_len``. A straight line through the
    same two points falls short by far more than ``rel_tol``: the ``T²`` term is the question."""
    from .runs import activations_by_length
    what = f"one process's activation bytes at T = {seq_len}, by the a·T + b·T² fit"
    if answer is ...:
        return check_answer(answer, None, what)
    rows = activations_by_length(base, lengths, [("one process", "single", 1)])
    bytes_at = {r["seq_len"]: r["activations"] for r in rows if r["activations"]}
    expected = None
    if len(bytes_at) == 2:
        a, b = quadratic_fit(bytes_at)
        expected = a * seq_len + b * seq_len ** 2
    check_answer(answer, expected, what, rel_tol=rel_tol, source="derived")


def ring_bytes_per_step(spec: RunSpec) -> int:
    """Bytes one rank of a ``cp`` run of ``spec`` hands to its sends and collectives per step
    (the meter's ``comm_bytes``; on the wire a ring all-reduce sends 2(n-1)/n of its buffer), by
    the ring's count: per
    attention layer, the fp32 key+value block (``2 × batch × T/n × d_model``) shifted n-1 times
    in forward and n-1 in backward, its gradient n times; then the parameters' gradients
    all-reduced once (their fp32 bytes: the all-reduce's buffer, counted once)."""
    model = build_model(spec)
    n = spec.world_size
    block = 2 * spec.batch_size * (spec.seq_len // n) * model.cfg.d_model * 4
    return model.cfg.n_layer * ring_attention_shifts(n) * block + 4 * count_parameters(model)


def check_cp_bytes(answer, spec: RunSpec, world_size: int = 4) -> None:
    """The bytes per step one rank of ``spec`` as a zig-zag cp run over ``world_size`` ranks
    hands to its sends and collectives (exercise 3: cp=4, which no cell launches), by :func:`ring_bytes_per_step`. Exact to
    1e-6."""
    expected = ring_bytes_per_step(spec.replace(strategy="cp", world_size=world_size))
    check_answer(answer, expected,
                 f"bytes per step one cp={world_size} rank hands to its sends and collectives",
                 rel_tol=1e-6, source="formula")


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
        say("merge: not answered yet. Define your function and pass it in.")
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
    say("Correct: your merge gives attention over all the keys, output and log-sum-exp, in "
             "{cases} cases: causal blocks a query does not see, large scores, four blocks in "
             "turn; and as ring_forward's merge on {world} ranks.", cases=len(MERGE_CASES),
             world=world_size)
