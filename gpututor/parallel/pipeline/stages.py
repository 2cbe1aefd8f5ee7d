"""Pipeline parallel's pieces: cut the tiny GPT into stages, and the checks and helpers that
every pipeline strategy shares (from scratch in ``schedules.py``, production in
``torch_pipelining.py``).

Stage s of p holds consecutive transformer blocks (stage 0 also the embeddings; the last stage
also the final norm, the head and the loss). The token embedding is tied to the head (GPT-2),
and they now live on the first and the last stage: each keeps a copy, and after backward the
two copies' gradients are summed (Megatron's "embedding group"), so both take the same step.

With an interleaved schedule each rank holds several *model chunks* (virtual stages): the model
is cut into p·v stages, and :class:`GPTChunks` keeps the v of them a rank owns (rank r: stages
r, r+p, r+2p, ... in Megatron's loop; r and 2p-1-r in the V of ZB-V).
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from ... import checks
from ...checks import InvalidValue
from ...models import GPT
from ..base import MemoryLayout, Strategy
from ..exchange import all_gather_tensors
from ..mesh import DimGroup, RankGrid, degree_field, degree_of, dim_group
from ..meta import is_meta
from ...measure.timing import synchronize

SCHEDULES = ("naive", "gpipe", "1f1b", "interleaved-1f1b")
DEFAULT_SCHEDULE, DEFAULT_MICROBATCHES, DEFAULT_VIRTUAL_STAGES = "1f1b", 4, 2
SENDS, DEFAULT_SENDS = ("wait", "post"), "wait"   # the from-scratch pipeline's sends
# schedules whose ranks hold several model chunks, and where virtual stage s lives:
# "loop" (Megatron): rank s mod p; "v" (ZB-V): down the ranks and back up, rank 0 holds both ends
CHUNKED = {"interleaved-1f1b": "loop", "interleaved-zero-bubble": "loop", "zbv": "v"}


# ---- the stages --------------------------------------------------------------------------------

def block_range(n_layer: int, stage: int, stages: int) -> range:
    """The blocks stage ``stage`` holds: consecutive, as even as they go (the first get more)."""
    per, extra = divmod(n_layer, stages)
    start = stage * per + min(stage, extra)
    return range(start, start + per + (stage < extra))


class GPTStage(nn.Module):
    """Stage ``index`` of ``count`` of a :class:`~gpututor.models.GPT`: the pieces it owns,
    under the names they have in the whole model (so state dicts can be merged back)."""

    def __init__(self, model: GPT, index: int, count: int):
        super().__init__()
        self.index = index
        self.is_first, self.is_last = index == 0, index == count - 1
        self.d_model = model.cfg.d_model   # width of the activations passed between stages
        self.activation_checkpointing = model.activation_checkpointing
        if self.is_first:
            self.tok_emb, self.pos_emb = model.tok_emb, model.pos_emb
        self.blocks = nn.ModuleDict({str(i): model.blocks[i]
                                     for i in block_range(model.cfg.n_layer, index, count)})
        if self.is_last:
            self.ln_f = model.ln_f
            if self.is_first:   # one stage: the tie stays as it is
                self.head = model.head
            else:               # the head's own copy of the tied weight (see tied_weight_sync)
                with torch.device(model.tok_emb.weight.device):   # "meta" until made
                    self.head = nn.Linear(model.cfg.d_model, model.cfg.vocab_size, bias=False)
                self.head.weight = nn.Parameter(model.tok_emb.weight.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Token ids (first stage) or activations in; activations or logits (last stage) out."""
        if self.is_first:
            x = self.tok_emb(x) + self.pos_emb(torch.arange(x.shape[1], device=x.device))
        for block in self.blocks.values():
            if self.activation_checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.head(self.ln_f(x)) if self.is_last else x

    def tied_weight(self) -> torch.Tensor | None:
        """This stage's copy of the embedding/head weight, if it holds one."""
        if self.is_first:
            return self.tok_emb.weight
        return self.head.weight if self.is_last else None


