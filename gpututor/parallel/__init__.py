"""Ways of training across ranks: one folder per idea, from scratch and production side by side.

    data_parallel/     scratch.py (naive, bucketed)  ddp.py (DistributedDataParallel)  ring.py
    sharding/          zero.py (ZeRO-1/2/3)          fsdp.py (FSDP2 fully_shard)
    tensor_parallel/   megatron.py (column/row)      dtensor.py (DTensor parallelize_module)
                       sequence.py (sequence parallel on top of megatron.py)
    pipeline/          stages.py  schedules.py (naive, GPipe, 1F1B)  torch_pipelining.py
                       timeline.py (the measured bubble)
    context_parallel/  ring_attention.py (ring attention)  split.py (zig-zag)  context_parallel.py
    expert_parallel/   all_to_all.py (dispatch, combine)  scratch.py (ep, ddp+ep: experts split)
    mesh.py (the rank grid)  composed.py (layouts: ddp+tp, fsdp+tp, ddp+pp, ddp+tp+pp, ...)
    meta.py (make only this rank's part of a model built on the meta device)
    single.py  base.py (the interface)  link.py (an emulated interconnect)

Every strategy is registered in :data:`STRATEGIES` below; :func:`check_spec` runs the checks
that depend on the strategy before anything starts.

The from-scratch pieces also wrap any ``nn.Module`` outside the worker, used as their production
counterparts are (the strategies run the same classes):

    DataParallel(module, bucket_cap_mb=25, overlap=True, find_unused_parameters=False)   ~ DDP
    ShardedOptimizer(module, torch.optim.AdamW, stage=1 or 2, lr=..., ...)   ~ ZeroRedundancyOptimizer
    ZeRO3(module, units=..., compute_dtype=..., keep_whole=...)          ~ FSDP2's fully_shard
    gpututor.attention.TiledAttention / tiled_attention(q, k, v, causal=...)   ~ FlashAttention-2
    LocalSGD(module, optimizer, sync_every) / DiLoCo(module, inner_optimizer, sync_every)  ~ torchft's
"""
from __future__ import annotations

import math

from .. import checks
from ..checks import InvalidValue

from .base import Strategy
from .composed import Composed
from .context_parallel import ContextParallel, ContextParallelLayout
from .data_parallel.buckets import DataParallel
from .data_parallel.ddp import DataParallelDDP
from .data_parallel.local_sgd import DiLoCo, DiLoCoStrategy, LocalSGD, PeriodicAveraging
from .data_parallel.scratch import BucketedDataParallel, NaiveDataParallel
from .expert_parallel.scratch import DataExpertParallel, ExpertParallel
from .pipeline.schedules import PipelineParallel
from .pipeline.torch_pipelining import PipelineTorch
from .sharding.fsdp import FullyShardedFSDP2
from .sharding.zero import ShardedOptimizer, ZeROStage1, ZeROStage2, ZeROStage3
from .sharding.zero3 import ZeRO3
from .single import Single
from .tensor_parallel.dtensor import TensorParallelDTensor
from .tensor_parallel.megatron import TensorParallel

STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Single(),                                                         # lesson 01
    NaiveDataParallel(), BucketedDataParallel(), DataParallelDDP(),   # lesson 02
    PeriodicAveraging(), DiLoCoStrategy(),          # fewer messages: local SGD, DiLoCo
    ZeROStage1(), ZeROStage2(), ZeROStage3(), FullyShardedFSDP2(),    # lesson 03
    TensorParallel(), TensorParallelDTensor(),                        # lesson 04
    PipelineParallel(), PipelineTorch(),                              # lesson 05
    ContextParallel(),                                                # context parallel
    ExpertParallel(),                                                 # mixture of experts
    # lesson 09: layouts on a rank grid (RunSpec.mesh), outermost part first
    Composed(DataParallelDDP(), TensorParallel(), planned=True,
             description="DDP over dp x Megatron tensor parallel over tp"),
    Composed(NaiveDataParallel(), TensorParallel(),
             description="from scratch: all-reduce over dp x Megatron tensor parallel over tp"),
    Composed(FullyShardedFSDP2(), TensorParallelDTensor(), name="fsdp+tp",   # TP as DTensor:
             planned=True,
             description="PyTorch's 2-D layout: DTensor TP on mesh['tp'], FSDP2 on mesh['dp']"),
    Composed(DataParallelDDP(), PipelineParallel(), planned=True,
             description="DDP over dp x pipeline (GPipe/1F1B from scratch) over pp"),
    Composed(NaiveDataParallel(), PipelineParallel(),
             description="from scratch: all-reduce over dp x pipeline over pp"),
    Composed(DataParallelDDP(), TensorParallel(), PipelineParallel(), planned=True,
             description="3-D: DDP over dp x Megatron TP over tp x pipeline over pp"),
    ContextParallelLayout(DataParallelDDP(), ContextParallel(),
                          description="DDP over dp x context parallel (ring attention) over cp"),
    DataExpertParallel(),   # ddp+ep: DDP over dp x expert parallel over ep
)}


