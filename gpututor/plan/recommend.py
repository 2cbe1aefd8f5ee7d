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
from ..catalog import CURRENCY_SYMBOLS, GB, currency, money, price_text
from ..formulas import RECOMPUTE, bytes_per_value
from .memory import PRECISIONS, ZERO_STAGES, Transformer, bytes_per_param, per_device_memory
from .time import DAY, run_cost, step_time

CATEGORIES = ("params", "grads", "optimizer", "activations", "total")
DEFAULT_MFU = 0.4              # assumption: PaLM 540B reported 46.2 % MFU (Chowdhery et al. 2022)
DEFAULT_COMM_EFFICIENCY = 0.8  # assumption: fraction of a link's datasheet rate a ring reaches
USABLE_FRACTION = 0.9          # assumption: headroom for CUDA context, fragmentation, buffers


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
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}={value!r} is invalid: allowed is a positive integer")
        checks.choice("zero_stage", self.zero_stage, ZERO_STAGES)
        checks.choice("recompute", self.recompute, RECOMPUTE)
        if self.count % (self.tp * self.pp):
            raise ValueError(f"count={self.count} is invalid with tp={self.tp} and pp={self.pp}: "
                             f"the GPUs must split into data-parallel groups of tp x pp = "
                             f"{self.tp * self.pp} (allowed counts: multiples of "
                             f"{self.tp * self.pp})")
        if self.tp > min(self.count, self.gpus_per_node):
            raise ValueError(f"tp={self.tp} is invalid with gpus_per_node={self.gpus_per_node}: "
                             "tensor parallel talks at every layer and must stay inside a node "
                             f"(allowed: 1 to {min(self.count, self.gpus_per_node)})")

    @property
    def dp(self) -> int:
        return self.count // (self.tp * self.pp)

    @property
    def label(self) -> str:
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
            layout.append(f"{self.recompute} recompute")
        layout.append(f"micro-batch {self.micro_batch}")
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

    @property
    def days(self) -> float:
        return self.total_s / DAY

    def to_dict(self) -> dict:
        """Plain JSON-able data: per-device bytes by category, time and cost, and the reasons."""
        return {
            "config": dataclasses.asdict(self.config) | {"dp": self.config.dp,
                                                         "label": self.config.label},
            "per_device_bytes": {c: self.memory[c] for c in CATEGORIES},
            "device_bytes": catalog.get_gpu(self.config.gpu).memory_bytes,
            "usable_bytes": self.usable_bytes,
            "fits": self.fits,
            "time": {**self.step, "steps": self.steps, "total_s": self.total_s,
                     "total_days": self.days},
            "cost": {"amount": self.cost, "currency": currency(), "price_per_gpu_hour": self.price_per_hour,
                     "price_source": self.price_source},
            "link_bound": self.link_bound,
            "explanation": list(self.reasons),
        }


def planned_precision(gpu, precision: str = "bf16") -> str:
    """The precision a plan for ``gpu`` uses when asked for ``precision``: fp16 (with loss
    scaling) in place of bf16 on a GPU without bf16 units (V100, T4), else ``precision``."""
    checks.choice("precision", precision, PRECISIONS)
    return "fp16" if precision == "bf16" and not gpu.peak_flops.get("bf16") else precision


def usable_bytes(gpu, usable_fraction: float = USABLE_FRACTION) -> float:
    """The bytes of ``gpu`` (a catalogue GPU or its name) a plan may fill: ``usable_fraction`` of
    its memory (the rest: CUDA context, fragmentation, buffers)."""
    gpu = catalog.get_gpu(gpu) if isinstance(gpu, str) else gpu
    return usable_fraction * gpu.memory_bytes


