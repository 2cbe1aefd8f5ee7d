"""Per-device training memory: model states (parameters, gradients, optimizer) and activations.

The published formulas, for any GPT-shaped transformer on real hardware:
:func:`model_state_bytes` (ZeRO paper's bytes per parameter, divided by ZeRO stage, tensor and
pipeline degree) and :func:`activation_bytes_per_layer` (Korthikanti et al. 2022, §4.1
[ref: korthikanti2022-activations]; written once
in ``gpututor.formulas``, which ``as_built.py`` reads too).
:func:`per_device_memory` adds them up for one configuration. (The tiny GPT as built here,
held as each strategy holds it, is counted in ``as_built.py``;
``gpututor.lessons.choosing_hardware.calibrate`` checks that against real runs.)

Units: bytes. ``GB`` in tests and tables is 10^9 bytes, as in the papers.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import checks
from ..checks import InvalidValue
from ..config import PRECISIONS
from ..formulas import (OPTIMIZER_STATE_BYTES, activation_bytes_per_layer, block_params,
                        bytes_per_value, gpt_params)

ZERO_STAGES = (0, 1, 2, 3)
# What a plan may be made in: a run's precisions, and "fp8" (the weights' matmuls in FP8, as
# torchao's Float8 training does; memory as bf16's: see plan.recommend.estimate)
PLAN_PRECISIONS = PRECISIONS + ("fp8",)
PLANNED_ATTENTION = ("eager", "fused")   # scores stored (softmax, dropout) or never stored (FlashAttention)


# ---- checks --------------------------------------------------------------------------------------

def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


# ---- 1. model states -----------------------------------------------------------------------------

@dataclass(frozen=True)
class BytesPerParam:
    """Bytes per parameter of each kind of model state, and where the convention comes from."""

    params: float
    grads: float
    optimizer: float
    source: str

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer


# [ref: rajbhandari2020-model-states]
MIXED_ADAM = BytesPerParam(2, 2, 12, "ZeRO paper (Rajbhandari et al. 2020, section 3.1): fp16 "
                                     "weights and gradients; fp32 master weights, Adam momentum "
                                     "and variance (K = 12)")
CONVENTIONS = {
    # name -> bytes per parameter (names as lesson 03 uses them). The default for bf16/fp16
    # with Adam is the ZeRO paper's.
    "mixed-adam": MIXED_ADAM,
    "fp32-adamw": BytesPerParam(4, 4, 8, "fp32 weights and gradients, Adam m and v in fp32 "
                                        "(plain PyTorch AdamW, as the lessons' runs)"),
    "mixed-sgd": BytesPerParam(2, 2, 8, "16-bit weights and gradients; fp32 master weights and "
                                        "momentum (K = 8, the ZeRO paper's counting applied to "
                                        "SGD with momentum)"),
    "fp32-sgd": BytesPerParam(4, 4, 4, "fp32 weights and gradients, SGD momentum in fp32"),
    "mixed-adam-fp32-grads": BytesPerParam(2, 4, 12, "Megatron-LM distributed optimizer docs: "
                                                     "bf16 weights, fp32 gradients, fp32 master "
                                                     "weights + Adam m and v"),
}


def bytes_per_param(precision: str = "bf16", optimizer: str = "adam",
                    convention: str | None = None) -> BytesPerParam:
    """The bytes-per-parameter convention for ``precision`` and ``optimizer``.

    bf16/fp16 with Adam is the ZeRO paper's 2 + 2 + 12 = 16 bytes (section 3.1,
    [ref: rajbhandari2020-model-states]); fp32 with Adam
    is 4 + 4 + 8 = 16 too (no master copy needed); SGD with momentum keeps one fp32 buffer
    instead of two. ``convention`` picks any entry of :data:`CONVENTIONS` by name instead.
    """
    if convention is not None:
        checks.choice("convention", convention, tuple(CONVENTIONS))
        return CONVENTIONS[convention]
    checks.choice("precision", precision, PRECISIONS)
    # the optimizers whose state the formulas count ("adam" too, as the ZeRO paper names it);
    # a run trains with config.OPTIMIZERS
    checks.choice("optimizer", optimizer, OPTIMIZER_STATE_BYTES)
    kind = "sgd" if optimizer == "sgd" else "adam"
    name = {("fp32", "adam"): "fp32-adamw", ("fp32", "sgd"): "fp32-sgd",
            ("mixed", "adam"): "mixed-adam", ("mixed", "sgd"): "mixed-sgd"}
    return CONVENTIONS[name["fp32" if precision == "fp32" else "mixed", kind]]


def model_state_bytes(n_params: float, precision: str = "bf16", optimizer: str = "adam",
                      zero_stage: int = 0, dp: int = 1, tp: int = 1, pp: int = 1,
                      convention: str | None = None, expert_params: float = 0.0,
                      ep: int = 1) -> dict[str, float]:
    """Per-device bytes of parameters, gradients and optimizer state (and their total).

    Tensor and pipeline parallel give each device ``1/(tp·pp)`` of the model (an even split;
    replicated layer norms and embeddings are ignored). Over the ``dp`` data-parallel replicas,
    ZeRO stage 1 divides the optimizer state, stage 2 the gradients too, stage 3 (= FSDP) the
    parameters too: Rajbhandari et al. 2020, Figure 1 and Table 1 [ref: rajbhandari2020-stages],
    e.g. Ψ = 7.5B, Nd = 64,
    K = 12: 120 GB, 31.4 GB (P_os), 16.6 GB (P_os+g), 1.88 GB (P_os+g+p).

    Mixture of experts: ``expert_params`` of the ``n_params`` are experts, split over the ``ep``
    expert-parallel ranks, which are taken from the data-parallel ones (``ep`` divides ``dp``,
    as in Megatron Core's MoE and torchtitan); each expert is then replicated, and ZeRO-sharded,
    over the ``dp/ep`` ranks that hold it, while the dense part is sharded over all ``dp``.
    """
    checks.positive("n_params", n_params)
    checks.choice("zero_stage", zero_stage, ZERO_STAGES)
    for name, value in (("dp", dp), ("tp", tp), ("pp", pp), ("ep", ep)):
        checks.integer(name, value)
    if not 0 <= expert_params < n_params:
        raise InvalidValue("expert_params", expert_params,
                           f"0 <= expert_params < n_params={n_params:g}")
    if dp % ep:
        raise InvalidValue("ep", ep, f"a divisor of dp ({', '.join(map(str, _divisors(dp)))})",
                           f"with dp={dp}: expert-parallel ranks are taken from the "
                           "data-parallel ones")
    b = bytes_per_param(precision, optimizer, convention)
    out = dict.fromkeys(("params", "grads", "optimizer"), 0.0)
    for count, replicas in ((n_params - expert_params, dp), (expert_params / ep, dp // ep)):
        local = count / (tp * pp)
        out["params"] += local * b.params / (replicas if zero_stage >= 3 else 1)
        out["grads"] += local * b.grads / (replicas if zero_stage >= 2 else 1)
        out["optimizer"] += local * b.optimizer / (replicas if zero_stage >= 1 else 1)
    out["total"] = out["params"] + out["grads"] + out["optimizer"]
    return out


# ---- 2. a transformer's shape --------------------------------------------------------------------

@dataclass(frozen=True)
class Transformer:
    """A GPT-shaped decoder: ``n_layer`` blocks of width ``d_model`` with ``n_head`` heads.

    ``n_params`` defaults to ``12·L·h² + V·h`` (Kaplan et al. 2020, Table 1 [ref: kaplan2020-params]:
    12·L·h² in the
    blocks, plus a tied embedding); a preset may give the real count instead.
    """

    n_layer: int
    d_model: int
    n_head: int
    vocab_size: int = 50257
    seq_len: int = 2048
    params: float | None = None
    name: str = "custom"
    source: str = ""

    def __post_init__(self):
        for field in ("n_layer", "d_model", "n_head", "vocab_size", "seq_len"):
            checks.integer(field, getattr(self, field))
        if self.d_model % self.n_head:
            raise InvalidValue("n_head", self.n_head, "a divisor of d_model",
                               f"with d_model={self.d_model}")
        if self.params is not None:
            checks.positive("params", self.params)

    @property
    def n_params(self) -> float:
        if self.params is not None:
            return self.params
        return gpt_params(self.n_layer, self.d_model, self.vocab_size)

    @property
    def layer_params(self) -> float:
        """One block's parameters, ``12·h²`` (attention 4·h², MLP 8·h²; biases left out)."""
        return block_params(self.d_model)


PRESETS = {t.name: t for t in (
    Transformer(48, 1600, 25, 50257, 1024, 1.5e9, "gpt2-1.5b",
                # [ref: radford2019-sizes] (25 heads of 64: the released configuration)
                "GPT-2 XL (Radford et al. 2019): 48 layers, d 1600, 25 heads, context 1024"),
    Transformer(32, 4096, 32, 32000, 4096, 6.74e9, "7b",
                # [ref: touvron2023-models] (the paper gives sizes, not shapes)
                "the depth and width of Llama 2 7B as released (size: Touvron et al. 2023, "
                "Table 1; its SwiGLU MLP and our 12·L·h² count differ a little)"),
    Transformer(80, 8192, 64, 32000, 4096, 70e9, "70b",
                # [ref: touvron2023-models]
                "the depth and width of Llama 2 70B (Touvron et al. 2023); modelled here with "
                "full multi-head attention, not its grouped-query attention"),
    Transformer(96, 12288, 96, 50257, 2048, 175e9, "gpt3-175b",
                "GPT-3 175B (Brown et al. 2020, Table 2.1)"),   # [ref: brown2020-sizes]
)}


def transformer_for_params(n_params: float, seq_len: int = 2048, vocab_size: int = 50257
                           ) -> Transformer:
    """A GPT-shaped model of about ``n_params`` parameters, with ``d_model = 128·n_layer``.

    That aspect ratio is GPT-3 6.7B's and 175B's (Brown et al. 2020, Table 2.1
    [ref: brown2020-sizes]) and Llama 2 7B's:
    ``N ≈ 12·L·(128·L)²``. Heads of 128 dimensions. Use a preset or :class:`Transformer` to
    give the real shape instead.
    """
    checks.positive("n_params", n_params)
    layers = max(1, round((n_params / block_params(128)) ** (1 / 3)))
    # the multiple of 128 whose gpt_params(L, h, V) comes closest to n_params (the count grows
    # with h, so the search stops one step past the closest)
    d_model = 128
    while abs(gpt_params(layers, d_model + 128, vocab_size) - n_params) < \
            abs(gpt_params(layers, d_model, vocab_size) - n_params):
        d_model += 128
    return Transformer(layers, d_model, d_model // 128, vocab_size, seq_len, float(n_params),
                       f"{n_params / 1e9:g}B", "shape from d_model = 128·n_layer (GPT-3 6.7B, "
                                                "175B; Llama 2 7B)")


# ---- 3. activations ------------------------------------------------------------------------------

def activation_bytes(model: Transformer, micro_batch: int = 1, tp: int = 1, pp: int = 1,
                     sequence_parallel: bool = False, recompute: str = "none",
                     precision: str = "bf16", dropout: bool = True,
                     microbatches: int | None = None, cp: int = 1,
                     attention: str = "eager") -> float:
    """Activations on the busiest device, the first pipeline stage (Korthikanti et al. 2022, 4.2.3).

    [ref: korthikanti2022-pipeline]

    With the 1F1B schedule, stage 1 of ``pp`` keeps ``min(pp, m)`` micro-batches in flight, each
    with ``L/pp`` layers: ``L`` layers' worth when m >= pp. Without pipelining the output layer
    adds its input and the logits for the loss, ``4·s·b·h/t·(1 + V/h)`` in fp32 (their eq. 5).
    With full recomputation the paper counts the layers' inputs, ``2·s·b·h`` each; the layer being
    recomputed in backward holds everything it keeps without recomputation, so one such layer is
    added (the tiny GPT's checkpointed run measured 21.8 MB, where the formula without it said 6.8).
    Selective recomputation recomputes each layer's attention core in backward the same way, so
    one layer's scores (``5·a·s²·b/t`` at 16 bits with dropout) are added to it: both levers are
    charged the layer they recompute.

    ``attention="fused"`` models a FlashAttention-class kernel, which never stores the ``a·s²``
    scores (Dao et al. 2022 [ref: dao2022-memory]): every layer, kept or recomputed, is then
    counted without them (so ``"none"`` and ``"selective"`` keep the same).
    """
    checks.choice("precision", precision, PRECISIONS)
    checks.choice("attention", attention, PLANNED_ATTENTION)
    checks.integer("pp", pp)
    if model.n_layer % pp:
        raise InvalidValue("pp", pp, "a divisor of n_layer "
                           f"({', '.join(map(str, _divisors(model.n_layer)))})",
                           f"for {model.n_layer} layers")
    e = bytes_per_value(precision)
    m = microbatches if microbatches is not None else pp
    checks.integer("microbatches", m)

    def layer(kind: str) -> float:   # fused attention keeps no scores: as "selective" keeps
        kind = "selective" if attention == "fused" and kind == "none" else kind
        return activation_bytes_per_layer(model.seq_len, micro_batch, model.d_model,
                                          model.n_head, tp, sequence_parallel, kind, e,
                                          dropout, cp)

    total = layer(recompute) * model.n_layer / pp * min(pp, m)
    # the layer being recomputed in backward holds, at once, what it would keep without
    # recomputation: all of it (full), or its attention core's scores (selective, eager attention)
    if recompute == "full":
        total += layer("none")
    elif recompute == "selective" and attention == "eager":
        total += layer("none") - layer("selective")
    if pp == 1:
        sbh = model.seq_len * micro_batch * model.d_model
        total += 4 * sbh / tp / cp * (1 + model.vocab_size / model.d_model)
    return total


def per_device_memory(model: Transformer, micro_batch: int = 1, zero_stage: int = 0,
                      dp: int = 1, tp: int = 1, pp: int = 1, precision: str = "bf16",
                      optimizer: str = "adam", recompute: str = "none",
                      sequence_parallel: bool = False, dropout: bool = True,
                      microbatches: int | None = None, convention: str | None = None,
                      cp: int = 1, ep: int = 1, expert_params: float = 0.0,
                      attention: str = "eager") -> dict[str, float]:
    """Bytes per device: ``params``, ``grads``, ``optimizer``, ``activations`` and ``total``.

    Model states from :func:`model_state_bytes`; with ZeRO-3 / FSDP, add the unsharded parameters
    of two layers (the one computing and the one prefetched: PyTorch FSDP's default
    ``forward_prefetch``/``backward_prefetch`` behaviour, as FSDP2 documents it). Activations from
    :func:`activation_bytes` (``attention`` as there). Context-parallel ranks hold the same parameters, so ZeRO shards
    over ``dp·cp`` ranks (torchtitan's FSDP mesh ``dp_shard_cp``). Left out: the CUDA context, allocator fragmentation, communication
    buffers, temporary buffers of single operations: keep headroom (``recommend`` uses 90 %).
    """
    if model.n_head % tp or model.d_model % tp:
        raise InvalidValue("tp", tp, "a divisor of the heads "
                           f"({', '.join(map(str, _divisors(model.n_head)))})",
                           f"for n_head={model.n_head}")
    out = model_state_bytes(model.n_params, precision, optimizer, zero_stage, dp * cp, tp, pp,
                            convention, expert_params, ep)
    if zero_stage == 3 and dp * cp > 1:   # sharded over dp·cp ranks: two layers gathered
        out["params"] += 2 * model.layer_params / tp * bytes_per_param(
            precision, optimizer, convention).params
    out["activations"] = activation_bytes(model, micro_batch, tp, pp, sequence_parallel,
                                          recompute, precision, dropout, microbatches, cp,
                                          attention)
    out["total"] = out["params"] + out["grads"] + out["optimizer"] + out["activations"]
    return out
