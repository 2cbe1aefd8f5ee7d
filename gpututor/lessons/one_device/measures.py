"""Lesson 01b's measurements of this package's own code: the matmul FLOPs the tiled and the
naive attention (``gpututor.attention``) do, counted by PyTorch's FLOP counter, and how far
8-bit Adam's trained weights land from fp32 Adam's, measured as the package's test measures it.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from ...attention import naive_attention, tiled_attention
from ...models import build_model
from ..common.one_device import train_with

# the bounds tests/precision/test_adam8bit.py holds 8-bit Adam to (12 steps of the tiny GPT)
APART_BOUND, COSINE_BOUND = 0.2, 0.98


def _counted(call) -> int:
    with FlopCounterMode(display=False) as counter:
        call()
    return counter.get_total_flops()


def attention_flops(seq_len: int, batch: int = 1, heads: int = 4, head_dim: int = 32,
                    block: int = 64) -> dict:
    """Per way (``"naive"``, ``"tiled"`` with tiles of ``block``): the matmul FLOPs of one
    forward and of its backward, counted by ``FlopCounterMode`` on the package's own code; and
    ``"tiles"``: how many ``block × block`` tiles the sequence has and how many of them the tiled
    way computes (it skips those the causal mask hides). The defaults are ``attention_costs``'s."""
    gen = torch.Generator().manual_seed(seq_len)
    q, k, v = (torch.randn(batch, heads, seq_len, head_dim, generator=gen, requires_grad=True)
               for _ in range(3))
    grad = torch.randn(batch, heads, seq_len, head_dim, generator=gen)
    ways = {"naive": naive_attention, "tiled": lambda *qkv: tiled_attention(*qkv, block=block)}
    out = {}
    for name, way in ways.items():
        result = []
        forward = _counted(lambda: result.append(way(q, k, v)))
        backward = _counted(lambda: result[0].backward(grad))
        out[name] = {"forward": forward, "backward": backward, "total": forward + backward}
    starts = range(0, seq_len, block)
    out["tiles"] = {"all": len(starts) ** 2,
                    "computed": sum(1 for q0 in starts for k0 in starts if k0 < q0 + block)}
    return out


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()]).double()   # exact enough


def weights_apart(model: torch.nn.Module, reference: torch.nn.Module, spec) -> dict:
    """How far a trained ``model`` ended from a ``reference`` trained from the same start, in
    the weights (as ``tests/precision/test_adam8bit.py`` measures 8-bit Adam): ``apart``, the
    distance between the two weight vectors over how far the reference moved from the start
    (``spec``'s model, built again from its seed), and ``cosine``, between the two moves."""
    start, ref, mine = _flat(build_model(spec)), _flat(reference), _flat(model)
    return {"apart": ((mine - ref).norm() / (ref - start).norm()).item(),
            "cosine": F.cosine_similarity(mine - start, ref - start, dim=0).item()}


def adam_at_learning_rate(spec, factor: float = 2.0) -> dict:
    """fp32 ``torch.optim.Adam`` at ``factor`` times ``spec.lr``, trained as
    ``adam_fp32_vs_8bit`` trains: a yardstick, a known mistake, for how far apart weights get."""
    return train_with(spec, lambda p: torch.optim.Adam(p, lr=spec.lr * factor))