def estimate(model: Transformer, tokens: float, config: Config, precision: str = "bf16",
             optimizer: str = "adam", tokens_per_step: float = 2 ** 20,
             mfu: float = DEFAULT_MFU, comm_efficiency: float = DEFAULT_COMM_EFFICIENCY,
             overlap: float = 1.0, price_per_hour: float | None = None,
             usable_fraction: float = USABLE_FRACTION, convention: str | None = None
             ) -> Estimate:
    """Memory, time and cost of training ``model`` on ``tokens`` tokens with ``config``.

    Raises ``ValueError`` for impossible input (unknown GPU, degrees that do not divide, negative
    sizes). A configuration that is possible but does not fit in memory is *not* an error: the
    estimate has ``fits=False`` and its ``reasons`` say what is too big and what would help.

    A GPU without bf16 (V100, T4: no bf16 units, see the catalogue's sources) asked for bf16 is
    planned in fp16 instead, which needs loss scaling (Micikevicius et al. 2018) and keeps the
    same bytes per value; the first reason says so.
    """
    checks.positive("tokens", tokens)
    checks.positive("tokens_per_step", tokens_per_step)
    gpu = catalog.get_gpu(config.gpu)
    planned = planned_precision(gpu, precision)
    fallback, precision = planned != precision, planned
    peak = gpu.peak(precision)
    if model.n_layer % config.pp:
        raise ValueError(f"pp={config.pp} is invalid for a model of {model.n_layer} layers: "
                         "allowed is a divisor of the layer count")
    memory = per_device_memory(model, config.micro_batch, config.zero_stage, config.dp,
                               config.tp, config.pp, precision, optimizer, config.recompute,
                               sequence_parallel=config.tp > 1, convention=convention)
    usable = usable_bytes(gpu, usable_fraction)
    fits = memory["total"] <= usable
    multi_node = config.count > config.gpus_per_node
    intra, inter = catalog.get_link(config.link), catalog.get_link(config.inter_link)
    dp_link = min((intra, inter), key=lambda l: l.bandwidth) if multi_node else intra
    pp_link = inter if config.tp * config.pp > config.gpus_per_node else intra
    b = bytes_per_param(precision, optimizer, convention)
    step = step_time(model, tokens_per_step, config.count, peak, mfu, config.dp, config.tp,
                     config.pp, config.zero_stage, config.micro_batch, config.recompute,
                     grad_bytes=b.grads, activation_bytes=bytes_per_value(precision),
                     dp_link=dp_link, tp_link=intra, pp_link=pp_link,
                     comm_efficiency=comm_efficiency, overlap=overlap)
    steps = math.ceil(tokens / tokens_per_step)
    total = steps * step["step_s"]
    price, price_source = catalog.price_of(gpu, price_per_hour)
    comm = step["tp_comm_s"] + step["pp_comm_s"] + step["dp_exposed_s"]
    link_bound = config.count > 1 and comm >= 0.5 * step["step_s"]
    est = Estimate(config, memory, usable, fits, step, steps, total,
                   run_cost(total, config.count, price), price, price_source, link_bound)
    est.reasons = _reasons(est, model, gpu, {"tensor-parallel": intra, "pipeline": pp_link,
                                             "data-parallel": dp_link})
    if fallback:
        est.reasons.insert(0, f"precision: {gpu.name} has no bf16, so this plans fp16 with loss "
                              "scaling (the same 2 bytes per value; fp16's narrow range needs a "
                              "loss scaler, lesson 06)")
    return est


def _reasons(est: Estimate, model: Transformer, gpu, links: dict) -> list[str]:
    """Why the estimate is what it is, in words; ``links``: the link each kind of traffic
    crosses ("tensor-parallel", "pipeline", "data-parallel")."""
    m, c, s = est.memory, est.config, est.step
    gb = lambda x: f"{x / GB:,.1f} GB"
    out = [f"per GPU: parameters {gb(m['params'])}, gradients {gb(m['grads'])}, optimizer "
           f"{gb(m['optimizer'])}, activations {gb(m['activations'])}: {gb(m['total'])} of "
           f"{gb(est.usable_bytes)} usable ({gb(gpu.memory_bytes)} x "
           f"{est.usable_bytes / gpu.memory_bytes:.0%})"]
    if not est.fits:
        states = m["params"] + m["grads"] + m["optimizer"]
        if states > est.usable_bytes:
            out.append(f"does not fit: the model states alone ({gb(states)}) exceed the GPU; "
                       + ("shard them (a higher ZeRO stage), " if c.zero_stage < 3 else "")
                       + "add GPUs, or split the model (tensor/pipeline parallel)")
        else:
            out.append(f"does not fit: activations ({gb(m['activations'])}) push it over; "
                       "use recomputation, a smaller micro-batch, or tensor/pipeline parallel")
    compute, comm = s["compute_s"], s["tp_comm_s"] + s["pp_comm_s"] + s["dp_exposed_s"]
    out.append(f"step: compute {compute:.3g} s, waiting on links {comm:.3g} s"
               + (f", pipeline bubble {s['bubble_s']:.3g} s" if s["bubble_s"] else "")
               + f"; {est.steps:,} steps = {est.days:,.1f} days")
    if est.link_bound:   # name the link of the largest part of the wait
        waits = {"tensor-parallel": s["tp_comm_s"], "pipeline": s["pp_comm_s"],
                 "data-parallel": s["dp_exposed_s"]}
        kind = max(waits, key=waits.get)
        out.append(f"link-bound: {comm / s['step_s']:.0%} of each step waits on communication, "
                   f"most of it {kind} traffic over {links[kind].name}; more GPUs would not help "
                   "much, a faster link would")
    if est.cost is not None:
        out.append(f"cost: {money(est.cost)} at {price_text(est.price_per_hour)}/GPU-hour "
                   f"({est.price_source})")
    else:
        out.append(f"cost: unknown ({est.price_source})")
    return out


