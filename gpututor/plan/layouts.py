"""The planner on a rank grid: per-rank bytes of each layout, and the simplest one that fits.

For a model, a global batch, a number of ranks and a capacity per rank, :func:`predict_layouts`
gives every layout of lesson 09 on every grid of that many ranks its predicted bytes per rank
(:func:`gpututor.plan.memory.per_device_memory`: the ZeRO paper's model states and Korthikanti
et al.'s activations, fp32 and AdamW as the lessons' runs train), and :func:`pick_layout` the
simplest that fits: data parallel before sharding, sharding before splitting layers, one dim
before two. Every number here is a formula; lesson 09 launches the pick under the capacity and
sets the measured bytes beside these.

Left out on purpose, so read the prediction as a floor: DDP's gradient buckets (a second copy
of the gradients), temporaries of single operations, replicated norms and embeddings under
tensor parallel.
"""
from __future__ import annotations

import math
from itertools import product

from ..models import config_of
from .memory import Transformer, per_device_memory

def layouts() -> dict:
    """Layout -> (its grid dims, the ZeRO stage of its dp dim), simplest first: every strategy
    of ``gpututor.parallel.STRATEGIES`` that says the planner may propose it
    (``Strategy.planned``), in registry order, read from the strategy itself."""
    from ..parallel import STRATEGIES
    return {name: (s.dims(), s.zero_stage) for name, s in STRATEGIES.items() if s.planned}


HEADROOM = 0.8   # what a formula may fill of the capacity: temporaries are not in it


def transformer_of(spec) -> Transformer:
    """The shape of ``spec``'s GPT (the corpus's vocabulary, ``spec.seq_len``), for the formulas."""
    cfg = config_of(spec)
    return Transformer(cfg.n_layer, cfg.d_model, cfg.n_head, cfg.vocab_size, spec.seq_len,
                       name=f"tiny GPT {spec.resolved_model_size}")


def grids(world_size: int, dims: tuple) -> list[dict]:
    """Every grid over ``dims`` with ``world_size`` ranks, each dim at least 2 wide."""
    choices = [d for d in range(2, world_size + 1) if world_size % d == 0]
    return [dict(zip(dims, degrees)) for degrees in product(choices, repeat=len(dims))
            if math.prod(degrees) == world_size]


def predict(model: Transformer, global_batch: int, name: str, mesh: dict,
            microbatches: int = 2) -> dict:
    """Per-rank bytes (``params``, ``grads``, ``optimizer``, ``activations``, ``total``) of
    layout ``name`` on the grid ``mesh``, for the lessons' runs (fp32, AdamW, no dropout)."""
    dims, zero_stage = layouts()[name]
    dp, tp, pp = (mesh.get(d, 1) for d in ("dp", "tp", "pp"))
    m = microbatches if pp > 1 else 1
    return per_device_memory(model, micro_batch=max(1, global_batch // (dp * m)),
                             zero_stage=zero_stage, dp=dp, tp=tp, pp=pp, precision="fp32",
                             convention="fp32-adamw", dropout=False, microbatches=m)


def predict_layouts(model: Transformer, global_batch: int, world_size: int,
                    capacity: float | None = None, microbatches: int = 2) -> list[dict]:
    """One row per layout and grid of ``world_size`` ranks that the model can be cut into:
    ``layout``, ``mesh``, the predicted bytes, and ``fits`` (None without a capacity)."""
    rows = []
    for name, (dims, _) in layouts().items():
        for mesh in grids(world_size, dims):
            try:
                bytes_ = predict(model, global_batch, name, mesh, microbatches)
            except ValueError:      # e.g. more stages than layers, heads that do not split
                continue
            fits = None if capacity is None else bytes_["total"] <= HEADROOM * capacity
            rows.append({"layout": name, "mesh": mesh, **bytes_, "fits": fits})
    return rows


def pick_layout(rows: list[dict]) -> dict | None:
    """The first row that fits (rows come simplest first), or None if none does."""
    return next((row for row in rows if row["fits"]), None)