def virtual_stages(spec) -> int:
    """How many model chunks each rank holds: v for a chunked schedule, else 1."""
    if spec.option("schedule", DEFAULT_SCHEDULE) not in CHUNKED:
        return 1
    return spec.option("virtual_stages", DEFAULT_VIRTUAL_STAGES)


def chunk_owner(stage: int, p: int, style: str) -> int:
    """The pipeline rank that holds virtual stage ``stage`` (of p·v) in layout ``style``."""
    if style == "v":
        return stage if stage < p else 2 * p - 1 - stage
    return stage % p


class GPTChunks(nn.Module):
    """The model chunks rank ``pp.rank`` holds: its ``v`` virtual stages of ``pp.size · v``,
    each a :class:`GPTStage` in :attr:`chunks`. Their modules are registered here under the
    whole model's names, as in one GPTStage, so making them, the optimizer and merging the
    stages' state dicts work unchanged. Each chunk's ``pp`` is a group of the p·v virtual
    stages: its ``rank`` the chunk's virtual stage, its ``ranks`` the rank holding each."""

    def __init__(self, model: GPT, pp: DimGroup, v: int, style: str = "loop"):
        super().__init__()
        count = pp.size * v
        owner = [chunk_owner(s, pp.size, style) for s in range(count)]
        chunks = [GPTStage(model, s, count) for s in range(count) if owner[s] == pp.rank]
        self.is_first, self.is_last = chunks[0].is_first, chunks[-1].is_last
        self.d_model, self.pp = model.cfg.d_model, pp
        self.blocks = nn.ModuleDict()
        for chunk in chunks:
            chunk.pp = DimGroup("pp", chunk.index, count, [pp.ranks[r] for r in owner], pp.group)
            for name, child in chunk.named_children():
                if name == "blocks":
                    self.blocks.update(child)
                else:                # tok_emb and pos_emb (stage 0), ln_f and head (the last)
                    self.add_module(name, child)
        self.chunks = chunks         # a plain list: their modules are registered once, above

    def train(self, mode: bool = True) -> "GPTChunks":
        super().train(mode)
        for chunk in self.chunks:    # not children of this module: tell them too
            chunk.training = mode
        return self

    def tied_weight(self) -> torch.Tensor | None:
        """This rank's copy of the embedding/head weight, if it holds one (ZB-V's rank 0 holds
        both copies: see :func:`tied_weight_sync`)."""
        if self.is_first:
            return self.tok_emb.weight
        return self.head.weight if self.is_last else None


def embedding_group(ctx):
    """The process group of the first and the last stage of this rank's pipeline. Every rank
    must call this (each ``new_group`` is collective, one per pipeline of the grid)."""
    pp = dim_group(ctx, "pp")
    if pp.size <= 2:
        return pp.group          # two stages: the pipeline's own group is first + last
    grid = ctx.grid if ctx.grid is not None else RankGrid((("pp", ctx.world_size),))
    mine = None
    for ranks in grid.groups("pp"):
        made = dist.new_group([ranks[0], ranks[-1]])
        if ctx.rank in ranks:
            mine = made
    return mine


def tied_weight_sync(stage: GPTStage, group, ctx) -> None:
    """Sum the gradients of the embedding's two copies, so both take the same step."""
    if stage.is_first and stage.is_last:
        if stage.head.weight is not stage.tok_emb.weight:   # both copies here (ZB-V's rank 0)
            total = stage.head.weight.grad + stage.tok_emb.weight.grad
            stage.head.weight.grad.copy_(total)
            stage.tok_emb.weight.grad.copy_(total)
        return                                              # (one stage: one tied weight)
    if not (stage.is_first or stage.is_last):   # a middle stage
        return
    grad = stage.tied_weight().grad
    synchronize(grad.device)        # on a GPU: the backward queued before, then the clock
    start = time.perf_counter()
    dist.all_reduce(grad, group=group)
    synchronize(grad.device)        # NCCL returns when queued: stop when it is done
    seconds = time.perf_counter() - start
    # an all-reduce of two ranks (the first and last stage): each sends its copy's gradient
    # once (bus factor 2(n-1)/n = 1)
    ctx.comm.add(grad.nbytes, seconds, op="all_reduce", group_size=2)
    ctx.comm.exposed_s += seconds