@dataclass
class Recommendation:
    """Ranked estimates that fit; the ones that do not; and notes for a person."""

    ranked: list
    rejected: list
    notes: list
    one_gpu_enough: bool
    link_bound: bool

    @property
    def smallest(self) -> Estimate | None:
        """The fewest GPUs that fit and meet the deadline and budget (cheapest among equals)."""
        meeting = [e for e in self.ranked if e.meets]
        return min(meeting, key=lambda e: (e.config.count, _rank(e)), default=None)

    def table(self, top: int = 10) -> str:
        """The best ``top`` configurations as plain text, one line each."""
        cost_label = f"cost {CURRENCY_SYMBOLS[currency()]}"   # the currency set_currency chose
        lines = [f"{'#':>2}  {'configuration':<72} {'GB/GPU':>7} {'days':>8} {cost_label:>10}  ok"]
        for i, e in enumerate(self.ranked[:top], 1):
            cost = f"{e.cost:,.0f}" if e.cost is not None else "n/a"
            lines.append(f"{i:>2}  {e.config.label:<72} {e.memory['total'] / GB:7.1f} "
                         f"{e.days:8.2f} {cost:>10}  {'yes' if e.meets else 'no'}")
        return "\n".join(lines)


def recommend(model: Transformer, tokens: float, gpus=("H100-80GB",), counts=None,
              links=None, max_gpus: int = 64, budget: float | None = None,
              deadline_days: float | None = None, precision: str = "bf16",
              optimizer: str = "adam", tokens_per_step: float = 2 ** 20,
              mfu: float = DEFAULT_MFU, price_per_hour: float | None = None,
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
                                inter_link, precision, optimizer, tokens_per_step, mfu,
                                price_per_hour, kwargs):
                key = (gpu.name, count, link)
                est.meets = _meets(est, budget, deadline_days)
                if not est.fits:
                    if key not in best and (key not in rejected or
                                            est.memory["total"] < rejected[key].memory["total"]):
                        rejected[key] = est
                    continue
                rejected.pop(key, None)
                if key not in best or _rank(est) < _rank(best[key]):
                    best[key] = est
    ranked = sorted(best.values(), key=_rank)
    return _with_notes(ranked, sorted(rejected.values(), key=lambda e: e.config.count),
                       budget, deadline_days)


def _layouts(model, tokens, gpu, count, link, gpus_per_node, recomputes, inter_link,
             precision, optimizer, tokens_per_step, mfu, price, kwargs):
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
            yield estimate(model, tokens, config, precision, optimizer, tokens_per_step, mfu,
                           price_per_hour=price, **kwargs)


def _meets(est: Estimate, budget, deadline_days) -> bool:
    on_time = deadline_days is None or est.days <= deadline_days
    affordable = budget is None or (est.cost is not None and est.cost <= budget)
    return on_time and affordable


def _rank(est: Estimate) -> tuple:
    cost = est.cost if est.cost is not None else math.inf
    return (not est.meets, cost if est.meets else est.total_s, est.total_s, est.config.count)


def _with_notes(ranked, rejected, budget, deadline_days) -> Recommendation:
    notes = []
    fitting_one = [e for e in ranked if e.config.count == 1]
    one_enough = bool(fitting_one) and fitting_one[0].meets
    if not ranked:
        smallest = rejected[-1] if rejected else None
        notes.append("nothing tried fits in memory"
                     + (f"; even {smallest.config.count} GPUs need "
                        f"{smallest.memory['total'] / GB:,.0f} GB per GPU" if smallest else "")
                     + ": try more GPUs or a GPU with more memory")
    elif one_enough:
        notes.append(f"one GPU is enough: {fitting_one[0].config.label} fits and takes "
                     f"{fitting_one[0].days:,.1f} days"
                     + (f" for {money(fitting_one[0].cost)}" if fitting_one[0].cost else "")
                     + "; more GPUs only buy time")
    elif fitting_one:
        notes.append(f"one GPU fits ({fitting_one[0].config.label}) but misses the deadline or "
                     f"budget: {fitting_one[0].days:,.1f} days")
    elif rejected:
        first = min((e.config.count for e in ranked), default=None)
        notes.append(f"the model does not fit on one GPU; the smallest count that fits is {first}")
    meeting = [e for e in ranked if e.meets]
    if meeting and not one_enough:
        e = min(meeting, key=lambda e: (e.config.count, _rank(e)))
        notes.append(f"the smallest cluster that meets the deadline and budget: {e.config.label}"
                     f" ({e.days:,.1f} days" + (f", {money(e.cost)})" if e.cost else ")"))
    if ranked and not meeting:
        what = [w for w, v in (("deadline", deadline_days), ("budget", budget)) if v]
        notes.append(f"no configuration meets the {' and '.join(what) or 'constraints'}: "
                     "the fastest and cheapest that fit are shown")
    link_bound = bool(ranked) and ranked[0].link_bound
    bound = [e for e in ranked if e.link_bound]
    if bound:
        e = bound[0]
        notes.append(f"link-bound: {e.config.label} waits on communication most of each step; "
                     "a faster link would speed it up more than more GPUs")
    return Recommendation(ranked, rejected, notes, one_enough, link_bound)
