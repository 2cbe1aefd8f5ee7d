"""Gathering over ranks without pickles (gpututor.parallel.exchange): bytes and named tensors of
any dtype and shape arrive bit for bit, in rank order; nothing a peer sends is unpickled."""
from __future__ import annotations

import ast
from pathlib import Path

import torch

from conftest import shared_gloo_ranks
from gpututor.parallel.exchange import all_gather_bytes, all_gather_tensors

PACKAGE = Path(__file__).resolve().parents[2] / "gpututor"
WORLD = 3


def rank_tensors(rank: int) -> dict:
    """Ragged on purpose: rank r holds r + 1 tensors, of several dtypes, one a scalar."""
    g = torch.Generator().manual_seed(rank)
    made = {"w": torch.randn(2, rank + 1, generator=g), "step": torch.tensor(rank),
            "half": torch.randn(3, generator=g).to(torch.bfloat16),
            "mask": torch.rand(rank + 2, generator=g) > 0.5}
    return dict(list(made.items())[:rank + 1])


def _rank(rank: int, world: int) -> list | None:
    """One rank of conftest's shared 3-rank gloo group (none on 2): gather, then check what
    arrived against what each rank made; what was wrong goes back as text."""
    if world != WORLD:
        return None
    texts = all_gather_bytes(("é" * rank).encode())
    tensors = all_gather_tensors(rank_tensors(rank))
    wrong = [] if texts == [("é" * r).encode() for r in range(WORLD)] else [f"texts {texts}"]
    for r, part in enumerate(tensors):
        want = rank_tensors(r)
        if list(part) != list(want):
            wrong.append(f"rank {r}'s names {list(part)}")
        wrong += [f"rank {r}'s {name}" for name, t in want.items() if name in part and not (
            part[name].dtype == t.dtype and part[name].shape == t.shape and torch.equal(part[name], t))]
    return wrong


def test_bytes_and_tensors_arrive_bit_for_bit_in_rank_order(tmp_path_factory):
    results = shared_gloo_ranks("test_exchange", WORLD, tmp_path_factory)
    assert dict(enumerate(results)) == {rank: [] for rank in range(WORLD)}


def test_no_module_unpickles_what_a_peer_sends():
    """Object collectives pickle and unpickle; every gathering over ranks in the package sends
    tensors instead (the dry run only replaces torch's, for its fake group: no call)."""
    object_collectives = {"all_gather_object", "gather_object", "broadcast_object_list",
                          "scatter_object_list", "send_object_list", "recv_object_list"}
    found = [f"{path.relative_to(PACKAGE)}:{node.lineno} {node.func.attr}"
             for path in PACKAGE.rglob("*.py") for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and node.func.attr in object_collectives]
    assert not found, found
