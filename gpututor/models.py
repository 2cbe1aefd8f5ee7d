"""The models the lessons train: a tiny GPT (decoder-only transformer) and a small MLP.

Every parameter's first value depends only on the run's seed and the parameter's *name*
(:func:`initial_value`): so every rank builds the same weights, and a rank that holds only a
slice of a layer (sharding, tensor or pipeline parallel) can make just its slice, from a model
built on PyTorch's ``meta`` device (shapes, no memory), without the whole model ever existing
(``gpututor.parallel.meta``). Attention is written with plain matmuls (not
``scaled_dot_product_attention``) so PyTorch's FLOP counter sees it.
"""
from __future__ import annotations

import dataclasses
import math
import zlib
from contextlib import nullcontext

import torch
import torch.nn as nn
import torch.nn.functional as F
from functools import partial

from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from . import checks
from .model_sizes import GPTConfig, MLPConfig
from .data import vocab_size
from .formulas import RECOMPUTE
from .moe import MoELayer


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head, self.attention = cfg.n_head, cfg.attention
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).split(x.shape[-1], dim=2)
        if self.recompute_core and self.training:
            # selective recomputation (Korthikanti et al. 2022, §5): keep q, k, v and the output,
            # recompute the attention core (QKᵀ, mask, softmax, ·V) in backward
            # [ref: korthikanti2022-selective]
            return self.proj(checkpoint(self.core, q, k, v, use_reentrant=False))
        return self.proj(self.core(q, k, v))

    recompute_core = False   # set by GPT for recompute="selective"

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Attention from the projected ``q``, ``k``, ``v`` (``B x T x C``) to ``B x T x C``."""
        B, T, C = q.shape
        if self.attention == "sdpa":   # torch's fused kernel: no T x T scores kept
            q, k, v = (t.view(B, T, self.n_head, -1).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return y.transpose(1, 2).reshape(B, T, C)
        return causal_attention(q, k, v, C // self.n_head, self.mask)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, head_dim: int,
                     mask: torch.Tensor) -> torch.Tensor:
    """Causal attention over however many heads ``q``, ``k``, ``v`` (``B x T x heads·head_dim``)
    hold (all of them, or one tensor-parallel rank's share). Returns ``B x T x heads·head_dim``."""
    B, T, _ = q.shape
    q, k, v = (t.view(B, T, -1, head_dim).transpose(1, 2) for t in (q, k, v))
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
    scores = scores.masked_fill(~mask[:T, :T], float("-inf"))
    y = F.softmax(scores, dim=-1) @ v
    return y.transpose(1, 2).reshape(B, T, -1)


class MLP(nn.Module):
    def __init__(self, d_model: int, d_hidden: int):
        super().__init__()
        self.fc = nn.Linear(d_model, d_hidden)
        self.proj = nn.Linear(d_hidden, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg.d_model, 4 * cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A GPT-2-shaped decoder: token + position embeddings, ``n_layer`` blocks, tied LM head."""

    def __init__(self, cfg: GPTConfig, activation_checkpointing: bool = False, seed: int = 0,
                 recompute: str | None = None):
        super().__init__()
        self.cfg = cfg
        self.activation_checkpointing = activation_checkpointing
        recompute = recompute or ("full" if activation_checkpointing else "none")
        checks.choice("recompute", recompute, RECOMPUTE + MODEL_ONLY_RECOMPUTE)
        self.recompute = recompute
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        for block in self.blocks:
            block.attn.recompute_core = recompute == "selective"
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight  # weight tying, as in GPT-2
        initialize(self, seed)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device))
        for block in self.blocks:
            if self.recompute == "full" and self.training:
                # Keep only the block's input; recompute its insides during backward.
                x = checkpoint(block, x, use_reentrant=False)
            elif self.recompute == "matmul-outputs" and self.training:
                # Keep the matmuls' outputs; recompute the cheap rest (softmax, GELU, norms).
                x = checkpoint(block, x, use_reentrant=False, context_fn=partial(
                    create_selective_checkpoint_contexts, save_matmul_outputs))
            else:
                x = block(x)
        return self.head(self.ln_f(x))


# a policy the model runs (lesson 01b compares it) but the planner does not price
MODEL_ONLY_RECOMPUTE = ("matmul-outputs",)
MATMULS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default}


def save_matmul_outputs(ctx, op, *args, **kwargs):
    """The ``"matmul-outputs"`` policy (torch's selective checkpoint contexts): every matmul's
    output (``mm``, ``addmm``, ``bmm``) is saved for backward, the cheap elementwise ops
    (softmax, GELU, layer norms) are recomputed there. Matmuls hold most of a block's FLOPs, so
    recomputing the rest costs little time; but saving ``bmm`` keeps the ``T x T`` scores
    ``QKᵀ``, the very term that ``"selective"`` (Korthikanti et al. 2022, §5, which recomputes
    the attention core: ``QKᵀ``, softmax, dropout, ``·V``) exists to drop.
    [ref: korthikanti2022-selective]"""
    return CheckpointPolicy.MUST_SAVE if op in MATMULS else CheckpointPolicy.PREFER_RECOMPUTE


class CharMLP(nn.Module):
    """Predicts the next character from the current one: embedding, one hidden layer, logits."""

    def __init__(self, cfg: MLPConfig, seed: int = 0):
        super().__init__()
        self.cfg = cfg
        self.emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.mlp = MLP(cfg.d_model, cfg.d_hidden)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size)
        initialize(self, seed)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(self.mlp(self.emb(idx)))


INIT_STD = 0.02   # GPT-2's: weights of every Linear and Embedding ~ N(0, 0.02²)


def init_kind(module: nn.Module, param_name: str) -> str:
    """How a parameter starts: ``"normal"`` (Linear and Embedding weights), ``"zeros"``
    (biases), ``"ones"`` (a LayerNorm's scale)."""
    if isinstance(module, nn.LayerNorm):
        return "ones" if param_name == "weight" else "zeros"
    return "normal" if param_name == "weight" else "zeros"


def initial_value(name: str, shape, kind: str, seed: int) -> torch.Tensor:
    """The first value of the parameter called ``name``, whole, on CPU: drawn from a generator
    seeded by the run's ``seed`` and the name, so any process can make it alone, in any order."""
    if kind == "ones":
        return torch.ones(shape)
    if kind == "zeros":
        return torch.zeros(shape)
    gen = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
    return torch.randn(shape, generator=gen) * INIT_STD


def initialize(model: nn.Module, seed: int) -> None:
    """Give every parameter of ``model`` its :func:`initial_value` (nothing to do on ``meta``)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.is_meta:
                continue
            owner, _, pname = name.rpartition(".")
            kind = init_kind(model.get_submodule(owner), pname)
            p.copy_(initial_value(name, p.shape, kind, seed))


def model_config(spec, vocab_size: int):
    """The config dataclass of ``spec``'s model, with the corpus' vocabulary size (and, for the
    GPT, the spec's way of computing attention)."""
    extra = {"attention": spec.attention} if spec.model in ("gpt", "moe") else {}
    return dataclasses.replace(spec.model_config, vocab_size=vocab_size, **extra)


def config_of(spec):
    """:func:`model_config` of ``spec`` with its own corpus's vocabulary: the one way to get the
    shape a run of ``spec`` trains (``vocab_size`` of ``spec.corpus``, never another corpus's)."""
    return model_config(spec, vocab_size(spec.corpus))


def build_model(spec, meta: bool = False, recompute: str | None = None) -> nn.Module:
    """The exact ``nn.Module`` a run of ``spec`` trains, built on CPU from ``spec.seed``.

    ``meta=True`` builds it on the ``meta`` device: every shape, no memory, no values. A
    strategy that keeps only part of the model then makes just that part
    (``gpututor.parallel.meta.materialize``), with the values it would have had here.
    ``recompute`` picks the GPT's recomputation policy (``gpututor.formulas.RECOMPUTE``; default: the
    spec's ``activation_checkpointing``)."""
    cfg = config_of(spec)
    with torch.device("meta") if meta else nullcontext():
        if spec.model == "gpt":
            return GPT(cfg, activation_checkpointing=spec.activation_checkpointing,
                       seed=spec.seed, recompute=recompute)
        if spec.model == "moe":   # the GPT, each block's MLP replaced by a mixture of experts
            model = GPT(cfg, seed=spec.seed)
            for block in model.blocks:
                block.mlp = MoELayer(cfg, make_expert=partial(MLP, cfg.d_model, 4 * cfg.d_model))
            initialize(model, spec.seed)
            return model
        return CharMLP(cfg, seed=spec.seed)


def count_parameters(model: nn.Module) -> int:
    """Number of distinct parameters (a tied weight counts once)."""
    return sum(p.numel() for p in model.parameters())
