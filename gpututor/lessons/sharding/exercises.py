"""Lesson 03's exercise checkers: each takes the learner's answer and the lesson's own objects
(its runs, the numbers of the question) and derives what it expects, so the notebook shows only
the call. ``...`` means "not answered yet".

- :func:`check_state_saving`: the bytes of model state ZeRO-2 would save each rank against data
  parallel on more ranks than the runs used (4), counted on the runs' model
  (:func:`zero2_saving_per_rank`).
- :func:`check_fewest_gpus`: the fewest GPUs on which ZeRO-2 and ZeRO-3 each hold a model's state
  and the room kept for activations, by the formula (``plan.memory.model_state_bytes``).
- :func:`check_zero3_sent`: the bytes each rank would send per step under ZeRO-3 on more ranks
  than any run here used (8), counted on the run's model (:func:`zero3_sent_per_rank`).
- :func:`check_reduce_scatter`: the learner's reduce-scatter (ZeRO-2's gradient partition) from
  point-to-point messages, run in real ranks on 3 and 4 ranks against the package's own
  (``parallel.sharding.flat.reduce_scatter_mean``) with every built-in collective refused.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist
import torch.nn as nn

from ...config import RunSpec
from ...formulas import bus_factor
from ...i18n import say, tr
from ...measure.timing import CommMeter
from ...parallel.data_parallel.ring import ring_allreduce
from ...parallel.sharding.flat import FlatShard, reduce_scatter_mean
from ...plan.memory import model_state_bytes
from ..common.code_exercise import CalledTheReference, call_refusing
from ..common.exercises import as_number, check_answer, records_in_ranks
from ..common.guards import OnlyPointToPoint, RecordedSends

STATE = ("params", "grads", "optimizer")


# ---- exercise 1: what ZeRO-2 saves on more ranks, counted ---------------------------------------

def measured_state(summary: dict, rank: int = 0) -> float:
    """Bytes of model state (parameters + gradients + optimizer state) ``rank`` held between
    steps, as the run measured them."""
    return sum(summary["mem_by_category"][c][rank] or 0 for c in STATE)


def zero2_saving_per_rank(spec, world_size: int) -> float:
    """Bytes of gradients and AdamW moments (4 + 8 per fp32 parameter) each rank keeps under
    ``ddp`` less than under ``zero2`` on ``world_size`` ranks, counted on ``spec``'s model: ddp
    keeps them whole, zero2 one of ``world_size`` slices of each unit's padded flat vector
    (:func:`~gpututor.parallel.sharding.flat.padded_unit_bytes`). AdamW's step counters, a few
    hundred bytes, are left out. Counted on the model, not run."""
    from ...models import build_model, count_parameters
    from ...parallel.sharding.flat import padded_unit_bytes
    model = build_model(spec.replace(world_size=world_size, mesh=None))
    padded = sum(padded_unit_bytes(model, world_size))            # 4 bytes per padded number
    return 12 * count_parameters(model) - 3 * padded / world_size


def check_state_saving(answer, runs: dict, world_size: int = 4) -> None:
    """How many bytes of model state each rank would hold under ``zero2`` less than under
    ``ddp`` on ``world_size`` ranks: a case no run recorded (the runs used 2), counted on the
    runs' model within 1 %. The saving the 2-rank runs measured is named as such."""
    what = tr("model state zero2 saves each rank against ddp on {world} ranks", world=world_size)
    if answer is ...:
        check_answer(answer, None, what)
        return
    if "zero2" not in runs or "ddp" not in runs:
        check_answer(answer, None, what)
    number = as_number(answer)
    recorded = measured_state(runs["ddp"]) - measured_state(runs["zero2"])
    if number is not None and math.isclose(number, recorded, rel_tol=0.01) \
            and runs["zero2"]["world_size"] != world_size:
        raise AssertionError(tr("{answer} is what the runs on {world} ranks measured; on "
                                "{target} ranks each rank keeps a different share.",
                                answer=repr(answer), world=runs["zero2"]["world_size"],
                                target=world_size))
    expected = zero2_saving_per_rank(RunSpec(**runs["zero2"]["spec"]), world_size)
    check_answer(answer, expected, what, rel_tol=0.01, source="counted")


