"""Put memory, time and cost together: does a configuration fit, how long, how much, and why.

- :class:`Config`: the hardware and the layout (GPU, count, link, ZeRO stage, tensor and
  pipeline degree, micro-batch, recomputation).
- :func:`estimate`: one configuration's per-device memory, step time, total time and cost, with
  the reasons in words. A configuration that does not fit is an answer too, with what to change.
- :func:`recommend`: try the layouts for each GPU count (and GPU type, and link) and rank those
  that fit: deadline and budget first, then cost, then time. It says when one GPU is enough and
  when the link, not the number of GPUs, limits the speed.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field

from .. import catalog, checks
from ..catalog import currency
from ..checks import InvalidValue
from ..formulas import DAY, RECOMPUTE, bytes_per_value
from ..i18n import show_table, show_verdict, tr
from .memory import PLAN_PRECISIONS, ZERO_STAGES, Transformer, bytes_per_param, per_device_memory
from .ranking import Recommendation, meets, rank_key, with_notes
from .reasons import breakdown, headline, memory_line, reasons, waiting_seconds
from .time import run_cost, step_time

PER_DEVICE_BYTES = ("params", "grads", "optimizer", "activations", "total")   # --json keys
# The planner's assumptions, each a parameter of estimate() and recommend() (and of the CLI and
# the widget); an estimate lists the ones it used (Estimate.assumptions).
DEFAULT_HFU = 0.4              # share of peak reached on all a step computes, recomputation
#                                included (HFU); PaLM 540B: 57.8 % HFU, 46.2 % MFU (Chowdhery
#                                et al. 2022, §4.1 [ref: chowdhery2022-mfu]); a small model or
#                                batch may reach less: measure
DEFAULT_TOKENS_PER_STEP = 2 ** 20  # global batch in tokens (GPT-3 6.7B: 2M, Brown et al. 2020,
#                                    Table 2.1 [ref: brown2020-sizes])
DEFAULT_COMM_EFFICIENCY = 0.8  # fraction of a link's datasheet rate a ring reaches
DEFAULT_OVERLAP = 1.0          # share of the backward pass that hides data-parallel traffic
DEFAULT_SEQUENCE_PARALLEL = True   # tensor parallel shards the layer norms' and dropouts'
#                                    activations too (Korthikanti et al. 2022, §4.2.2
#                                    [ref: korthikanti2022-sequence-parallel])
DEFAULT_CAUSAL = True          # attention computes half its s×s square (a causal kernel)
USABLE_FRACTION = 0.9          # headroom for CUDA context, fragmentation, buffers
ASSUMPTIONS = ("tokens_per_step", "hfu", "comm_efficiency", "overlap", "sequence_parallel",
               "causal_attention", "usable_fraction")


@dataclass(frozen=True)
class Config:
    """Where and how to train: ``count`` GPUs of type ``gpu``, ``gpus_per_node`` to a node
    joined by ``link``, nodes joined by ``inter_link``; data parallel over what tensor (``tp``)
    and pipeline (``pp``) parallel leave, with ZeRO stage ``zero_stage`` (3 = FSDP)."""

    gpu: str = "H100-80GB"
    count: int = 1
    link: str = "nvlink4"
    zero_stage: int = 0
    tp: int = 1
    pp: int = 1
    micro_batch: int = 1
    recompute: str = "none"
    inter_link: str = "ib-ndr"
    gpus_per_node: int = 8

    def __post_init__(self):
        catalog.get_gpu(self.gpu)
        catalog.get_link(self.link)
        catalog.get_link(self.inter_link)
        for name in ("count", "tp", "pp", "micro_batch", "gpus_per_node"):
            checks.integer(name, getattr(self, name))
        checks.choice("zero_stage", self.zero_stage, ZERO_STAGES)
        checks.choice("recompute", self.recompute, RECOMPUTE)
        if self.count % (self.tp * self.pp):
            raise InvalidValue("count", self.count, f"a multiple of {self.tp * self.pp}",
                               f"with tp={self.tp} and pp={self.pp}: the GPUs must split into "
                               f"data-parallel groups of tp x pp = {self.tp * self.pp}")
        if self.tp > min(self.count, self.gpus_per_node):
            raise InvalidValue("tp", self.tp, f"1 to {min(self.count, self.gpus_per_node)}",
                               f"with gpus_per_node={self.gpus_per_node}: tensor parallel talks "
                               "at every layer and must stay inside a node")

    @property
    def dp(self) -> int:
        return self.count // (self.tp * self.pp)

    @property
    def label(self) -> str:
        """The configuration in one line, in English: program state (tables of published runs,
        the CLI); :attr:`shown` is the same line in the notebook's language."""
        return self._label(english=True)

    @property
    def shown(self) -> str:
        """:attr:`label` in the notebook's language (the planner's tables, notes and plots)."""
        return self._label(english=False)

    def _label(self, english: bool) -> str:
        say = (lambda text, **values: text.format(**values)) if english else tr
        recompute = {"selective": say("selective recompute"), "full": say("full recompute")}
        parts = [f"{self.count}x {self.gpu}"]
        if self.count > 1:
            parts.append(self.link if self.count <= self.gpus_per_node
                         else f"{self.link}+{self.inter_link}")
        layout = [f"dp {self.dp}" + (f" ZeRO-{self.zero_stage}" if self.zero_stage else "")]
        if self.tp > 1:
            layout.append(f"tp {self.tp}")
        if self.pp > 1:
            layout.append(f"pp {self.pp}")
        if self.recompute != "none":
            layout.append(recompute.get(self.recompute, f"{self.recompute} recompute"))
        layout.append(say("micro-batch {n}", n=self.micro_batch))
        return ", ".join(parts) + " | " + ", ".join(layout)


