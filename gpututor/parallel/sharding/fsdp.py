"""Sharding with PyTorch's FSDP2, ``torch.distributed.fsdp.fully_shard`` (the production API).

``fully_shard(module)`` is ZeRO-3 (``zero3.py``, :class:`~gpututor.parallel.sharding.zero3.ZeRO3`) done for
real. We call it on each transformer block, then on the root (bottom-up, as its docs ask
[ref: pytorch-fsdp2-contract]); each
call makes one *unit* whose parameters FSDP2 all-gathers and reduce-scatters together:

    from scratch (zero.py)                        FSDP2 (fully_shard)
    ShardedUnit: a block's slice of a flat vector  the block's parameters become DTensors,
                                                   each sharded on dim 0 (Shard(0)) over ranks
    GatherParameters.forward: all-gather before    pre-forward hook: all-gather the block's
      the block's forward                            parameters (on a GPU it also starts the
                                                     next block's, on its own stream; in
                                                     backward it prefetches the next block on
                                                     every device)
    freed when forward returns; all-gathered       reshard_after_forward=True: freed after
      again by the saved-tensor hook in backward     forward, all-gathered again before backward
    GatherParameters.backward: reduce-scatter      post-backward: reduce-scatter the gradients
      the gradient, keep this rank's slice           into the sharded DTensor's .grad
    the optimizer updates only the shards          the optimizer updates the local shards

Options (``RunSpec.options``):

- ``reshard_after_forward`` (default True): False keeps each block's gathered parameters from
  forward until its backward: no second all-gather (communication as DDP's), more memory: that
  is ZeRO-2's memory for parameters during the step.
- ``hsdp_replicas`` (default 1): HSDP, hybrid sharding. The dp ranks form ``hsdp_replicas``
  groups; each group shards the model over its own ranks (reduce-scatter, all-gather inside
  it) and the groups keep replicas of each other (an all-reduce of the gradient shards across
  them), as on a cluster where sharding stays inside a node: a 2-D ``DeviceMesh``
  ``(replicate, shard)`` passed to ``fully_shard``.
- ``mixed_precision`` "none" (default), "bf16" or "fp16": FSDP2's ``MixedPrecisionPolicy``
  with ``param_dtype`` in 16 bits (all-gathers send half the bytes and compute runs in it) and
  ``reduce_dtype=float32`` (gradients are averaged in full precision). The sharded parameters
  and the optimizer stay in fp32: the "master weights" of mixed precision. fp16 needs CUDA.

What we measure: every all-gather and reduce-scatter FSDP2 runs, counted and timed through its
``set_custom_all_gather`` / ``set_custom_reduce_scatter`` hooks (torch >= 2.9; older versions
run unmetered, with a warning), and with HSDP each all-reduce across the replicas, from the
reduce-scatter's end to ``set_all_reduce_hook``'s call right after it. On CPU (gloo) they are blocking, so all their time is exposed.
On CUDA they run on FSDP2's own streams, overlapping compute; we time them with CUDA events
on those streams (``comm_busy_s``) and do not know how much of it compute waited for:
``comm_s`` and ``compute_s`` are None there (not measured).
"""
from __future__ import annotations

import warnings

import torch

from ... import checks
from ...checks import InvalidValue
from ...config import FP8_KEPT, RUN_PRECISIONS, torch_dtype
from ...measure.timing import CollectiveTimer, DeviceMark
from ..base import MemoryLayout, Strategy
from ..mesh import degree_of, device_mesh
from .flat import padded_unit_bytes, sharding_units, unit_parameters

MIXED_PRECISION = {"none": None, "bf16": torch_dtype("bf16"), "fp16": torch_dtype("fp16")}


