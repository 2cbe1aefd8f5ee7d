"""Tensor parallel from scratch: Megatron-LM's column- and row-parallel layers.

Megatron-LM's layout [ref: shoeybi2019-mlp-split]. Every rank of the tensor-parallel group sees the
*same* batch and holds a slice of each big weight matrix. With ``Y = X A`` then ``Z = Y B`` (an
MLP, or attention's qkv then proj):

    A split by columns, A = [A_0 | A_1]:  rank r computes Y_r = X A_r        ColumnParallelLinear
    B split by rows,    B = [B_0 ; B_1]:  rank r computes Y_r B_r, and
                                          Z = Σ_r Y_r B_r (an all-reduce)    RowParallelLinear

The activation between them (``Y_r``, e.g. after the GELU, or the heads of attention) never
leaves its rank. Two small operators put the communication where it belongs
(``tp_communications.py``, beside this module) [ref: shoeybi2019-f-g]:

    f  forward: identity      backward: all-reduce    (in front of a column-parallel layer)
    g  forward: all-reduce    backward: identity      (behind a row-parallel layer)

So each MLP and each attention costs one all-reduce of the activations ``B x T x d`` in forward
(``g``) and one in backward (``f``): four per transformer block and step. nn.Linear stores
``A`` transposed (``weight`` is ``out x in``), so "columns of A" are rows of ``weight``.

Attention is split by heads: rank r of n holds heads ``r*h/n .. (r+1)*h/n`` of q, k and v (the
rows of the fused ``qkv`` weight that belong to them) and the matching input columns of
``proj``. Heads never look at each other, so each rank runs ordinary attention on its heads.

Layer norms, dropout and the residual additions are replicated, as in Megatron-LM: every rank
computes them on the same data [ref: shoeybi2019-replicated]. The embeddings and the head are
replicated *here* too, while Megatron-LM splits both by vocabulary [ref: shoeybi2019-vocab]; so
every replicated gradient comes out the same on every rank and no gradient sync is needed. Below the layers: the tiny GPT's blocks made tensor
parallel, and the strategy ``tp`` that does it to every rank's model. The production version is
``dtensor.py``.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from ... import checks
from ...measure.timing import CollectiveTimer
from ...models import MLP, CausalSelfAttention, causal_attention
from ..base import MemoryLayout, Strategy
from ..link import LINK_ALLOWED, LINK_OPTIONS
from ..mesh import degree_field, degree_of, dim_group
from ..pieces import Piece, default_pieces, run_boxes
from .sequence import sequence_parallelize, sync_sequence_parallel_gradients
# f and g live in tp_communications.py (lesson 04 prints them from there); re-exported here
from .tp_communications import (CopyToTensorParallelRegion,  # noqa: F401
                                ReduceFromTensorParallelRegion, TensorParallelGroup,
                                copy_to_tensor_parallel_region, reduce_from_tensor_parallel_region)


# ---- the two parallel layers -------------------------------------------------------------------

def owned_indices(features: int, tp: TensorParallelGroup, parts: int = 1) -> torch.Tensor:
    """Which of ``features`` rank ``tp.rank`` owns: its contiguous 1/n. With ``parts=3`` (fused
    q, k, v) each third is split on its own, so a rank gets the same heads' rows of q, k and v."""
    size = features // parts
    local = size // tp.size
    return torch.cat([torch.arange(p * size + tp.rank * local, p * size + (tp.rank + 1) * local)
                      for p in range(parts)])


class ColumnParallelLinear(nn.Module):
    """``Y_r = f(X) A_r + b_r``: this rank's slice of the output features of a Linear."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None,
                 tp: TensorParallelGroup, parts: int = 1):
        super().__init__()
        self.tp, self.parts = tp, parts
        self.weight = nn.Parameter(weight)
        self.bias = nn.Parameter(bias) if bias is not None else None

    @classmethod
    def from_dense(cls, dense: nn.Linear, tp: TensorParallelGroup, parts: int = 1):
        """This rank's rows of ``dense``: the very numbers one process would use (on ``meta``:
        just the shapes; ``parallel.meta.materialize`` fills in ``init_rows`` later)."""
        owned = owned_indices(dense.out_features, tp, parts)
        rows = owned.to(dense.weight.device)
        bias = dense.bias.detach()[rows].clone() if dense.bias is not None else None
        layer = cls(dense.weight.detach()[rows].clone(), bias, tp, parts)
        layer.init_rows, layer.full_out_features = owned, dense.out_features
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(copy_to_tensor_parallel_region(x, self.tp), self.weight, self.bias)

    def full_state(self, grad: bool = False) -> dict[str, torch.Tensor]:
        """The dense layer's weight and bias (or their gradients), gathered from all ranks
        (every rank must call)."""
        pick = (lambda p: p.grad) if grad else (lambda p: p)
        return {name: _gather(pick(p), self.tp, dim=0, parts=self.parts)
                for name, p in (("weight", self.weight), ("bias", self.bias)) if p is not None}


class RowParallelLinear(nn.Module):
    """``Z = g(Y_r B_r) + b``: this rank's slice of the *input* features; the partial products
    of all ranks are summed by ``g``, then the (replicated) bias is added once."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, tp: TensorParallelGroup):
        super().__init__()
        self.tp = tp
        self.weight = nn.Parameter(weight)
        self.bias = nn.Parameter(bias) if bias is not None else None

    @classmethod
    def from_dense(cls, dense: nn.Linear, tp: TensorParallelGroup):
        """This rank's columns of ``dense`` (and the whole bias)."""
        owned = owned_indices(dense.in_features, tp)
        cols = owned.to(dense.weight.device)
        bias = dense.bias.detach().clone() if dense.bias is not None else None
        layer = cls(dense.weight.detach()[:, cols].clone(), bias, tp)
        layer.init_cols, layer.full_in_features = owned, dense.in_features
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = reduce_from_tensor_parallel_region(F.linear(x, self.weight), self.tp)
        return out + self.bias if self.bias is not None else out

    def full_state(self, grad: bool = False) -> dict[str, torch.Tensor]:
        pick = (lambda p: p.grad) if grad else (lambda p: p)
        full = {"weight": _gather(pick(self.weight), self.tp, dim=1)}
        if self.bias is not None:   # replicated: every rank holds all of it
            full["bias"] = pick(self.bias).detach()
        return full