@dataclass
class Estimate:
    """One configuration's answer: memory per device, whether it fits, time, cost, reasons."""

    config: Config
    memory: dict
    usable_bytes: float
    fits: bool
    step: dict
    steps: int
    total_s: float
    cost: float | None
    price_per_hour: float | None
    price_source: str
    link_bound: bool
    reasons: list = field(default_factory=list)
    meets: bool = True       # meets the deadline and budget it was ranked against
    assumptions: dict = field(default_factory=dict)   # the named assumptions it was made with
    precision: str = "bf16"  # what it was planned in (fp16 where the GPU has no bf16)

    @property
    def days(self) -> float:
        return self.total_s / DAY

    def show(self) -> None:
        """In a notebook: one sentence (fits or not and why; days and cost), the numbers as a
        table, and the other reasons (step, cost, assumptions) one click away; printed
        elsewhere."""
        sentence, tone = headline(self)
        shown = memory_line(self, catalog.get_gpu(self.config.gpu))
        show_verdict(sentence, "\n".join(r for r in self.reasons if r != shown), tone)
        show_table(*breakdown(self))

    def to_dict(self) -> dict:
        """Plain JSON-able data: per-device bytes by category, time and cost, and the reasons."""
        return {
            "config": dataclasses.asdict(self.config) | {"dp": self.config.dp,
                                                         "label": self.config.label},
            "per_device_bytes": {c: self.memory[c] for c in PER_DEVICE_BYTES},
            "device_bytes": catalog.get_gpu(self.config.gpu).memory_bytes,
            "usable_bytes": self.usable_bytes,
            "fits": self.fits,
            "precision": self.precision,
            "time": {**self.step, "steps": self.steps, "total_s": self.total_s,
                     "total_days": self.days},
            "cost": {"amount": self.cost, "currency": currency(), "price_per_gpu_hour": self.price_per_hour,
                     "price_source": self.price_source},
            "link_bound": self.link_bound,
            "assumptions": dict(self.assumptions),
            "explanation": list(self.reasons),
        }


def planned_precision(gpu, precision: str = "bf16") -> str:
    """The precision a plan for ``gpu`` uses when asked for ``precision``: fp16 (with loss
    scaling) in place of bf16 on a GPU without bf16 units (V100, T4), else ``precision``.
    "fp8" on a GPU without FP8 units (A100, V100, T4, ...) is refused, naming the GPU."""
    checks.choice("precision", precision, PLAN_PRECISIONS)
    if precision == "fp8":
        gpu.peak("fp8")      # raises InvalidValue: "on gpu='A100-80GB': it has no fp8 units"
    return "fp16" if precision == "bf16" and not gpu.peak_flops.get("bf16") else precision


def usable_bytes(gpu, usable_fraction: float = USABLE_FRACTION) -> float:
    """The bytes of ``gpu`` (a catalogue GPU or its name) a plan may fill: ``usable_fraction`` of
    its memory (the rest: CUDA context, fragmentation, buffers)."""
    gpu = catalog.get_gpu(gpu) if isinstance(gpu, str) else gpu
    return usable_fraction * gpu.memory_bytes