# ---- exercise 2: which stage first fits, at scale (formula) -----------------------------------

def fewest_gpus(n_params: float, zero_stage: int, device_bytes: float,
                other_bytes: float = 0.0, convention: str = "mixed-adam",
                most: int = 100_000) -> int | None:
    """The fewest data-parallel ranks on which ``zero_stage``'s model state plus ``other_bytes``
    fits in ``device_bytes`` per rank, by the formula; None if not even ``most`` ranks do (stages
    0 and 1 keep a whole copy of parameters or gradients: more ranks do not shrink it)."""
    for world in range(1, most + 1):
        state = model_state_bytes(n_params, zero_stage=zero_stage, dp=world,
                                  convention=convention)["total"]
        if state + other_bytes <= device_bytes:
            return world
    return None


def check_fewest_gpus(answer, n_params: float = 13e9, device_bytes: float = 40e9,
                      other_bytes: float = 8e9, convention: str = "mixed-adam") -> None:
    """``answer``: the fewest GPUs on which ZeRO-2 fits, and the fewest on which ZeRO-3 fits, as a
    pair of whole numbers, exactly as the formula gives them (the defaults: lesson 03's exercise
    2, a 13 B model with mixed-precision Adam on 40 GB GPUs keeping 8 GB each)."""
    what = "fewest GPUs on which ZeRO-2 and ZeRO-3 fit"
    if answer is ...:
        check_answer(answer, None, what)
        return
    expected = tuple(fewest_gpus(n_params, stage, device_bytes, other_bytes, convention)
                     for stage in (2, 3))
    pair = tuple(answer) if isinstance(answer, (tuple, list)) else None
    numbers = None if pair is None or len(pair) != 2 else tuple(as_number(x) for x in pair)
    if numbers is None or None in numbers or any(n != int(n) for n in numbers):
        raise AssertionError(tr("{what}: {answer} is not a pair of whole numbers (ZeRO-2's "
                                "GPUs, ZeRO-3's GPUs).", what=tr(what), answer=repr(answer)))
    if tuple(int(n) for n in numbers) != expected:
        raise AssertionError(tr("{what}: {answer} is not what the formula gives. Try again.",
                                what=tr(what), answer=repr(answer)))
    say("Correct: ZeRO-2 fits from {two} GPUs, ZeRO-3 from {three} (the formula, exactly).",
             two=expected[0], three=expected[1])


# ---- exercise 3: what ZeRO-3 would send on more ranks, counted ------------------------------

def zero3_sent_per_rank(spec, world_size: int) -> float:
    """Bytes each rank of ``spec``'s model would send per step under ``zero3`` on ``world_size``
    ranks, with the ring algorithms: the strategy's own list of collectives (each unit's flat
    vector, padded to ``world_size`` slices) times each one's bus factor. Counted on the model,
    not run."""
    from ...models import build_model
    from ...parallel import get_strategy
    wide = spec.replace(strategy="zero3", world_size=world_size, mesh=None)
    collectives = get_strategy("zero3").step_collectives(wide, build_model(wide))
    return sum(nbytes * bus_factor(op, world_size) for op, nbytes in collectives)


def check_zero3_sent(answer, run: dict, world_size: int = 8) -> None:
    """The bytes each rank would send per step if ``run`` (the lesson's ``zero3`` run) ran on
    ``world_size`` ranks: a case no run recorded, counted on the run's model (within 1 %)."""
    if run.get("strategy") != "zero3":
        raise AssertionError(tr("pass the zero3 run of section 8 (four), not a {strategy} run.",
                                strategy=run.get("strategy")))
    what = tr("bytes each rank sends per step under zero3 on {world} ranks", world=world_size)
    recorded = run.get("comm_wire_bytes_per_step")
    number = as_number(answer) if answer is not ... else None
    if number is not None and recorded and math.isclose(number, recorded, rel_tol=0.01) \
            and run["world_size"] != world_size:
        raise AssertionError(tr("{answer} is what the run on {world} ranks recorded; on "
                                "{target} ranks each rank sends a different share of each "
                                "collective.", answer=repr(answer), world=run["world_size"],
                                target=world_size))
    expected = zero3_sent_per_rank(RunSpec(**run["spec"]), world_size) if answer is not ... \
        else None
    check_answer(answer, expected, what, rel_tol=0.01, source="counted")


