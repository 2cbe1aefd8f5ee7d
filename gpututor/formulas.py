"""The formulas the package shares, each written once: parameters, FLOPs, bytes, activations,
collectives, the pipeline bubble; the named lists they take (recomputation policies, bytes per
value) and the units tables and plots divide by (``MB``, ``HOUR``, ``DAY``).

Ground floor: nothing of gpututor but :mod:`gpututor.checks`, and no torch, so the worker's
meters, the planner, the emulated link, the calibration and the plots call the same function
(``tests/test_one_home.py`` fails when one of these formulas is written out anywhere else, by
its spelling and by what it computes: every name in :data:`FORMULAS`).

Symbols: ``N`` parameters, ``L`` layers, ``h`` width (``d_model``), ``s`` sequence length,
``n`` ranks, ``S`` bytes, ``α`` latency per message, ``B`` bandwidth (bytes per second) per rank
per direction.
"""
from __future__ import annotations

from . import checks

# ---- named lists ---------------------------------------------------------------------------------

RECOMPUTE = ("none", "selective", "full")     # activation recomputation policies
BYTES_PER_VALUE = {"fp32": 4, "bf16": 2, "fp16": 2}   # bytes of one number in each precision
# fp32 optimizer state per parameter: Adam keeps its momentum and variance (2 x 4 bytes, "adam"
# as the ZeRO paper names it, whose K = 12 adds the fp32 master copy to them
# [ref: rajbhandari2020-model-states]; "adamw" as PyTorch names it); SGD with momentum keeps
# one buffer
OPTIMIZER_STATE_BYTES = {"adam": 8, "adamw": 8, "sgd": 4}
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send")

# ---- units ---------------------------------------------------------------------------------------

MB = 1e6            # bytes in a megabyte, as in ``device_memory="48MB"`` (a MiB is 2**20)
HOUR = 3600.0       # seconds
DAY = 24 * HOUR


def bytes_per_value(precision: str) -> int:
    """4 for fp32, 2 for bf16 and fp16."""
    checks.choice("precision", precision, BYTES_PER_VALUE)
    return BYTES_PER_VALUE[precision]


def optimizer_state_bytes(optimizer: str) -> int:
    """fp32 bytes of optimizer state per parameter: 8 for Adam/AdamW, 4 for SGD with momentum."""
    checks.choice("optimizer", optimizer, OPTIMIZER_STATE_BYTES)
    return OPTIMIZER_STATE_BYTES[optimizer]


# ---- parameters ----------------------------------------------------------------------------------

def block_params(d_model: int, biases: bool = False) -> int:
    """One GPT block's parameters: ``12·h²`` weights (attention's Q, K, V and output projection
    4·h², the MLP's two 4h-wide matrices 8·h²: Kaplan et al. 2020, Table 1
    [ref: kaplan2020-params]); with ``biases``
    also ``13·h`` (Q, K, V and projection biases 4·h, the MLP's 4·h + h, two layer norms 4·h)."""
    return 12 * d_model * d_model + (13 * d_model if biases else 0)


def gpt_params(n_layer: int, d_model: int, vocab_size: int) -> int:
    """``12·L·h² + V·h``: the blocks' weights and a tied embedding (Kaplan et al. 2020
    [ref: kaplan2020-params])."""
    return n_layer * block_params(d_model) + vocab_size * d_model


# ---- FLOPs ---------------------------------------------------------------------------------------

def attention_flops_per_token(n_layer: int, seq_len: int, d_model: int, causal: bool = False
                              ) -> float:
    """Forward FLOPs per token of attention's two products, ``Q·Kᵀ`` and ``scores·V``.

    Over the full ``s×s`` square: ``2·2·L·s·h`` (PaLM, Chowdhery et al. 2022, Appendix B
    [ref: chowdhery2022-flops]; plain
    attention that masks after the product computes all of it). ``causal=True``: a kernel that
    skips the blocks the causal mask zeroes computes about half the square, ``2·L·s·h`` (the
    FLOPs count of FlashAttention-2, Dao 2023, §4.1, halves the causal case
    [ref: dao2023-causal])."""
    full = 2 * 2 * n_layer * seq_len * d_model
    return full / 2 if causal else full


def training_flops_per_token(matmul_params: float, n_layer: int = 0, seq_len: int = 0,
                             d_model: int = 0, recompute: str = "none", causal: bool = False
                             ) -> float:
    """FLOPs per trained token: ``6·N + 12·L·s·h`` (``6·N`` alone without attention; with
    ``causal`` attention's term is halved, :func:`attention_flops_per_token`).

    The forward is ``2·N`` (Kaplan et al. 2020, §2.1 [ref: kaplan2020-compute]) plus attention's
    ``4·L·s·h``; training
    is 3 x the forward (backward twice the forward). ``recompute`` counts work that runs but is
    not the model's: ``"full"`` runs the forward a second time (``8·N + 16·L·s·h``, the four
    passes of Narayanan et al. 2021's FLOPs appendix [ref: narayanan2021-flops], so 4/3 of the
    work); ``"selective"`` re-runs attention's scores only (``+ 4·L·s·h``, Korthikanti et al.
    2022, §5 [ref: korthikanti2022-selective]). With ``"none"`` these are the model's FLOPs, what
    MFU divides (PaLM, §4.1 and Appendix B [ref: chowdhery2022-mfu-defined]); with recomputation
    they are the hardware's, what HFU divides (Korthikanti et al. 2022, §6.3
    [ref: korthikanti2022-mfu-hfu]).
    """
    checks.choice("recompute", recompute, RECOMPUTE)
    attention = attention_flops_per_token(n_layer, seq_len, d_model, causal)
    passes = 4 if recompute == "full" else 3
    extra = attention if recompute == "selective" else 0
    return passes * (2 * matmul_params + attention) + extra


