"""The tiny GPT as built here, held as each strategy of :mod:`gpututor.parallel` holds it.

The general formulas in ``memory.py`` describe a transformer in the abstract; this module
counts what *our* implementation (fp32, no dropout, attention that keeps its full T x T scores)
keeps on a rank, predicting what the worker's live-tensor probe measures, so the lessons can
predict a run's bytes before it runs and then measure them. What it needs to know about a
strategy, the strategy says itself: its ZeRO stage and its ``memory_layout``
(``gpututor.parallel.base.MemoryLayout``); :func:`as_built` lists those that say it.
``tests/plan/test_plan.py`` checks the prediction against the memory probe.
"""
from __future__ import annotations

from .. import checks
from ..formulas import activation_bytes_per_layer, block_params, optimizer_state_bytes


def as_built() -> dict:
    """Name -> strategy, for every registered strategy that says how it holds the tiny GPT
    (``Strategy.memory_layout``), in registry order: the ones this module can predict."""
    from ..parallel import STRATEGIES
    return {name: s for name, s in STRATEGIES.items() if s.memory_layout is not None}


def tiny_gpt_activation_layer(cfg, batch: int, seq_len: int, tp: int = 1) -> float:
    """Bytes one block of :class:`gpututor.models.GPT` keeps for backward (fp32, no dropout).

    Korthikanti's count (``gpututor.formulas.activation_bytes_per_layer``) with 4-byte values
    and no dropout: ``16·b·s·h`` values, of which 4 stay whole under tensor parallelism (the two
    layer-norm inputs, the QKV and MLP inputs) and 12 are split (Q, K, V, the projection input,
    GELU input and output), plus the softmax output ``a·b·s²`` (split by heads). What our code
    adds: layer-norm mean and 1/std (``2 x 2·b·s`` fp32) and the inverted causal mask that
    ``masked_fill`` keeps (``s²`` bools).
    """
    korthikanti = activation_bytes_per_layer(seq_len, batch, cfg.d_model, cfg.n_head, tp,
                                              bytes_per_value=4, dropout=False)
    return korthikanti + 16 * batch * seq_len + seq_len ** 2


def tiny_gpt_head_activations(cfg, batch: int, seq_len: int) -> int:
    """What the final norm, LM head and loss keep: the norm's input, output and statistics, the
    log-softmax output (``b·s·V`` fp32), the targets (the probe sees them when the loss
    flattens them: ``b·s`` int64), the loss scalars and the position indices."""
    bs = batch * seq_len
    return 4 * (2 * bs * cfg.d_model + bs * cfg.vocab_size) + 8 * bs + 8 * bs + 8 + 8 * seq_len