# ---- exercise 4: ZeRO-2's gradient partition, a reduce-scatter by hand (real ranks) ----------

SPLITTERS = {"tensor_split": torch.tensor_split, "chunk": torch.chunk}


def unit_gradient(rank: int, world: int) -> torch.Tensor:
    """A ZeRO unit's flat gradient on ``rank``: a small block (a Linear and a LayerNorm, the same
    on every rank) after a backward on this rank's own batch, laid end to end and zero-padded to
    ``world`` equal slices, as ZeRO-2 does when the block's backward is done."""
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(7, 5), nn.LayerNorm(5))
    batch = torch.randn(4, 7, generator=torch.Generator().manual_seed(100 + rank))
    block(batch).square().sum().backward()
    params = list(block.parameters())
    return FlatShard(params, rank, world).flatten([p.grad for p in params])


def _error(got, want: torch.Tensor) -> float:
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return float("inf")
    return float((got.detach().to(want.dtype) - want).abs().max())


@dataclass(frozen=True)
class ReduceScatterCheck:
    """In every rank: the candidate's piece of the average against the package's. While the
    candidate runs every built-in collective refuses (:class:`OnlyPointToPoint`), and so do the
    package's own reduce-scatter and ring; the bytes the rank sends are counted. Three flat
    vectors: a unit's padded gradient (equal pieces, compared with ``reduce_scatter_mean``) and
    two sizes that are no multiple of the world size (``tensor_split`` and ``chunk`` pieces
    differ there, and either is accepted; both give every rank a piece)."""

    candidate: Callable

    def __call__(self, spec, rank, world, device, emit):
        gen = torch.Generator().manual_seed(1000 * rank + world)
        # world² + 1 and 1001 elements: torch.chunk still gives every rank a piece (n = world·k + 1
        # does only for k >= world - 1), and its pieces differ from tensor_split's
        flats = [unit_gradient(rank, world), torch.randn(world * world + 1, generator=gen),
                 torch.randn(1001, generator=gen)]
        for step, flat in enumerate(flats):
            average = flat.clone()
            dist.all_reduce(average)
            average /= world
            if step == 0:   # ZeRO's own reduce-scatter: this rank's slice of the average
                mine = reduce_scatter_mean(flat.clone(), CommMeter(world_size=world))
                assert torch.allclose(mine, average.tensor_split(world)[rank], atol=1e-6)
            with OnlyPointToPoint() as guard, RecordedSends() as sent:
                try:
                    got = call_refusing(self.candidate, (flat.clone(), rank, world),
                                        refused=(reduce_scatter_mean, ring_allreduce))
                    reference = False
                except CalledTheReference:
                    got, reference = None, True
                except RuntimeError:
                    if not guard.used:
                        raise
                    got, reference = None, False
            if guard.used or reference:
                emit({"step": step, "numel": flat.numel(),
                      "built_in": guard.used[0] if guard.used else None, "reference": reference})
                return   # the other ranks stop too: they would wait for this one
            record = {"step": step, "numel": flat.numel(), "sent": sent.bytes, "errors": {},
                      "needed": {}, "summed": False, "piece_of": None,
                      "shape": list(got.shape) if isinstance(got, torch.Tensor) else None,
                      "type": type(got).__name__}
            for how, split in SPLITTERS.items():
                pieces = split(average, world)
                record["errors"][how] = _error(got, pieces[rank])
                record["needed"][how] = (flat.numel() - pieces[rank].numel()) * flat.element_size()
                record["summed"] |= _error(got, pieces[rank] * world) <= 1e-5
                other = [q for q in range(world) if q != rank and _error(got, pieces[q]) <= 1e-5]
                record["piece_of"] = record["piece_of"] if not other else other[0]
            emit(record)