def flops_utilization(flops: float, seconds: float, peak_flops: float) -> float:
    """The share of a device's peak that ``flops`` in ``seconds`` reach: MFU when ``flops`` are
    the model's, HFU when they include recomputation (Korthikanti et al. 2022, §6.3
    [ref: korthikanti2022-mfu-hfu])."""
    checks.positive("seconds", seconds)
    checks.positive("peak_flops", peak_flops)
    return flops / (seconds * peak_flops)


# ---- activations ---------------------------------------------------------------------------------

def activation_bytes_per_layer(seq_len: int, micro_batch: int, d_model: int, n_head: int,
                               tp: int = 1, sequence_parallel: bool = False,
                               recompute: str = "none", bytes_per_value: int = 2,
                               dropout: bool = True, cp: int = 1) -> float:
    """Bytes one transformer layer keeps for backward, per device.

    Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", §4.1
    [ref: korthikanti2022-activations], §4.2 [ref: korthikanti2022-tp-sp] and Table 2
    [ref: korthikanti2022-table2], with
    s = sequence, b = micro-batch, h = width, a = heads, t = tensor-parallel degree, 16-bit
    values and dropout:

        no parallelism                        s·b·h·(34 + 5·a·s/h)
        tensor parallel                       s·b·h·(10 + 24/t + 5·a·s/(h·t))
        tensor + sequence parallel            s·b·h·(34/t + 5·a·s/(h·t))
        + selective recomputation             the 5·a·s/h term (attention scores) is dropped
        full recomputation                    2·s·b·h (only the layer's input is kept)

    The 34 is 16 values of s·b·h (attention: QKV input, Q, K, V, projection input = 5; MLP: input,
    GELU input and output 1 + 4 + 4 = 9; two layer-norm inputs = 2) at 2 bytes, plus two 1-byte
    dropout masks; 5·a·s/h is softmax output and dropout output (2 bytes each) plus the mask
    (1 byte) of the a·s·s scores. ``bytes_per_value`` and ``dropout`` make the same count for
    other cases (fp32: 4 bytes; no dropout: no masks and no dropout outputs). Of the 16, the
    layer-norm inputs and the QKV and MLP inputs (4 values) and the two masks stay whole under
    tensor parallelism without sequence parallelism: the 10 of ``10 + 24/t``.

    FlashAttention (Dao et al. 2022 [ref: dao2022-memory]) never stores the scores: for memory it
    is the same as
    ``recompute="selective"``.

    Context parallel (``cp``) splits the sequence: each of the cp ranks keeps the activations of
    its s/cp tokens, and the scores of its s/cp queries against all s keys, so every term is
    divided by cp (ring attention, Liu et al. 2023 [ref: liu2023-ring]; Megatron Core's context
    parallelism).
    """
    checks.choice("recompute", recompute, RECOMPUTE)
    for name, value in (("seq_len", seq_len), ("micro_batch", micro_batch),
                        ("d_model", d_model), ("n_head", n_head), ("tp", tp), ("cp", cp)):
        checks.integer(name, value)
    sbh = seq_len * micro_batch * d_model
    e, mask = bytes_per_value, 1 if dropout else 0
    split = tp if sequence_parallel else 1                      # what only SP divides
    if recompute == "full":
        return e * sbh / split / cp
    whole = (4 * e + 2 * mask) * sbh / split                     # 10·sbh at e=2 with dropout
    divided = 12 * e * sbh / tp                                  # 24·sbh/t at e=2
    scores = n_head * seq_len ** 2 * micro_batch * (e * (1 + mask) + mask) / tp   # 5·a·s²·b/t
    return (whole + divided + (0 if recompute == "selective" else scores)) / cp


# ---- collectives in the α-β model ----------------------------------------------------------------

def ring_steps(op: str, n: int) -> int:
    """Messages each rank sends one after another: a ring all-reduce ``2(n-1)`` (reduce-scatter,
    then all-gather: Patarasuk & Yuan 2009 [ref: patarasuk2009-ring]), all-gather and
    reduce-scatter ``n-1``, an all-to-all by pairwise exchange ``n-1`` (Thakur et al. 2005
    [ref: thakur2005-alltoall]), a broadcast or send 1."""
    checks.choice("op", op, COLLECTIVES)
    if op == "all_reduce":
        return 2 * (n - 1)
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return n - 1
    return 1


