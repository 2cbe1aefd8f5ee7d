"""Lesson 01b's measurements of this package's own code: the matmul FLOPs the tiled and the
naive attention (``gpututor.attention``) do, counted by PyTorch's FLOP counter, the operator
calls and times PyTorch's profiler sees in them, and how far 8-bit Adam's trained weights land
from fp32 Adam's, measured as the package's test measures it (with its bounds).
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from ...attention import naive_attention, tiled_attention
from ...measure.profile import quiet_profiler
from ...models import build_model
from ..common.one_device import adam_fp32_vs_8bit, train_with

# the bounds tests/precision/test_adam8bit.py holds 8-bit Adam to (12 steps of the tiny GPT,
# TEST_STEPS): weights at most APART_BOUND of fp32 Adam's move away, moves' cosine above
# COSINE_BOUND; the test imports them from here
APART_BOUND, COSINE_BOUND, TEST_STEPS = 0.2, 0.98, 12
MATMUL_OPS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::matmul")


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


def operator_calls(seq_len: int, batch: int = 1, heads: int = 4, head_dim: int = 32,
                   block: int = 64) -> dict:
    """Per way (``"naive"``, ``"tiled"``): one forward and backward under PyTorch's profiler
    (CPU): ``wall_s`` (with the profiler on), ``aten_calls`` (operator calls), ``aten_s`` (the
    operators' own time, summed) and ``matmul_s`` (that of ``mm``/``bmm``/``addmm``/``matmul``).
    What is left of ``wall_s`` ran outside the operators: Python and the profiler itself."""
    gen = torch.Generator().manual_seed(seq_len)
    q, k, v = (torch.randn(batch, heads, seq_len, head_dim, generator=gen, requires_grad=True)
               for _ in range(3))
    ways = {"naive": naive_attention, "tiled": lambda *qkv: tiled_attention(*qkv, block=block)}
    out = {}
    for name, way in ways.items():
        way(q, k, v).sum().backward()                      # warm-up
        with quiet_profiler(), profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            way(q, k, v).sum().backward()
            wall = time.perf_counter() - start
        ops = [e for e in prof.key_averages() if e.key.startswith("aten::")]
        out[name] = {"wall_s": wall, "aten_calls": sum(e.count for e in ops),
                     "aten_s": sum(e.self_cpu_time_total for e in ops) / 1e6,
                     "matmul_s": sum(e.self_cpu_time_total for e in ops if e.key in MATMUL_OPS) / 1e6}
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


def apart_by_steps(spec, adam: dict, steps: int = TEST_STEPS) -> list[dict]:
    """How far 8-bit Adam's and the yardstick's (fp32 Adam at twice the learning rate) weights
    end from fp32 Adam's, after ``steps`` (the package's test's count: trained here again) and
    after ``spec.steps`` (``adam``, the lesson's run). Rows ``{"steps", "name", "apart",
    "cosine", "within", "loss", "reference_loss"}`` (final losses: the row's, fp32 Adam's);
    ``within``: inside the test's bounds (:data:`APART_BOUND`,
    :data:`COSINE_BOUND`)."""
    rows = []
    for n, runs in ((steps, adam_fp32_vs_8bit(spec.replace(steps=steps))), (spec.steps, adam)):
        sized = spec.replace(steps=n)
        fp32 = runs["Adam (fp32 state)"]["model"]
        for name, run in (("Adam, 8-bit state", runs["Adam, 8-bit state"]),
                          ("fp32 Adam, twice the learning rate", adam_at_learning_rate(sized, 2.0))):
            moved = weights_apart(run["model"], fp32, sized)
            rows.append({"steps": n, "name": name, **moved,
                         "within": moved["apart"] < APART_BOUND and moved["cosine"] > COSINE_BOUND,
                         "loss": run["losses"][-1],
                         "reference_loss": runs["Adam (fp32 state)"]["losses"][-1]})
    return rows
