"""The strategy interface: what the worker asks of every way of training, and what a strategy
says about itself to the rest of the package.

A strategy says how many ranks split the batch, wraps the model (and builds its optimizer), and
runs one training step. It also *describes* itself: what it shards (:attr:`Strategy.zero_stage`,
:attr:`Strategy.shards`), its options with their checks and defaults, how it holds the tiny GPT
(:attr:`Strategy.memory_layout`, a :class:`MemoryLayout` the planner's as-built prediction
reads), the collectives one step runs (:meth:`Strategy.step_collectives`, which the calibration
prices), whether the planner proposes it (:attr:`Strategy.planned`), and the precisions and
grid dims it supports. The worker, the launcher, the metrics, the planner, the calibration and
the widgets only read this interface, so a new strategy is one new module registered in
``gpututor.parallel`` (``__init__.py``): nothing else changes.
"""
from __future__ import annotations

from contextlib import nullcontext

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .. import checks
from ..checks import InvalidValue
from ..config import PRECISIONS, torch_dtype
from ..moe import auxiliary_loss, expert_load
from .mesh import RankGrid
from .pieces import default_pieces


def check_option(name: str, value, ok, allowed: str) -> None:
    """Raise the project's standard ``ValueError`` unless ``ok(value)``."""
    checks.where(f"option {name}", value, ok, allowed)


STATES = ("optimizer", "grads", "params")   # what ZeRO stage 1, 2, 3 shards, in that order


@dataclass(frozen=True)
class MemoryLayout:
    """How a strategy, as implemented here, holds the tiny GPT on a rank: what
    ``gpututor.plan.as_built`` needs, beyond the ZeRO stage, to predict the bytes the worker's
    memory probe measures."""

    grad_buffers: bool = False    # gradients live in flat buffers kept between steps (zero1)
    bucket_copy: bool = False     # a persistent second copy of the gradients (DDP's buckets)
    gathered_blocks: int = 0      # ZeRO-3/FSDP: full blocks alive at the backward peak
    gathered_root: bool = False   # ... and the root unit (embeddings, final norm)
    per_tensor_state: bool = True  # one AdamW step counter per parameter tensor (else per shard)
    tensor_parallel: bool = False  # Megatron layers: big matrices split over the ranks
    pipeline: bool = False        # consecutive blocks per rank, 1F1B micro-batches
    note: str = ""