def _gather(t: torch.Tensor, tp: TensorParallelGroup, dim: int, parts: int = 1) -> torch.Tensor:
    """Concatenate every rank's slice along ``dim`` (part by part for fused q, k, v)."""
    pieces = [torch.empty_like(t) for _ in range(tp.size)]
    dist.all_gather(pieces, t.detach().contiguous(), group=tp.group)
    split = [p.chunk(parts, dim=dim) for p in pieces]
    return torch.cat([split[r][k] for k in range(parts) for r in range(tp.size)], dim=dim)


# ---- the tiny GPT's blocks, made tensor parallel -----------------------------------------------

class TensorParallelAttention(nn.Module):
    """Causal self-attention with this rank's heads: ``qkv`` column-parallel (by heads), ``proj``
    row-parallel. One ``f`` (in ``qkv``) and one ``g`` (in ``proj``)."""

    def __init__(self, dense: CausalSelfAttention, tp: TensorParallelGroup):
        super().__init__()
        self.head_dim = dense.qkv.in_features // dense.n_head
        self.n_head = dense.n_head // tp.size      # heads on this rank
        self.qkv = ColumnParallelLinear.from_dense(dense.qkv, tp, parts=3)
        self.proj = RowParallelLinear.from_dense(dense.proj, tp)
        self.register_buffer("mask", dense.mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)     # this rank's heads of q, k and v
        return self.proj(causal_attention(q, k, v, self.head_dim, self.mask))


class TensorParallelMLP(nn.Module):
    """``fc`` column-parallel, GELU on this rank's hidden units, ``proj`` row-parallel."""

    def __init__(self, dense: MLP, tp: TensorParallelGroup):
        super().__init__()
        self.fc = ColumnParallelLinear.from_dense(dense.fc, tp)
        self.proj = RowParallelLinear.from_dense(dense.proj, tp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))


def parallelize(model: nn.Module, tp: TensorParallelGroup) -> nn.Module:
    """Replace, in place, every attention and MLP of ``model`` by its tensor-parallel version
    (parameter names stay the same; each holds this rank's slice)."""
    blocks = getattr(model, "blocks", [])
    for block in (blocks.values() if isinstance(blocks, nn.ModuleDict) else blocks):
        block.attn = TensorParallelAttention(block.attn, tp)
        block.mlp = TensorParallelMLP(block.mlp, tp)
    if isinstance(getattr(model, "mlp", None), MLP):   # the char MLP model
        model.mlp = TensorParallelMLP(model.mlp, tp)
    return model


def gather_full_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The dense model's state dict: sliced layers gathered from all ranks (a collective)."""
    state = {k: v.detach() for k, v in model.state_dict().items()}
    for name, module in model.named_modules():
        if isinstance(module, (ColumnParallelLinear, RowParallelLinear)):
            for key, full in module.full_state().items():
                state[f"{name}.{key}"] = full
    return state


def megatron_pieces(model: nn.Module, aliases: dict) -> list:
    """A column-parallel layer holds runs of the dense layer's rows (its weight and bias), a
    row-parallel one runs of its columns (its bias whole); every other parameter is whole."""
    split = {}
    for path, module in model.named_modules():
        if isinstance(module, ColumnParallelLinear):
            rows = (module.full_out_features, module.weight.shape[1])
            split[id(module.weight)] = (rows, 0, module.init_rows)
            if module.bias is not None:
                split[id(module.bias)] = (rows[:1], 0, module.init_rows)
        elif isinstance(module, RowParallelLinear):
            split[id(module.weight)] = ((module.weight.shape[0], module.full_in_features), 1,
                                        module.init_cols)
    pieces = []
    for piece in default_pieces(model, aliases):
        if id(piece.param) in split:
            shape, dim, owned = split[id(piece.param)]
            piece = Piece(piece.param, run_boxes(piece.boxes[0].name, shape, dim, owned))
        pieces.append(piece)
    return pieces