def get_strategy(name: str) -> Strategy:
    """The registered strategy called ``name``; ``ValueError`` lists the names there are."""
    checks.choice("strategy", name, STRATEGIES)
    return STRATEGIES[name]


def small_layout(name: str) -> tuple[int, dict | None, tuple]:
    """``(world_size, mesh, options)`` of the smallest run that exercises strategy ``name``: one
    rank for "single", 2 ranks for a one-dim strategy, 2 along each dim of a composed layout,
    and 2 micro-batches wherever there is a pipeline."""
    dims = get_strategy(name).dims()
    mesh = {d: 2 for d in dims} if len(dims) > 1 else None
    world = math.prod(mesh.values()) if mesh else (1 if name == "single" else 2)
    return world, mesh, ((("microbatches", 2),) if "pp" in dims else ())


def small_model(name: str) -> str:
    """The model a small run of strategy ``name`` trains: the one it needs, else the tiny GPT's."""
    return get_strategy(name).needs_model or "gpt"


def check_spec(spec):
    """Run the checks of ``spec`` that depend on its strategy; return ``spec``.

    Its name, its options (by name and value), its own constraints (e.g. tensor parallel's
    degree must divide the heads) and that the global batch splits evenly into its
    data-parallel ranks and ``grad_accum`` micro-batches. ``ValueError`` names the field, the
    value and what is allowed. :func:`gpututor.launch` calls this before starting any rank.
    """
    strategy = get_strategy(spec.strategy)
    if spec.mesh is not None and set(spec.mesh_shape) != set(strategy.dims()):
        raise InvalidValue("mesh", spec.mesh_shape, "a grid with exactly the dims "
                           f"{', '.join(strategy.dims())}", f"for strategy={strategy.name!r}")
    for name, _ in spec.options:
        if name not in strategy.options:
            allowed = "; ".join(f"{o} ({strategy.allowed[o]})" if o in strategy.allowed else o
                                for o in strategy.options) or "none"
            raise InvalidValue("option", name, f"one of its options: {allowed}",
                               f"for strategy={strategy.name!r}")
    if spec.attention != "naive" and set(strategy.dims()) & {"tp", "pp"}:
        raise InvalidValue("attention", spec.attention, "'naive' (tensor and pipeline parallel "
                           "split attention or its layers themselves; the others run with "
                           "data-parallel and sharded strategies)",
                           f"for strategy={strategy.name!r}")
    if spec.model == "moe" and set(strategy.dims()) & {"tp", "pp"}:
        raise InvalidValue("model", spec.model, "a model without experts (tensor and pipeline "
                           "parallel split the GPT's own MLPs and blocks; 'moe' runs with single, "
                           "data-parallel, sharded and expert-parallel strategies)",
                           f"for strategy={strategy.name!r}")
    if (spec.checkpoint_every or spec.resume) and not strategy.supports_checkpoint:
        raise InvalidValue("strategy", strategy.name, "a strategy that saves full state (e.g. "
                           "'single', 'ddp')", "with checkpointing")
    strategy.validate(spec)
    dp = strategy.data_parallel_size(spec)
    if spec.batch_size % (dp * spec.grad_accum):
        raise InvalidValue("batch_size", spec.batch_size, f"a multiple of {dp * spec.grad_accum} "
                           f"(it must split evenly into {dp} data-parallel rank(s) x "
                           f"grad_accum={spec.grad_accum} micro-batches)")
    return spec


__all__ = ["STRATEGIES", "DataParallel", "DiLoCo", "LocalSGD", "ShardedOptimizer", "Strategy",
           "ZeRO3", "check_spec", "get_strategy"]