class Strategy:
    name = "base"
    description = ""
    dim = "dp"           # the dim of the rank grid this strategy splits its work over
    parts: tuple = ()    # a composed layout's strategies, outermost first (see composed.py)
    options: dict = {}   # option name -> validity check, for RunSpec.options
    allowed: dict = {}   # option name -> what is allowed, in words (for the error message)
    defaults: dict = {}  # option name -> the value used when the spec does not set it
    # ---- what it is, for the planner, the calibration and the widgets -------------------------
    zero_stage = 0       # over its data-parallel ranks: 0 whole copies; 1 shards the optimizer
    #                      state, 2 the gradients too, 3 the parameters too (Rajbhandari et al.
    #                      2020, section 5); a strategy that splits layers (tp, pp) keeps 0
    memory_layout = None   # a MemoryLayout: how it holds the tiny GPT (None: no prediction)
    planned = False      # the planner proposes it (plan.layouts), in registry order
    precisions = PRECISIONS  # the precisions it trains in
    fp8_all_gather = False   # fp8: gathers the converted weights in FP8 (fsdp)
    supports_checkpoint = True  # it says which pieces of the whole model each rank holds
    #                             (checkpoint_pieces): DCP checkpoints, any layout to any other
    builds_on_meta = False      # True: wrap() gets the model on "meta" and keeps only its part,
    #                             which gpututor.parallel.meta.materialize then makes
    meters_comm = True          # False: torch's own collectives run unmetered, so the records'
    #                             communication fields are None ("not measured"), never 0
    needs_model = None          # the model it can train, if only one (expert parallel: "moe")
    trains_as_one_process = True  # its losses equal one process training the whole batch
    #                               (False: another algorithm, e.g. local SGD's drifting ranks)

    @property
    def shards(self) -> tuple:
        """What it splits over its data-parallel ranks: a prefix of :data:`STATES`."""
        return STATES[:self.zero_stage]

    def option(self, spec, name: str):
        """The value of option ``name`` for ``spec``: the spec's, else this strategy's default."""
        return spec.option(name, self.defaults.get(name))

    def step_collectives(self, spec, model) -> list | None:
        """The collectives one rank runs in one optimizer step of ``spec`` on ``model`` (the
        model as :func:`gpututor.models.build_model` makes it, fp32): a list of ``(op, bytes of
        the full buffer)``, ``op`` one of ``gpututor.formulas.COLLECTIVES``. One rank runs
        none; None means the strategy does not say (the calibration then leaves it out)."""
        return [] if spec.world_size == 1 else None

    # ---- checked before launch ---------------------------------------------------------------
    def validate(self, spec) -> None:
        """Raise ``ValueError`` naming the field if ``spec`` cannot run with this strategy."""
        for name, value in spec.options:
            if name in self.options:
                check_option(name, value, self.options[name], self.allowed.get(name, "?"))
        if spec.precision not in self.precisions:
            raise InvalidValue("precision", spec.precision, self.precisions,
                               f"for strategy={self.name!r}")

    def dims(self) -> tuple:
        """The grid dims this strategy uses (a composed layout: those of all its parts)."""
        return tuple(p.dim for p in self.parts) if self.parts else (self.dim,)

    def data_parallel_size(self, spec) -> int:
        """How many ranks split the global batch between them: the grid's ``dp`` degree."""
        return RankGrid.of(spec, self.dim).degree("dp")

    def data_parallel_rank(self, rank: int, spec) -> int:
        """Which slice of the global batch ``rank`` trains on: its index along ``dp``."""
        return RankGrid.of(spec, self.dim).index(rank, "dp")

    def check_device(self, spec, device: str) -> None:
        """Raise ``ValueError`` if this strategy cannot run ``spec`` on ``device`` ("cuda" or
        "cpu"): checked where the ranks start, not when the spec is made."""

    # ---- in each rank ------------------------------------------------------------------------
    def wrap(self, model: torch.nn.Module, ctx) -> torch.nn.Module:
        """Return the module to train (e.g. wrapped in DDP). ``model`` is already on the device."""
        return model

    def make_optimizer(self, model: torch.nn.Module, spec):
        params = list(model.parameters())
        # torch's optimizers batch a device's tensors into foreach kernels (their default on
        # CUDA, not on CPU), and a batch that mixes DTensors (tp-dtensor's split Linears) with
        # plain tensors fails: "got mixed torch.Tensor and DTensor" (seen on an H200)
        mixed = len({hasattr(p, "device_mesh") for p in params}) > 1
        kw = {"foreach": False} if mixed else {}
        if spec.optimizer == "sgd":
            return torch.optim.SGD(params, lr=spec.lr, momentum=0.9, **kw)
        return torch.optim.AdamW(params, lr=spec.lr, weight_decay=0.0, **kw)

    def full_state_dict(self, model) -> dict:
        """The whole model's parameters as one state dict (collective for sharded strategies)."""
        return getattr(model, "module", model).state_dict()

    def checkpoint_pieces(self, model, aliases: dict) -> list:
        """What this rank holds of the one-process model, for a checkpoint: one
        :class:`~gpututor.parallel.pieces.Piece` per tensor the optimizer updates, with the
        boxes of whole parameters it holds (``aliases``: a tied weight's other names -> its
        first). The default: every parameter under its own name, whole, or a DTensor's shard
        (replicated strategies, pipeline stages, experts, FSDP2). Nothing is communicated."""
        return default_pieces(model, aliases)

    def after_load(self, model) -> None:
        """After a checkpoint filled this rank's pieces: make what depends on them (all ranks
        call it; ZeRO-1/2 all-gather the shards into the whole parameters)."""

    def no_sync(self, model):
        """Context in which backward does not synchronise gradients (accumulation steps)."""
        return nullcontext()

    def sync_gradients(self, model, ctx) -> None:
        """After the last backward of a step: make gradients equal across ranks if needed."""

    def train_step(self, model, optimizer, micro_batches, ctx) -> float:
        """One optimizer step over ``micro_batches``; returns this rank's mean loss.

        The loss trained is the cross-entropy plus the model's auxiliary loss (a MoE's
        load-balancing loss; 0 for the other models); the step's record gets the MoE's tokens
        per expert (``gpututor.moe.expert_load``; None for the other models).

        bf16/fp16 run forward under ``torch.autocast``; fp16 also scales the loss with
        ``torch.amp.GradScaler`` (from scratch: ``gpututor.precision.loss_scaling.DynamicLossScaler``).
        """
        optimizer.zero_grad(set_to_none=True)
        spec, total = ctx.spec, 0.0
        autocast = autocast_for(spec.precision, ctx.device)
        scaler = _grad_scaler(ctx)
        last = len(micro_batches) - 1
        for i, (inputs, targets) in enumerate(micro_batches):
            # Only the last micro-batch's backward needs to communicate: the earlier ones just
            # add into .grad locally (nanoGPT turns DDP's sync off the same way).
            with (self.no_sync(model) if i < last else nullcontext()):
                with ctx.phase("forward"), autocast:
                    logits = model(inputs)
                    loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
                    loss = (loss + auxiliary_loss(model)) / len(micro_batches)
                    del logits  # backward does not need them: free them before it runs
                with ctx.phase("backward"):
                    (scaler.scale(loss) if scaler else loss).backward()
                    if i == last and ctx.after_backward is not None:
                        ctx.after_backward()
            total += loss.item()
        ctx.extra.update(expert_load(model))
        with ctx.phase("sync"):
            self.sync_gradients(model, ctx)
        with ctx.phase("optimizer"):
            if scaler is None:
                optimizer.step()
            else:  # unscale, agree on inf/nan over all ranks, skip the step if any, adjust
                scaler.unscale_(optimizer)
                agree_found_inf(scaler, optimizer)
                scaler.step(optimizer)
                scaler.update()
        return total


