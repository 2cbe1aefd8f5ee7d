"""The models lesson 03b's exercise wraps with the learner's function: not the learner's own, so a
wrapping that names the lesson's classes cannot pass. Each has what the lesson's model has, a
frozen layer and an embedding tied to the output head, and repeated blocks kept in an
``nn.Sequential`` or an ``nn.ModuleList``, of a block class the lesson never shows.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class Residual(nn.Module):
    """x + W2 relu(W1 norm(x))."""

    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.inner = nn.Linear(width, 3 * width)
        self.outer = nn.Linear(3 * width, width)

    def forward(self, x):
        return x + self.outer(torch.relu(self.inner(self.norm(x))))


class Gated(nn.Module):
    """x + down(silu(gate(x)) * up(x)), a SwiGLU-like block with an RMS-style scale."""

    def __init__(self, width: int):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(width))
        self.gate = nn.Linear(width, 2 * width, bias=False)
        self.up = nn.Linear(width, 2 * width, bias=False)
        self.down = nn.Linear(2 * width, width, bias=False)

    def forward(self, x):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.scale
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class SequentialStack(nn.Module):
    """Embedding (tied to the head), a frozen layer, ``depth`` Residual blocks in a Sequential."""

    def __init__(self, vocab: int, width: int = 32, depth: int = 3):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        nn.init.normal_(self.embed.weight, std=width ** -0.5)
        self.lookup = nn.Linear(width, width)
        self.lookup.requires_grad_(False)          # frozen
        self.layers = nn.Sequential(*(Residual(width) for _ in range(depth)))
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight       # tied

    def forward(self, ids):
        x = self.embed(ids)
        x = x + torch.tanh(self.lookup(x))
        return self.head(self.layers(x))


class ListStack(nn.Module):
    """Embedding (tied to the head), ``depth`` Gated blocks in a ModuleList, the first frozen."""

    def __init__(self, vocab: int, width: int = 40, depth: int = 3):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        nn.init.normal_(self.tokens.weight, std=width ** -0.5)
        self.stages = nn.ModuleList(Gated(width) for _ in range(depth))
        self.stages[0].requires_grad_(False)       # a frozen block
        self.out = nn.Linear(width, vocab, bias=False)
        self.out.weight = self.tokens.weight       # tied

    def forward(self, ids):
        x = self.tokens(ids)
        for stage in self.stages:
            x = stage(x)
        return self.out(x)


CHECKED_MODELS = {"SequentialStack": SequentialStack, "ListStack": ListStack}
# where each model keeps its repeated blocks: the checker asks that none of their trainable
# parameters is left to the root's unit, which stays gathered for the whole forward
BLOCK_CONTAINERS = {"SequentialStack": "layers", "ListStack": "stages"}