class FullyShardedFSDP2(Strategy):
    name = "fsdp"
    description = "torch FSDP2 fully_shard per block then root: ZeRO-3, production version"
    options = {"reshard_after_forward": checks.is_bool,
               "mixed_precision": checks.one_of(MIXED_PRECISION),
               "hsdp_replicas": checks.int_in(1)}
    allowed = {"reshard_after_forward": "True or False",
               "mixed_precision": "one of " + ", ".join(MIXED_PRECISION),
               "hsdp_replicas": "an integer >= 1 that divides the dp degree"}
    builds_on_meta = True        # sharded on meta, then each rank makes only its shards
    precisions = RUN_PRECISIONS   # fp8: torchao's Float8 Linears (precision/fp8_training.py)
    fp8_all_gather = True        # ... whose weights FSDP2 gathers in FP8
    zero_stage = 3
    memory_layout = MemoryLayout(gathered_blocks=2, gathered_root=True,
                                 note="the root gathered through forward and backward, and "
                                      "FSDP2 prefetches the next block (in backward; in "
                                      "forward too on a GPU)")
    planned = True

    def step_collectives(self, spec, model):
        """Each unit (every block, then the root) gathered for forward and again for backward,
        its gradients reduce-scattered. FSDP2 keeps the root unsharded after forward only when
        ``reshard_after_forward`` is left unset (None); ``wrap`` always passes it, so with True
        the root is gathered twice as well (torch 2.13, ``_fully_shard.py``: the root's special
        case is ``auto_reshard_after_forward = reshard_after_forward is None``)."""
        if spec.world_size == 1:
            return []
        replicas = spec.option("hsdp_replicas", 1)   # HSDP: sharded within dp / replicas ranks,
        shard = self.data_parallel_size(spec) // replicas   # each shard all-reduced across them
        units = padded_unit_bytes(model, shard)
        gathered = fp8_gathered_bytes(model, shard) if spec.precision == "fp8" else units
        gathers = 2 if spec.option("reshard_after_forward", True) else 1
        return [op for u, g in zip(units, gathered) for op in
                [("all_gather", g)] * gathers + [("reduce_scatter", u)]
                + ([("all_reduce", u // shard)] if replicas > 1 else [])]

    @property
    def meters_comm(self) -> bool:
        return hasattr(_fsdp().FSDPModule, "set_custom_all_gather")   # torch >= 2.9: metered

    def check_device(self, spec, device: str) -> None:
        gpu = torch.cuda.get_device_properties() if torch.device(device).type == "cuda" \
            and torch.cuda.is_available() else None
        if spec.option("mixed_precision") == "bf16" and gpu is not None and gpu.major < 8:
            major, minor = gpu.major, gpu.minor
            raise InvalidValue("option mixed_precision", "bf16", "'none' or 'fp16' on this GPU",
                               f"on a GPU of compute capability {major}.{minor}: bf16 arithmetic "
                               "needs 8.0 (Ampere) or newer")
        if spec.option("mixed_precision") == "fp16" and device != "cuda":
            raise InvalidValue("option mixed_precision", "fp16", "'none' or 'bf16' here",
                               "on CPU: most CPUs have no fp16 arithmetic, so PyTorch emulates "
                               "it, many times slower than fp32 (lesson 06)")

    def validate(self, spec) -> None:
        super().validate(spec)
        replicas = spec.option("hsdp_replicas", 1)
        if replicas > 1:
            dp, named = degree_of(spec, "dp")
            if dp % replicas or set(spec.mesh_shape) - {"dp"}:
                raise InvalidValue("option hsdp_replicas", replicas,
                                   "a divisor of the dp degree, on a grid of dp only",
                                   f"with {named}"
                                   f"{' and mesh ' + str(spec.mesh_shape) if spec.mesh else ''}")

    def wrap(self, model, ctx):
        from torch.distributed.device_mesh import init_device_mesh
        fsdp, spec = _fsdp(), ctx.spec
        replicas = spec.option("hsdp_replicas", 1)
        if replicas > 1:   # HSDP: shard within groups of dp/replicas ranks, replicate across
            mesh = init_device_mesh(ctx.device.type, (replicas, ctx.world_size // replicas),
                                    mesh_dim_names=("replicate", "shard"))
        else:
            mesh = device_mesh(ctx, "dp")   # the grid's dp slice (all ranks in a one-dim run)
        param_dtype = MIXED_PRECISION[spec.option("mixed_precision", "none")]
        policy = fsdp.MixedPrecisionPolicy(param_dtype=param_dtype,
                                           reduce_dtype=torch.float32 if param_dtype else None)
        shard = dict(mesh=mesh, mp_policy=policy,
                     reshard_after_forward=spec.option("reshard_after_forward", True))
        for _, block in sharding_units(model):
            fsdp.fully_shard(block, **shard)
        fsdp.fully_shard(model, **shard)   # the root: embeddings, final norm, head (tied weights)
        model.comm_timer = CollectiveTimer(ctx.comm, ctx.device)
        meter_collectives(model, model.comm_timer, replicas)
        return model

    def train_step(self, model, optimizer, micro_batches, ctx) -> float:
        loss = super().train_step(model, optimizer, micro_batches, ctx)
        model.comm_timer.flush()
        return loss

    def full_state_dict(self, model) -> dict:
        """Every parameter whole: ``full_tensor()`` all-gathers each DTensor (all ranks call)."""
        return {name: t.full_tensor() if hasattr(t, "full_tensor") else t
                for name, t in model.state_dict().items()}


def _fsdp():
    """``torch.distributed.fsdp``, imported when a rank shards, not by ``import gpututor``: it
    imports DTensor (0.6 s here). (torch imports both itself, with torch._dynamo, the first time
    a model is built; ``import gpututor`` stays light so the forkserver's imports overlap it.)"""
    import torch.distributed.fsdp
    return torch.distributed.fsdp


# ---- metering FSDP2's collectives ----------------------------------------------------------

def meter_collectives(model: torch.nn.Module, timer: CollectiveTimer,
                      replicas: int = 1) -> None:
    """Route every FSDP2 unit's all-gather and reduce-scatter through ``timer``; with HSDP
    (``replicas`` > 1) meter the all-reduce across the replicas too."""
    FSDPModule = _fsdp().FSDPModule
    if not hasattr(FSDPModule, "set_custom_all_gather"):
        warnings.warn(f"torch {torch.__version__} has no FSDPModule.set_custom_all_gather "
                      "(torch >= 2.9): fsdp runs here report communication as not measured")
        return
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import (
        DefaultAllGather, DefaultReduceScatter)

    class MeteredAllGather(DefaultAllGather):
        def __call__(self, output_tensor, input_tensor, group, async_op=False):
            nbytes = output_tensor.nbytes
            return timer.run("all_gather", nbytes, lambda: super(MeteredAllGather, self).__call__(
                output_tensor, input_tensor, group, async_op=async_op))

    reduced = []   # the mark where the last reduce-scatter ended: HSDP's all-reduce follows it

    class MeteredReduceScatter(DefaultReduceScatter):
        def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
            nbytes = input_tensor.nbytes
            work = timer.run("reduce_scatter", nbytes,
                             lambda: super(MeteredReduceScatter, self).__call__(
                                 output_tensor, input_tensor, group, op, async_op=async_op))
            reduced[:] = [DeviceMark(timer.device)]
            return work

    def all_reduced(reduce_output: torch.Tensor) -> None:
        """HSDP: FSDP2 all-reduces each reduce-scatter's output across the replicas itself
        (``dist.all_reduce``, no custom hook); its all-reduce hook runs right after, so the
        all-reduce is the span from the reduce-scatter's end to here."""
        if reduced:
            timer.ended("all_reduce", reduce_output.nbytes, reduced[0], group_size=replicas)

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_custom_all_gather(MeteredAllGather())
            module.set_custom_reduce_scatter(MeteredReduceScatter())
            if replicas > 1:
                module.set_all_reduce_hook(all_reduced)


def fp8_gathered_bytes(model, shard: int) -> list[int]:
    """What FSDP2 gathers of each unit in an fp8 run (torchao's FP8 all-gather): the weights of
    the Linears torchao converts (all but ``FP8_KEPT``) 1 byte each, every other parameter 4, each
    padded to ``shard`` equal rows (FSDP2 shards every parameter on its first dim); gradients
    still reduce-scatter in float32."""
    from torch import nn
    cast = {id(m.weight) for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and name not in FP8_KEPT}
    padded = lambda p: -(-p.shape[0] // shard) * shard * (p.numel() // max(p.shape[0], 1))   # noqa: E731
    return [sum(padded(p) * (1 if id(p) in cast else p.element_size()) for p in group)
            for group in unit_parameters(model)]