def gather_stages(state: dict, pp: DimGroup) -> dict[str, torch.Tensor]:
    """The whole model's state dict, merged from every stage's ``state`` (a collective of the
    pipeline's ranks)."""
    parts = all_gather_tensors(state, group=pp.group)   # tensors, not pickles (exchange.py)
    merged = {k: v for part in parts for k, v in part.items()}
    if "head.weight" not in merged or "tok_emb.weight" not in merged:
        raise RuntimeError("the stages do not hold the whole model")
    return merged


def check_chunks(spec, strategy: str, n_layer: int) -> None:
    """Raise ``ValueError`` unless ``spec``'s schedule and ``virtual_stages`` fit together."""
    schedule, v = spec.option("schedule", DEFAULT_SCHEDULE), spec.option("virtual_stages")
    if schedule not in CHUNKED:
        if v not in (None, 1):
            raise InvalidValue("option virtual_stages", v, "None or 1 (more only with schedule "
                               + " or ".join(repr(s) for s in CHUNKED) + ")",
                               f"with schedule={schedule!r} (one stage per rank)")
        return
    v, (stages, named) = virtual_stages(spec), degree_of(spec, "pp")
    if CHUNKED[schedule] == "v" and v != 2:
        raise InvalidValue("option virtual_stages", v, "2 (ZB-V holds two chunks per rank, in a "
                           "V)", f"with schedule={schedule!r}")
    if v < 2:
        raise InvalidValue("option virtual_stages", v, "2 or more (one chunk per rank is "
                           "schedule '1f1b')", f"with schedule={schedule!r}")
    if RankGrid.of(spec, "pp").dims != ("pp",):
        raise InvalidValue("schedule", schedule, "a schedule of one stage per rank (this one "
                           f"runs with a pipeline alone: strategy {strategy!r} without a grid)",
                           f"for strategy={spec.strategy!r}")
    if stages < 2:
        raise InvalidValue(degree_field(spec, "pp"), stages, "2 or more pipeline ranks",
                           f"with schedule={schedule!r}")
    if n_layer % (stages * v):
        fits = [d for d in range(2, n_layer // stages + 1) if n_layer % (stages * d) == 0]
        raise InvalidValue("option virtual_stages", v,
                           " or ".join(map(str, fits)) or "none (use a larger model_size)",
                           f"with {named} and model_size={spec.resolved_model_size!r}: its "
                           f"{n_layer} blocks must split evenly into {stages} x {v} chunks")
    m = microbatches(spec)
    if m % stages:
        raise InvalidValue("option microbatches", m, f"a multiple of {stages} (micro-batches go "
                           "through the chunks in groups of p, as in Megatron)",
                           f"with schedule={schedule!r} on {stages} pipeline ranks")


def microbatches(spec) -> int:
    return 1 if spec.option("schedule", DEFAULT_SCHEDULE) == "naive" else \
        spec.option("microbatches", DEFAULT_MICROBATCHES)


def check_pipeline(spec, strategy: str) -> None:
    """Raise ``ValueError`` unless ``spec`` can be cut into its ``pp`` degree of stages."""
    if spec.model != "gpt":
        raise InvalidValue("model", spec.model, "'gpt' (a stack of blocks to cut into stages)",
                           f"for strategy={strategy!r}")
    n_layer = spec.model_config.n_layer
    stages, _ = degree_of(spec, "pp")
    if stages > n_layer:
        raise InvalidValue(degree_field(spec, "pp"), stages, f"1 to {n_layer}",
                           f"for strategy={strategy!r} with model_size="
                           f"{spec.resolved_model_size!r}: each stage needs at least one of its "
                           f"{n_layer} blocks")
    if spec.option("schedule") == "naive" and spec.option("microbatches", 1) != 1:
        raise InvalidValue("option microbatches", spec.option("microbatches"),
                           "1; use schedule 'gpipe' or '1f1b' for micro-batches",
                           "with schedule='naive' (it runs the whole batch at once)")
    m, dp = microbatches(spec), RankGrid.of(spec, "pp").degree("dp")
    if spec.batch_size % (m * dp):
        raise InvalidValue("batch_size", spec.batch_size, f"a multiple of {m * dp}",
                           f"with microbatches={m}"
                           f"{' (the default)' if spec.option('microbatches') is None else ''}"
                           f"{f' on {dp} data-parallel ranks' if dp > 1 else ''}")
    check_chunks(spec, strategy, n_layer)


def split_micro_batches(micro_batches: list, m: int) -> list:
    """The step's batch (as the worker chunked it) cut into the pipeline's m micro-batches."""
    inputs = torch.cat([x for x, _ in micro_batches])
    targets = torch.cat([y for _, y in micro_batches])
    return list(zip(inputs.chunk(m), targets.chunk(m)))


def share_loss(loss: float, ctx) -> float:
    """Only the last stage computed the loss: broadcast it, so every rank reports it."""
    pp, schedule = dim_group(ctx, "pp"), ctx.spec.option("schedule", DEFAULT_SCHEDULE)
    last = chunk_owner(pp.size * virtual_stages(ctx.spec) - 1, pp.size, CHUNKED.get(schedule, ""))
    value = torch.tensor([loss], dtype=torch.float64, device=ctx.device)
    dist.broadcast(value, src=pp.global_rank(last), group=pp.group)
    return value.item()


def pipeline_options(schedules) -> tuple[dict, dict]:
    """A pipeline strategy's options (``schedule``, ``microbatches``, ``virtual_stages``) and
    what each allows."""
    options = {"schedule": checks.one_of(schedules), "microbatches": checks.int_in(1, 1024),
               "virtual_stages": checks.int_in(1, 64)}
    allowed = {"schedule": "one of " + ", ".join(schedules),
               "microbatches": "an integer in [1, 1024]",
               "virtual_stages": "an integer in [1, 64]: model chunks per rank, with schedule "
                                 + " or ".join(repr(s) for s in CHUNKED if s in schedules)}
    return options, allowed


class PipelineStrategy(Strategy):
    """What every pipeline strategy shares: the checks, the batch (every stage sees all of it;
    only the first reads the inputs) and the merged state dict."""

    dim = "pp"
    builds_on_meta = True        # each rank makes only its own stage (parallel/meta.py)
    defaults = {"schedule": DEFAULT_SCHEDULE, "microbatches": DEFAULT_MICROBATCHES}
    precisions = ("fp32", "bf16")   # fp16 would need loss scaling across stages: not built
    memory_layout = MemoryLayout(pipeline=True,
                                 note="1F1B: stage s keeps min(p - s, m) micro-batches")

    def step_collectives(self, spec, model):
        """Per micro-batch and model chunk, its activations (``b/m·s·h`` values) sent forward
        to the next stage and their gradient sent back (priced as a broadcast: one message of
        the whole buffer)."""
        if spec.world_size == 1:
            return []
        m, cfg = microbatches(spec), model.cfg
        batch = spec.batch_size // self.data_parallel_size(spec)
        act = batch // m * spec.seq_len * cfg.d_model * next(model.parameters()).element_size()
        return [("broadcast", act)] * (2 * m * virtual_stages(spec))

    def validate(self, spec) -> None:
        super().validate(spec)
        check_pipeline(spec, self.name)

    def cut(self, model, ctx) -> "GPTStage | GPTChunks":
        """This rank's stage of ``model`` (its index along ``pp``), or its model chunks with an
        interleaved schedule, on the rank's device."""
        pp, v = dim_group(ctx, "pp"), virtual_stages(ctx.spec)
        if v > 1:
            stage = GPTChunks(model, pp, v, CHUNKED[ctx.spec.option("schedule")])
        else:
            stage = GPTStage(model, pp.rank, pp.size)
            stage.pp = pp
        return stage if is_meta(stage) else stage.to(ctx.device)

    def full_state_dict(self, model) -> dict:
        stage = getattr(model, "module", model)
        return gather_stages(stage.state_dict(), stage.pp)
