"""The models' sizes a run may name (``RunSpec(model=..., model_size=...)``): one frozen config
per size; the modules built from them are in ``gpututor/models.py`` and ``gpututor/moe.py``.

Kept apart from ``models.py``, which imports torch, so that a spec can be checked (and
``import gpututor`` stay light) without it.
"""
from __future__ import annotations

from dataclasses import dataclass

# the vocabulary the size tables carry: a placeholder (the English corpus has 96 characters).
# A run's model gets its own corpus's from models.config_of (data.vocab_size is its home).
PLACEHOLDER_VOCAB = 96


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = PLACEHOLDER_VOCAB
    block_size: int = 256     # longest sequence the position table holds
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 128
    dropout: float = 0.0      # 0 keeps runs deterministic, so parallel runs can be compared
    attention: str = "naive"  # "naive" (scores materialised) or "sdpa" (torch's fused kernel)


@dataclass(frozen=True)
class MoEConfig(GPTConfig):
    """The GPT with a mixture of experts in place of each block's MLP (``gpututor/moe.py``)."""

    n_expert: int = 4             # expert MLPs per block (each as big as the GPT's MLP)
    top_k: int = 2                # experts each token goes to
    capacity_factor: float = 1.25  # slots per expert: ceil(factor · tokens · top_k / n_expert)
    aux_loss_coef: float = 0.01   # weight of the load-balancing loss (Switch Transformer's)


@dataclass(frozen=True)
class MLPConfig:
    vocab_size: int = PLACEHOLDER_VOCAB
    d_model: int = 64
    d_hidden: int = 256


MODEL_SIZES = {
    "gpt": {
        "tiny": GPTConfig(n_layer=2, n_head=2, d_model=96),      # ~0.25 M parameters
        "small": GPTConfig(n_layer=4, n_head=4, d_model=128),    # ~0.84 M
        "medium": GPTConfig(n_layer=6, n_head=6, d_model=192),   # ~2.7 M
        "large": GPTConfig(n_layer=8, n_head=8, d_model=256),    # ~6.4 M
    },
    "moe": {   # the GPT's sizes, 4 experts per block, each token to 2 of them
        "tiny": MoEConfig(n_layer=2, n_head=2, d_model=96),      # ~0.7 M parameters
        "small": MoEConfig(n_layer=4, n_head=4, d_model=128),    # ~2.4 M
    },
    "mlp": {
        "small": MLPConfig(d_model=64, d_hidden=256),
        "large": MLPConfig(d_model=256, d_hidden=1024),
    },
}
DEFAULT_SIZES = {"gpt": "small", "moe": "small", "mlp": "small"}