def tiny_gpt_memory(cfg, batch: int, seq_len: int, strategy: str = "single",
                    world_size: int = 1, checkpointing: bool = False,
                    optimizer: str = "adamw", microbatches: int = 4) -> dict[str, float]:
    """Predict one rank's memory for the tiny GPT as the worker measures it (fp32, CPU probe).

    Returns ``params``, ``grads``, ``optimizer`` (as ``state_bytes`` reports them after a step),
    ``activations`` (what forward leaves alive, the probe's ``forward_end``) and ``peak`` (the
    probe's peak of live tensors during one step, rank 0). ``batch`` is the global batch.

    Where the peak is: at the top of backward, in the last block's MLP output projection. Every
    block's activations are still alive (the top block's recomputed, with checkpointing), plus
    the gradients of the MLP hidden layer (``4·b·s·h``) and of the block output (``b·s·h``),
    plus the gradients computed so far (tied head/embedding and the MLP output projection). The
    other candidate, the optimizer step (all gradients, no activations), is checked too.
    """
    known = as_built()
    checks.choice("strategy", strategy, known)
    layout, stage = known[strategy].memory_layout, known[strategy].zero_stage
    n, L, h, V = world_size, cfg.n_layer, cfg.d_model, cfg.vocab_size
    block = block_params(h, biases=True)             # one block's parameters (weights + biases)
    root = V * h + cfg.block_size * h + 2 * h         # embeddings + final norm (head is tied)
    N = L * block + root
    n_tensors = 12 * L + 4
    state = optimizer_state_bytes(optimizer)          # momentum, or Adam m and v (fp32)
    dp = 1 if (layout.tensor_parallel or layout.pipeline) else n
    b = batch // dp
    if layout.pipeline:
        return _tiny_gpt_pipeline(cfg, b, seq_len, n, checkpointing, state, microbatches)
    tp = n if layout.tensor_parallel else 1
    mask = L * cfg.block_size ** 2                    # the causal-mask buffers (bool)
    act_layer = tiny_gpt_activation_layer(cfg, b, seq_len, tp)
    bsh4 = 4 * b * seq_len * h
    if tp > 1:  # the blocks' big matrices are split; embeddings, norms, row biases replicated
        split = block_params(h) + 3 * h + 4 * h       # every weight; qkv and fc biases
        N = N - L * split + L * split / tp
    shard = N / n if stage else N
    params = 4 * (shard if stage >= 3 else N)
    tensors = n_tensors if layout.per_tensor_state else L + 1
    steps = 4 * tensors * (optimizer != "sgd")        # AdamW's step counters, 4 bytes each
    optimizer_bytes = state * (shard if stage >= 1 else N) + steps
    grads_kept = 4 * (shard if stage >= 2 else N)
    resident = params + mask + optimizer_bytes
    if layout.grad_buffers:
        resident += 4 * N
    if layout.bucket_copy:
        resident += 4 * N
    if layout.gathered_root:
        resident += 4 * root
    resident += layout.gathered_blocks * 4 * block
    transient = bsh4 * (1 + 4 / tp)                   # grads of the block output and MLP hidden
    # grads of the tied head and of this block's MLP output projection, just computed (zero1
    # adds them into its buffers, but each exists on its own first)
    current = 4 * (V * h + 4 * h * h / tp + h)
    done = 0 if layout.grad_buffers else 4 * block * (1 / n if stage >= 2 else 1)
    if tp > 1:
        done = 4 * (block - split + split / tp)
    backward_peak = 0
    for k in range(L - 1, -1, -1):   # the top of block k's backward; blocks above it are done
        alive = (k + 1) * act_layer if not checkpointing else (k + 1) * bsh4 + act_layer - bsh4
        backward_peak = max(backward_peak, resident + alive + 8 * seq_len + transient + current
                            + (L - 1 - k) * done)
    activations = (L * act_layer if not checkpointing else L * bsh4) \
        + tiny_gpt_head_activations(cfg, b, seq_len)
    # the first op of backward: everything forward kept (but the targets), and the gradients
    # of the log-softmax output and input (b·s·V fp32 each); wins when the MLP is split (tp)
    loss_peak = resident + activations - 8 * b * seq_len - 4 + 2 * 4 * b * seq_len * V
    largest = max(4 * h * h / tp, cfg.block_size * h, V * h)   # AdamW's temporaries: 2 of these
    optimizer_peak = resident + grads_kept * (not layout.grad_buffers) + 2 * 4 * largest
    return {"params": params, "grads": grads_kept, "optimizer": optimizer_bytes,
            "activations": activations, "peak": max(backward_peak, loss_peak, optimizer_peak)}


def _tiny_gpt_pipeline(cfg, batch: int, seq_len: int, stages: int, checkpointing: bool,
                       state: int, m: int) -> dict[str, float]:
    """Rank 0 = the first stage: its blocks and the embeddings. With 1F1B it keeps at most
    ``min(p, m)`` micro-batches' activations (each also keeps its output, to send and to run
    backward from). Its peak is in a steady-state backward: those activations, the stage's
    gradients (the earlier micro-batches made them), the received output gradient and the
    backward's own temporaries. (The probe's ``activations`` for a pipeline run is what is alive
    when the whole schedule ends, not comparable: None here.)"""
    L, h, V = cfg.n_layer, cfg.d_model, cfg.vocab_size
    per, extra = divmod(L, stages)
    layers = per + (extra > 0)
    N = layers * block_params(h, biases=True) + V * h + cfg.block_size * h
    micro = batch // m
    in_flight = min(stages, m)
    bsh4 = 4 * micro * seq_len * h
    act_layer = tiny_gpt_activation_layer(cfg, micro, seq_len)
    per_micro = (layers * act_layer if not checkpointing else layers * bsh4) + bsh4
    params, optimizer_bytes = 4 * N, state * N + 4 * (12 * layers + 2)   # + step counters
    resident = params + layers * cfg.block_size ** 2 + optimizer_bytes
    extra_layer = 0 if not checkpointing else act_layer - bsh4   # the recomputed block
    peak = resident + in_flight * per_micro + extra_layer + 4 * N + 5 * bsh4 + bsh4 \
        + 4 * (4 * h * h + h)
    return {"params": params, "grads": 4 * N, "optimizer": optimizer_bytes,
            "activations": None, "peak": peak}