def parameter_names(model: torch.nn.Module) -> dict[int, str]:
    """id(parameter) -> its first name in ``model`` (for errors that name parameters)."""
    names = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), name)
    return names


def unused_error(strategy: str, names: list[str]) -> RuntimeError:
    """The error of a backward that gave no gradient to trainable parameters ``names``: their
    gradient is not averaged over ranks (or, sharded, the whole unit's is not), so the run would
    go wrong silently. torch's DDP raises in the same case unless ``find_unused_parameters``."""
    return RuntimeError(
        f"{strategy}: {len(names)} trainable parameter(s) received no gradient in this backward: "
        f"{', '.join(sorted(names))}. Every trainable parameter must take part in the loss; "
        f"freeze the ones the loss does not use (p.requires_grad_(False)) before wrapping.")


def agree_found_inf(scaler, optimizer, group=None) -> None:
    """Make every rank's "found inf/nan" flags for ``optimizer`` the maximum over ``group``.

    ``GradScaler.unscale_`` checks only the gradients this rank holds. With data parallel they
    are the same on every rank, but sharded (ZeRO, FSDP) and tensor-parallel ranks hold
    different pieces: one rank can overflow alone, skip its step while the others take theirs,
    and the copies drift apart. After this all-reduce (what torch's ``ShardedGradScaler`` does
    for FSDP) all ranks skip together and halve the scale together. Call it between
    ``scaler.unscale_(optimizer)`` and ``scaler.step(optimizer)``."""
    if not dist.is_initialized() or dist.get_world_size(group) == 1:
        return
    flags = scaler._per_optimizer_states[id(optimizer)]["found_inf_per_device"]
    for flag in flags.values():   # one per device this rank's parameters live on
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)


def autocast_for(precision: str, device: torch.device):
    """``torch.autocast`` to bf16/fp16 on ``device``, or nothing for fp32 and fp8 (whose
    Float8 Linears cast their own operands; the rest computes in fp32)."""
    if precision in ("fp32", "fp8"):
        return nullcontext()
    return torch.autocast(device.type, dtype=torch_dtype(precision))


def _grad_scaler(ctx):
    """fp16 only: the run's ``GradScaler``, kept on the rank's StepContext from step to step."""
    if ctx.spec.precision != "fp16":
        return None
    if getattr(ctx, "grad_scaler", None) is None:
        ctx.grad_scaler = torch.amp.GradScaler(ctx.device.type)
    return ctx.grad_scaler