def bus_factor(op: str, n: int) -> float:
    """Bytes each rank puts on its link per byte of the buffer ``S``, with the ring algorithms:
    all-reduce ``2(n-1)/n``, all-gather and reduce-scatter ``(n-1)/n``, broadcast and send 1
    (the buffer crosses one link once)."""
    if op in ("broadcast", "send"):
        return 1.0
    return ring_steps(op, n) / n


def send_seconds(nbytes: float, bandwidth: float, latency: float = 0.0) -> float:
    """α-β time of one message of ``nbytes`` from one rank to another: ``α + S/B`` (Hockney
    1994 [ref: hockney1994-model]). Every collective here is made of such messages."""
    return latency + nbytes / bandwidth


def collective_seconds(op: str, nbytes: float, n: int, bandwidth: float, latency: float = 0.0
                       ) -> float:
    """α-β time of one ``op`` on a buffer of ``nbytes`` over ``n`` ranks: ``k·(α + S/(n·B))``
    with ``k`` :func:`ring_steps` (each step sends ``S/n``); a broadcast or send ``α + S/B``.
    Nothing to do (0 s) on one rank or for an empty buffer."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    if op in ("broadcast", "send"):
        return send_seconds(nbytes, bandwidth, latency)
    return ring_steps(op, n) * send_seconds(nbytes / n, bandwidth, latency)


def ring_allreduce_seconds(nbytes: float, n: int, bandwidth: float, latency: float = 0.0
                           ) -> float:
    """Ring all-reduce: ``2(n-1)·(α + S/(n·B))`` (Patarasuk & Yuan 2009
    [ref: patarasuk2009-ring])."""
    return collective_seconds("all_reduce", nbytes, n, bandwidth, latency)


def ring_attention_shifts(cp: int) -> int:
    """Messages of one key/value block (``2·b·(s/cp)·h`` values) each rank sends per layer and
    step in ring attention (Liu et al. 2023 [ref: liu2023-ring]), as ``parallel/context_parallel``
    runs it: forward
    passes the K/V blocks ``cp-1`` times; backward passes them ``cp-1`` times again, and their
    gradients ``cp`` times, back to the rank that owns them: ``3·cp - 2`` (0 on one rank)."""
    checks.integer("cp", cp)
    return 0 if cp == 1 else 3 * cp - 2


# ---- the pipeline bubble -------------------------------------------------------------------------

def _bubble_slots(stages: int, microbatches: int, virtual_stages: int = 1) -> tuple[int, int]:
    """(idle, busy) of one stage in one step, in units of one chunk's forward + backward: it
    waits ``p-1`` of them while the pipeline fills and drains, and works ``v·m``."""
    checks.integer("stages", stages)
    checks.integer("microbatches", microbatches)
    checks.integer("virtual_stages", virtual_stages)
    return stages - 1, virtual_stages * microbatches


def theoretical_bubble_fraction(stages: int, microbatches: int, virtual_stages: int = 1) -> float:
    """The share of a step each stage is idle, GPipe and 1F1B with equal stages and free
    communication: ``(p-1)/(m+p-1)`` (Huang et al. 2019 [ref: huang2019-bubble];
    Narayanan et al. 2021, §2.2.1 [ref: narayanan2021-1f1b]). Interleaved 1F1B with ``v``
    chunks per rank: ``(p-1)/(v·m+p-1)`` (§2.2.2 [ref: narayanan2021-interleaved]). This is the quantity a
    pipeline run measures (``parallel.pipeline.timeline.measured_bubble_fraction``)."""
    idle, busy = _bubble_slots(stages, microbatches, virtual_stages)
    return idle / (busy + idle)


def bubble_to_compute_ratio(stages: int, microbatches: int, virtual_stages: int = 1) -> float:
    """The same idle time over the ideal compute time instead of the whole step: ``(p-1)/m``
    (Narayanan et al. 2021, §2.2.1 [ref: narayanan2021-1f1b]), i.e. ``f/(1-f)`` for the fraction
    ``f`` of
    :func:`theoretical_bubble_fraction`.
    The planner adds this times the compute to a step."""
    idle, busy = _bubble_slots(stages, microbatches, virtual_stages)
    return idle / busy


# ---- the registry --------------------------------------------------------------------------------

# Every formula above, by name. tests/test_one_home.py evaluates each at random inputs and fails
# where arithmetic anywhere else in the package computes the same without calling it, however
# it is spelled (tests/restatements.py says how).
FORMULAS = ("bytes_per_value", "optimizer_state_bytes", "block_params", "gpt_params",
            "attention_flops_per_token", "training_flops_per_token", "flops_utilization",
            "activation_bytes_per_layer", "ring_steps", "bus_factor", "send_seconds",
            "collective_seconds", "ring_allreduce_seconds", "ring_attention_shifts",
            "theoretical_bubble_fraction", "bubble_to_compute_ratio")
