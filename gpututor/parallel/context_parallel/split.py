"""Which positions of the sequence each context-parallel rank keeps, and the work that gives it.

With causal attention a query at position p looks at p+1 keys, so the *end* of a sequence costs
far more than its start. Cut a sequence of T tokens into n contiguous pieces (``"contiguous"``)
and the last rank attends over ~2n-1 times as many query-key pairs as the first: in a ring, where
every step waits for the slowest rank, the ring takes the busiest rank's time, not what the same
work shared evenly would take (:func:`ring_slowdown`: busiest over *mean*). Counted in visible
pairs (a kernel that skips every masked pair) that is ~2 - 1/n; counted in what this package's
``ring_forward`` computes (the whole rectangle of each :func:`visible_tile`, its masked pairs
included: ``counted="computed"``) it is smaller, 1.33, 1.60, 1.78 for n = 2, 4, 8.

The zig-zag split (``"zigzag"``, the load-balanced layout of Llama 3's context parallelism
[ref: dubey2024-context-parallel], of Megatron-LM's context parallel and of
zhuzilin/ring-flash-attention) cuts the sequence into 2n chunks and gives rank r the chunk r
from the front and the chunk r from the back (chunks r and 2n-1-r). A cheap early chunk pairs
with an expensive late one, and every rank gets exactly the same number of visible pairs:

    T=16, n=2, chunks of 4:   rank 0: 0 1 2 3  . . . .  . . . .  12 13 14 15
                              rank 1: . . . .  4 5 6 7  8 9 10 11  . . . .

It balances the ring step by step too: after the first step, each rank sees exactly half of
every block it receives (the early or the late half), so no rank idles while another computes
(:func:`ring_step_work`).
"""
from __future__ import annotations

import torch

from ... import checks
from ...checks import InvalidValue
from .ring_attention import visible_tile

SPLITS = ("zigzag", "contiguous")
COUNTS = ("visible", "computed")


def check_split(seq_len: int, n: int, split: str) -> None:
    """``ValueError`` unless a sequence of ``seq_len`` tokens splits ``split``-wise over n ranks."""
    checks.choice("split", split, SPLITS)
    pieces = 2 * n if split == "zigzag" else n
    if seq_len % pieces:
        raise InvalidValue("seq_len", seq_len, f"a multiple of {pieces}",
                           f"for a {split} split over {n} ranks")


def split_positions(seq_len: int, n: int, split: str = "zigzag") -> torch.Tensor:
    """``n × seq_len/n``: row r holds the positions rank r keeps, in increasing order."""
    check_split(seq_len, n, split)
    if split == "contiguous":
        return torch.arange(seq_len).view(n, -1)
    chunks = torch.arange(seq_len).view(2 * n, -1)
    return torch.cat([chunks[:n], chunks.flip(0)[:n]], dim=1)   # chunks r and 2n-1-r


def causal_work(seq_len: int, n: int, split: str = "zigzag") -> list[int]:
    """Visible query-key pairs of causal attention per rank: its query at position p sees the
    p+1 keys at positions 0..p, wherever they are held."""
    return (split_positions(seq_len, n, split) + 1).sum(dim=1).tolist()


def ring_step_work(seq_len: int, n: int, split: str = "zigzag",
                   counted: str = "visible") -> torch.Tensor:
    """``steps × ranks``: the query-key pairs between rank r's queries and the key block it holds
    at each ring step (at step s the block of rank r-s). ``counted="visible"``: the pairs causal
    attention allows (what a kernel that skips masked pairs does); ``"computed"``: the rectangle
    ``rows × cols`` of :func:`visible_tile` that ``ring_forward`` computes, masked pairs included.
    Each step lasts as long as its busiest rank, so ``work.amax(dim=1).sum()`` is what the ring
    takes, ``work.sum()`` what it must do."""
    checks.choice("counted", counted, COUNTS)
    positions = split_positions(seq_len, n, split)
    work = torch.zeros(n, n, dtype=torch.long)
    for step in range(n):
        for rank in range(n):
            q, k = positions[rank], positions[(rank - step) % n]
            if counted == "visible":
                work[step, rank] = (k[None, :] <= q[:, None]).sum()
            else:
                tile = visible_tile(q, k)
                work[step, rank] = 0 if tile is None else tile[0].numel() * tile[1].numel()
    return work


def ring_slowdown(seq_len: int, n: int, split: str = "zigzag", counted: str = "visible") -> float:
    """How many times longer the ring takes than with its work shared evenly: every ring step
    lasts as long as its busiest rank (:func:`ring_step_work`, pairs ``counted`` as there), so
    the ring takes ``Σ_steps max_r work`` against ``Σ work / n`` shared evenly. 1.0 is a balanced
    ring; the slowdown is the busiest rank's work over the *mean* rank's, not over the idlest's."""
    work = ring_step_work(seq_len, n, split, counted)
    return float(work.amax(dim=1).sum() / (work.sum() / n))