def check_reduce_scatter(candidate, world_sizes: tuple = (3, 4)) -> None:
    """Run ``candidate(flat, rank, world)`` (this rank's piece of the average of ``flat`` over
    the ranks) in real ranks on 3 and on 4 ranks against the package's reduce-scatter, from
    point-to-point messages only, sending no more than a reduce-scatter must. Prints what matched;
    raises ``AssertionError`` saying what did not."""
    if candidate is ...:
        say("reduce-scatter: not answered yet. Define your function and pass it in.")
        return
    for world in world_sizes:
        spec = RunSpec(world_size=world, device="cpu", timeout=20)
        records = records_in_ranks(ReduceScatterCheck(candidate), spec,
                                   "reduce-scatter: on {world} ranks your function failed: "
                                   "{error}")
        stopped = next((r for r in records if r.get("built_in") or r.get("reference")), None)
        if stopped is not None and stopped["built_in"]:
            raise AssertionError(tr("reduce-scatter: your function called the built-in collective "
                                    "{name}: build it from dist.isend / dist.recv only.",
                                    name=stopped["built_in"]))
        if stopped is not None:
            raise AssertionError(tr("reduce-scatter: your function ran the package's own "
                                    "reduce-scatter or ring: write the messages yourself."))
        for step in sorted({r["step"] for r in records}):
            _judge([r for r in records if r["step"] == step], world)
    say("Correct: each rank's piece of the average, as the package's reduce-scatter gives it, "
             "on {worlds} ranks, from point-to-point messages only and no more bytes than a "
             "reduce-scatter must send.", worlds=" & ".join(map(str, world_sizes)))


def _judge(records: list[dict], world: int) -> None:
    """One flat vector on every rank: the pieces of one split, right on every rank, then the bytes."""
    numel = records[0]["numel"]
    right = [how for how in SPLITTERS if all(r["errors"][how] <= 1e-5 for r in records)]
    if not right:
        worst = max(records, key=lambda r: min(r["errors"].values()))
        where = dict(world=world, numel=numel, rank=worst["rank"])
        if worst["summed"]:
            raise AssertionError(tr("reduce-scatter: on {world} ranks, a flat vector of {numel} "
                                    "elements: rank {rank}'s piece is the sum over the ranks, "
                                    "not their average (ZeRO averages the gradients, as data "
                                    "parallel does).", **where))
        if worst["piece_of"] is not None:
            raise AssertionError(tr("reduce-scatter: on {world} ranks, a flat vector of {numel} "
                                    "elements: rank {rank} returned rank {other}'s piece; rank r "
                                    "keeps the r-th piece (as FlatShard.my_slice).",
                                    other=worst["piece_of"], **where))
        if worst["shape"] is None:
            raise AssertionError(tr("reduce-scatter: on {world} ranks, a flat vector of {numel} "
                                    "elements: rank {rank} returned a {type}, not a tensor (its "
                                    "piece of the average).", type=worst["type"], **where))
        if min(worst["errors"].values()) == float("inf"):
            raise AssertionError(tr("reduce-scatter: on {world} ranks, a flat vector of {numel} "
                                    "elements: rank {rank} returned a tensor of shape {shape}, not "
                                    "its piece (the rank-th of world pieces, by tensor_split or "
                                    "chunk).", shape=tuple(worst["shape"]), **where))
        raise AssertionError(tr("reduce-scatter: on {world} ranks, a flat vector of {numel} "
                                "elements: rank {rank}'s piece differs from the average by "
                                "{error:.3g}.", error=min(worst["errors"].values()), **where))
    how = right[0]
    over = max(records, key=lambda r: r["sent"] - r["needed"][how])
    if over["sent"] > over["needed"][how]:
        raise AssertionError(tr("reduce-scatter: on {world} ranks, a flat vector of {numel} "
                                "elements: rank {rank} sent {sent:,} bytes, more than a "
                                "reduce-scatter must: each rank needs to send only the pieces "
                                "the others keep, the vector less its own piece ((N-1)/N of it "
                                "when the pieces are equal). Did you send whole vectors, or "
                                "all-reduce and then slice?", world=world, numel=numel,
                                rank=over["rank"], sent=over["sent"]))
