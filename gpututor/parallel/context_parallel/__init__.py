"""Context parallel: the sequence split over the ranks of the ``cp`` dim, ring attention between.

    split.py              which positions each rank keeps: contiguous or zig-zag, and the
                          causal attention work that gives each rank (the load balance)
    cp_communications.py  the ring: send to the next rank, receive from the previous, metered
    ring_attention.py     ring attention from scratch [ref: liu2023-ring]: online-softmax merge
                          forward, FlashAttention-2's backward, dk/dv travelling home
    context_parallel.py   the strategy ``cp``: the GPT on this rank's tokens, ring attention
                          in every block, gradients averaged over the cp group
"""
from .context_parallel import (ContextParallel, ContextParallelGroup, ContextParallelLayout,
                               context_parallelize)
from .cp_communications import Ring
from .ring_attention import ring_attention
from .split import SPLITS, causal_work, ring_slowdown, ring_step_work, split_positions

__all__ = ["ContextParallel", "ContextParallelGroup", "ContextParallelLayout", "Ring", "SPLITS",
           "causal_work", "context_parallelize", "ring_attention", "ring_slowdown",
           "ring_step_work", "split_positions"]