# ---- the strategy ------------------------------------------------------------------------------

def check_degree(spec, strategy: str) -> None:
    """Raise ``ValueError`` unless the heads and hidden sizes split evenly over the TP ranks."""
    cfg = spec.model_config
    n, named = degree_of(spec, "tp")
    if spec.model == "gpt":
        sizes = {"attention heads (n_head)": cfg.n_head, "MLP hidden units": 4 * cfg.d_model}
    else:
        sizes = {"MLP hidden units (d_hidden)": cfg.d_hidden}
    for what, count in sizes.items():
        if count % n:
            allowed = [d for d in range(1, min(256, *sizes.values()) + 1)
                       if all(c % d == 0 for c in sizes.values())]
            raise checks.InvalidValue(
                degree_field(spec, "tp"), n, "tp degrees " + ", ".join(map(str, allowed)),
                why=f"for strategy={strategy!r} with model={spec.model!r} model_size="
                    f"{spec.resolved_model_size!r} (its {count} {what} must split evenly over "
                    "the ranks)")


def tensor_parallel_collectives(strategy, spec, model) -> list:
    """Four all-reduces of the activations per block and step: two in forward (after attention
    and after the MLP), two in backward [ref: shoeybi2019-allreduces]; each of a
    rank's ``b·s·h`` values, ``b`` its data-parallel share of the batch."""
    if spec.world_size == 1:
        return []
    cfg = model.cfg
    batch = spec.batch_size // strategy.data_parallel_size(spec)
    act = batch * spec.seq_len * cfg.d_model * next(model.parameters()).element_size()
    return [("all_reduce", act)] * (4 * cfg.n_layer)


class TensorParallel(Strategy):
    """The strategy ``tp``: each rank's model made tensor parallel by :func:`parallelize`."""

    name = "tp"
    dim = "tp"
    builds_on_meta = True   # each rank makes only its slices (parallel/meta.py)
    description = "from scratch: Megatron column/row parallel layers, heads split over ranks"
    # an emulated link delays every all-reduce; sequence_parallel splits the norms' regions
    options = {**LINK_OPTIONS, "sequence_parallel": checks.is_bool}
    allowed = {**LINK_ALLOWED, "sequence_parallel": "True or False"}
    memory_layout = MemoryLayout(tensor_parallel=True,
                                 note="Megatron split of attention and MLP; rest replicated")
    planned = True

    def step_collectives(self, spec, model):
        return tensor_parallel_collectives(self, spec, model)

    def validate(self, spec) -> None:
        super().validate(spec)
        check_degree(spec, self.name)
        if spec.option("sequence_parallel"):
            tp, named = degree_of(spec, "tp")
            if spec.model != "gpt" or spec.seq_len % tp:
                raise checks.InvalidValue("option sequence_parallel", True, "the GPT with a "
                                          "seq_len the tp degree divides",
                                          why=f"with model={spec.model!r}, seq_len="
                                              f"{spec.seq_len} and {named}")
            if spec.mesh_shape.get("pp", 1) > 1:
                raise checks.InvalidValue("option sequence_parallel", True, "layouts without pp",
                                          why="with a pp dim (stages pass whole sequences here)")

    # every TP rank sees its data-parallel slice of the batch whole: the ranks split the
    # layers, not the data (Strategy.data_parallel_size reads the grid's dp degree: 1 here)

    def wrap(self, model, ctx):
        timer = CollectiveTimer(ctx.comm, ctx.device)
        tp = dim_group(ctx, "tp")
        model.tp = TensorParallelGroup(tp.rank, tp.size, tp.group, timer=timer, link=ctx.link)
        model = parallelize(model, model.tp)
        if ctx.spec.option("sequence_parallel", False):
            model = sequence_parallelize(model, model.tp)
        return model

    def sync_gradients(self, model, ctx) -> None:
        """Sequence parallel: sum the norms' (and row biases') gradients over the tp group."""
        if ctx.spec.option("sequence_parallel", False):
            inner = getattr(model, "module", model)
            sync_sequence_parallel_gradients(inner, inner.tp)

    def train_step(self, model, optimizer, micro_batches, ctx) -> float:
        loss = super().train_step(model, optimizer, micro_batches, ctx)
        model.tp.timer.flush()   # CUDA: read the timing events (a no-op on CPU)
        return loss

    def checkpoint_pieces(self, model, aliases):
        return megatron_pieces(model, aliases)

    def full_state_dict(self, model) -> dict:
        return gather_full_state(model)
