"""What lesson 04's model keeps whole on every tensor-parallel rank by vocabulary: the token
embedding and the head tied to it, counted on the model (parameters) and on one forward pass
(FLOPs), to weigh against splitting them by vocabulary as Megatron-LM does
[ref: shoeybi2019-vocab]."""
from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from ...config import RunSpec
from ...models import build_model, count_parameters


def vocabulary_share(spec: RunSpec, batch_size: int = 2) -> dict:
    """``spec``'s model: its vocabulary and width, the token embedding's parameters (the head
    shares them) against all of them, and the head's FLOPs against the whole forward pass of
    ``batch_size`` sequences of ``spec.seq_len`` tokens (counted by ``FlopCounterMode``)."""
    model = build_model(spec)
    cfg = model.cfg
    tokens = torch.zeros(batch_size, spec.seq_len, dtype=torch.long)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(tokens)
    counts = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    head = next((n for name, n in counts.items() if name.endswith(".head")), 0)
    embedding = model.tok_emb.weight.numel()
    params = count_parameters(model)
    return {"vocab_size": cfg.vocab_size, "d_model": cfg.d_model, "embedding_params": embedding,
            "params": params, "embedding_share": embedding / params,
            "head_flops": head, "forward_flops": counts["Global"],
            "head_flop_share": head / counts["Global"]}