def estimate(model: Transformer, tokens: float, config: Config, precision: str = "bf16",
             optimizer: str = "adam", tokens_per_step: float = DEFAULT_TOKENS_PER_STEP,
             hfu: float = DEFAULT_HFU, comm_efficiency: float = DEFAULT_COMM_EFFICIENCY,
             overlap: float = DEFAULT_OVERLAP, price_per_hour: float | None = None,
             usable_fraction: float = USABLE_FRACTION, convention: str | None = None,
             sequence_parallel: bool = DEFAULT_SEQUENCE_PARALLEL,
             causal_attention: bool = DEFAULT_CAUSAL, attention: str = "eager") -> Estimate:
    """Memory, time and cost of training ``model`` on ``tokens`` tokens with ``config``.

    Raises ``ValueError`` for impossible input (unknown GPU, degrees that do not divide, negative
    sizes). A configuration that is possible but does not fit in memory is *not* an error: the
    estimate has ``fits=False`` and its ``reasons`` say what is too big and what would help.

    ``precision="fp8"``: the weights' matmuls run at the GPU's dense FP8 peak, the rest
    (attention's products, the output layer) at its bf16 peak (``time.step_time``); memory and
    traffic are bf16's, since torchao's Float8 training keeps weights, gradients, optimizer
    state and the saved activations in high precision and casts to FP8 at each matmul (FSDP2's
    FP8 all-gather, which halves ZeRO-3's parameter traffic, is not modelled). A GPU without
    FP8 units is refused (ValueError naming it).

    A GPU without bf16 (V100, T4: no bf16 units, see the catalogue's sources) asked for bf16 is
    planned in fp16 instead, which needs loss scaling (Micikevicius et al. 2018, §3.2
    [ref: micikevicius2018-loss-scaling]) and keeps the
    same bytes per value; the first reason says so.

    The assumptions (module constants above, each with its reason) are parameters: ``hfu`` the
    share of peak reached on everything a step computes; ``tokens_per_step`` the global batch;
    ``comm_efficiency`` and ``overlap``; ``sequence_parallel`` with tensor parallel;
    ``causal_attention``; ``usable_fraction`` of the GPU's memory. The estimate lists them.

    ``attention`` is the attention kernel's memory, as in :func:`per_device_memory`: "eager"
    (the default, and what :func:`recommend` plans) keeps the ``s×s`` scores, "fused" (a
    FlashAttention-class kernel) keeps none; a published run that used such a kernel is
    estimated with it (``plan.published``).
    """
    checks.positive("tokens", tokens)
    checks.positive("tokens_per_step", tokens_per_step)
    gpu = catalog.get_gpu(config.gpu)
    planned = planned_precision(gpu, precision)
    fallback, precision = planned != precision, planned
    fp8 = precision == "fp8"
    if fp8:
        precision = "bf16"          # memory, traffic and the non-FP8 FLOPs: bf16's
    peak = gpu.peak(precision)
    if model.n_layer % config.pp:
        raise InvalidValue("pp", config.pp, "a divisor of the layer count",
                           f"for a model of {model.n_layer} layers")
    memory = per_device_memory(model, config.micro_batch, config.zero_stage, config.dp,
                               config.tp, config.pp, precision, optimizer, config.recompute,
                               sequence_parallel=sequence_parallel and config.tp > 1,
                               convention=convention, attention=attention)
    usable = usable_bytes(gpu, usable_fraction)
    fits = memory["total"] <= usable
    multi_node = config.count > config.gpus_per_node
    intra, inter = catalog.get_link(config.link), catalog.get_link(config.inter_link)
    dp_link = min((intra, inter), key=lambda l: l.bandwidth) if multi_node else intra
    pp_link = inter if config.tp * config.pp > config.gpus_per_node else intra
    b = bytes_per_param(precision, optimizer, convention)
    step = step_time(model, tokens_per_step, config.count, peak, hfu, config.dp, config.tp,
                     config.pp, config.zero_stage, config.micro_batch, config.recompute,
                     grad_bytes=b.grads, activation_bytes=bytes_per_value(precision),
                     dp_link=dp_link, tp_link=intra, pp_link=pp_link,
                     comm_efficiency=comm_efficiency, overlap=overlap,
                     causal=causal_attention, fp8_peak_flops=gpu.peak("fp8") if fp8 else None)
    steps = math.ceil(tokens / tokens_per_step)
    total = steps * step["step_s"]
    price, price_source = catalog.price_of(gpu, price_per_hour)
    link_bound = config.count > 1 and waiting_seconds(step) >= 0.5 * step["step_s"]
    est = Estimate(config, memory, usable, fits, step, steps, total,
                   run_cost(total, config.count, price), price, price_source, link_bound)
    est.precision = "fp8" if fp8 else precision
    est.assumptions = dict(zip(ASSUMPTIONS, (tokens_per_step, hfu, comm_efficiency, overlap,
                                             sequence_parallel, causal_attention,
                                             usable_fraction)))
    est.reasons = reasons(est, gpu, {"tensor-parallel": intra, "pipeline": pp_link,
                                     "data-parallel": dp_link})
    if fp8:
        est.reasons.insert(0, tr("precision: FP8 for the weights' matmuls ({share:.0%} of the "
                                 "FLOPs) at {fp8:,.0f} TFLOP/s dense, the rest (attention's "
                                 "products, the output layer) in bf16 at {bf16:,.0f}; memory and "
                                 "traffic counted as bf16's (torchao keeps weights, gradients "
                                 "and optimizer state in high precision and casts per matmul)",
                                 share=step["fp8_flops_per_gpu"] / step["flops_per_gpu"],
                                 fp8=gpu.peak("fp8") / 1e12, bf16=peak / 1e12))
    if fallback:
        est.reasons.insert(0, tr("precision: {gpu} has no bf16, so this plans fp16 with loss "
                                 "scaling (the same 2 bytes per value; fp16's narrow range needs "
                                 "a loss scaler, lesson 06)", gpu=gpu.name))
    return est


