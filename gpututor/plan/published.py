"""Published training runs beside the planner's predictions for them.

Each :class:`PublishedRun` is a figure a paper or a benchmark file printed (GPU-hours for a whole
run, or tokens per second per GPU), with the model's shape and, where the source gives it, the
layout and the batch. :func:`compare` asks the planner for the same thing at its default
assumptions (``plan.recommend``: HFU, link efficiency, overlap, causal attention) and returns
the prediction, the published figure, their ratio and the MFU the published figure implies: the
model's FLOPs (no recomputation, ``formulas.training_flops_per_token``) over the GPU time and
the catalogue's dense peak.

- Llama 2 (Touvron et al. 2023): Table 2 gives the GPU-hours of pretraining on A100-80GB
  (7B 184,320; 13B 368,640; 70B 1,720,320) [ref: touvron2023-gpu-hours] on 2.0T tokens with a
  global batch of 4M tokens and a context of 4,096 (Table 1 [ref: touvron2023-models]); the
  shapes are Table 1's sizes with the released
  models' depth and width. The paper does not give the layout, so the prediction is the
  planner's own best layout on a count of GPUs chosen here (``gpus``), over 200 Gb/s
  InfiniBand between nodes (section 2.2.1: both of Meta's clusters ran 200 Gbps interconnects;
  [ref: touvron2023-hardware]).
- torchtitan's Llama 3.1 8B on 8 H100s (``benchmarks/llama3_h100_202412_torchtitan.md``,
  [ref: torchtitan2024-llama3-8b]
  Table 1): 5,762 tokens/s/GPU with FSDP in bf16, local batch 2, global batch 16, selective
  activation checkpointing, sequence length 8,192 (``train_configs/llama3_8b.toml`` of the
  same time). Its H100s had 96 GB and a 500 W power limit: the catalogue's H100-80GB (its peak
  at 700 W) stands in, so the prediction is an upper bound for that machine. Its attention is
  PyTorch's SDPA, whose flash kernel (the op its selective checkpointing saves) never stores the
  ``s×s`` scores, so its memory is estimated with ``attention="fused"``.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import catalog
from ..catalog import GB
from ..formulas import HOUR, flops_utilization
from .memory import Transformer
from .recommend import DEFAULT_CAUSAL, Config, estimate, recommend
from .time import training_flops_per_token

# The range the lesson states for the planner's Llama 2 predictions, predicted / published
# (tests/plan/test_published.py holds the planner to it)
LLAMA2_RATIO_RANGE = (0.8, 1.25)


@dataclass(frozen=True)
class PublishedRun:
    """One published figure: ``measure`` is "GPU-hours" (of a run on ``tokens``) or
    "tokens/s/GPU" (of ``config``'s layout); ``config`` is the published layout, or None when
    the source gives none (the planner then picks its best on ``gpus`` GPUs)."""

    name: str
    model: Transformer
    gpu: str
    measure: str
    published: float
    tokens_per_step: float
    source: str
    tokens: float = 0.0
    config: Config | None = None
    gpus: int = 0
    published_memory_gib: float | None = None
    attention: str = "eager"   # the attention kernel's memory, as plan.memory counts it


def _llama2(size: str, layers: int, width: int, heads: int, params: float, hours: float,
            gpus: int) -> PublishedRun:
    model = Transformer(layers, width, heads, 32000, 4096, params, f"Llama 2 {size}",
                        "Touvron et al. 2023, Table 1 (sizes), released models (shapes)")
    # [ref: touvron2023-models] [ref: touvron2023-gpu-hours]
    return PublishedRun(f"Llama 2 {size}", model, "A100-80GB", "GPU-hours", hours, 4e6,
                        "Touvron et al. 2023, Table 2 (GPU-hours), Table 1 (2.0T tokens)",
                        tokens=2e12, gpus=gpus)


LLAMA3_8B = Transformer(32, 4096, 32, 128256, 8192, 8.03e9, "Llama 3.1 8B",
                        "torchtitan's llama3 8B configuration: 32 layers, d 4096, 32 heads")
RUNS = (
    _llama2("7B", 32, 4096, 32, 6.74e9, 184_320, 512),
    _llama2("13B", 40, 5120, 40, 13.0e9, 368_640, 512),
    _llama2("70B", 80, 8192, 64, 69.0e9, 1_720_320, 2048),
    PublishedRun("torchtitan Llama 3.1 8B", LLAMA3_8B, "H100-80GB", "tokens/s/GPU", 5762,
                 16 * 8192, "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md, "
                 "Table 1 (FSDP, bf16, 8 GPUs)",
                 config=Config("H100-80GB", 8, "nvlink4", zero_stage=3, micro_batch=2,
                               recompute="selective"),
                 published_memory_gib=82.4, attention="fused"),
)


def implied_mfu(run: PublishedRun, causal: bool = DEFAULT_CAUSAL) -> float:
    """The MFU the published figure implies: the model's FLOPs over GPU time x dense peak
    (attention counted causal, half its square, unless ``causal=False``, as PaLM and torchtitan
    count it)."""
    peak = catalog.get_gpu(run.gpu).peak("bf16")
    per_token = training_flops_per_token(run.model, "none", causal)
    if run.measure == "GPU-hours":
        return flops_utilization(per_token * run.tokens, run.published * HOUR, peak)
    return flops_utilization(run.published * per_token, 1.0, peak)   # tokens in one second


def predict(run: PublishedRun):
    """The planner's estimate for ``run`` at its default assumptions: the published layout (with
    the run's attention kernel, ``run.attention``), or the best layout that fits on ``run.gpus``
    GPUs."""
    if run.config is not None:
        return estimate(run.model, run.tokens or run.tokens_per_step, run.config,
                        tokens_per_step=run.tokens_per_step, attention=run.attention)
    rec = recommend(run.model, run.tokens, gpus=(run.gpu,), counts=[run.gpus],
                    tokens_per_step=run.tokens_per_step, inter_link="ib-hdr")
    return rec.ranked[0] if rec.ranked else None


def compare(run: PublishedRun) -> dict:
    """Prediction, published figure, ratio (predicted / published), implied MFU, for ``run``."""
    est = predict(run)
    if est is None:
        predicted = None
    elif run.measure == "GPU-hours":
        predicted = est.total_s / HOUR * est.config.count
    else:
        predicted = run.tokens_per_step / est.step["step_s"] / est.config.count
    return {"run": run.name, "gpu": run.gpu, "measure": run.measure,
            "published": run.published, "predicted": predicted,
            "ratio": None if predicted is None else predicted / run.published,
            "implied_mfu": implied_mfu(run), "implied_mfu_full_square": implied_mfu(run, False),
            "layout": est.config.label if est else None, "fits": est.fits if est else None,
            "predicted_memory_gb": est.memory["total"] / GB if est else None,
            "published_memory_gb": (run.published_memory_gib * 2 ** 30 / GB
                                    if run.published_memory_gib else None),
            "predicted_mfu": est.step["mfu"] if est else None, "source": run.source}


def published_table() -> list[dict]:
    """:func:`compare` for every run in :data:`RUNS`."""
    return [compare(run) for run in RUNS]