def recommend(model: Transformer, tokens: float, gpus=("H100-80GB",), counts=None,
              links=None, max_gpus: int = 64, budget: float | None = None,
              deadline_days: float | None = None, precision: str = "bf16",
              optimizer: str = "adam", tokens_per_step: float = DEFAULT_TOKENS_PER_STEP,
              hfu: float = DEFAULT_HFU, price_per_hour: float | None = None,
              gpus_per_node: int = 8, recomputes=RECOMPUTE, inter_link: str = "ib-ndr",
              **kwargs) -> Recommendation:
    """Try layouts for each GPU type, count and link; rank the configurations that fit.

    For each count (powers of two up to ``max_gpus`` unless ``counts`` is given) every ZeRO
    stage, tensor degree (within a node), pipeline degree (dividing the layers), recomputation
    and micro-batch (1 to 8) is estimated; per (GPU, count, link) the best is kept. Ranking:
    those that meet the deadline and budget first, then by cost (time if no price), then time.
    """
    if budget is not None:
        checks.positive("budget", budget)
    if deadline_days is not None:
        checks.positive("deadline_days", deadline_days)
    counts = counts or [2 ** k for k in range(int(math.log2(max_gpus)) + 1)]
    best, rejected = {}, {}
    for gpu_name in gpus:
        gpu = catalog.get_gpu(gpu_name)
        for count, link in itertools.product(counts, links or gpu.links):
            if count == 1 and link != (links or gpu.links)[0]:
                continue   # one GPU talks to no one: the link does not matter
            for est in _layouts(model, tokens, gpu.name, count, link, gpus_per_node, recomputes,
                                inter_link, precision, optimizer, tokens_per_step, hfu,
                                price_per_hour, kwargs):
                key = (gpu.name, count, link)
                est.meets = meets(est, budget, deadline_days)
                if not est.fits:
                    if key not in best and (key not in rejected or
                                            est.memory["total"] < rejected[key].memory["total"]):
                        rejected[key] = est
                    continue
                rejected.pop(key, None)
                if key not in best or rank_key(est) < rank_key(best[key]):
                    best[key] = est
    ranked = sorted(best.values(), key=rank_key)
    fallbacks = [(g, precision, planned_precision(catalog.get_gpu(g), precision)) for g in gpus]
    return with_notes(ranked, sorted(rejected.values(), key=lambda e: e.config.count),
                      budget, deadline_days, [f for f in fallbacks if f[1] != f[2]])


def _layouts(model, tokens, gpu, count, link, gpus_per_node, recomputes, inter_link,
             precision, optimizer, tokens_per_step, hfu, price, kwargs):
    tps = [t for t in (1, 2, 4, 8) if t <= min(count, gpus_per_node) and count % t == 0
           and model.n_head % t == 0]
    for tp in tps:
        pps = [p for p in (1, 2, 4, 8, 16, 32) if (count // tp) % p == 0 and model.n_layer % p == 0]
        for pp, zero, recompute, mb in itertools.product(pps, ZERO_STAGES, recomputes,
                                                         (1, 2, 4, 8)):
            dp = count // (tp * pp)
            if (zero and dp == 1) or mb * dp * model.seq_len > tokens_per_step:
                continue
            config = Config(gpu, count, link, zero, tp, pp, mb, recompute, inter_link,
                            gpus_per_node)
            yield estimate(model, tokens, config, precision, optimizer, tokens_per_step, hfu,
                           price_per_hour=price, **kwargs)
