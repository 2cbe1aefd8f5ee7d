"""Lesson 03b's exercise checker: :func:`check_my_wrap` runs the learner's
``my_wrap(module) -> (model, optimizer)`` in real ranks on models the lesson never shows
(``checked_models.py``: repeated blocks of another class, in an ``nn.Sequential`` or an
``nn.ModuleList``, a frozen layer, a tied embedding), at a fixed and a drawn size, on 2 and on 3
ranks, and asks of what it returns:

- gpututor's from-scratch ZeRO3, not torch's ``fully_shard`` (recognised by its ``FSDPModule``
  class or its DTensor parameters);
- that every trainable parameter is sharded (none kept whole with ``keep_whole``; so no rank
  holds all of them before the first step), that no trainable parameter of a repeated block is
  left to the root's unit (it stays gathered for the whole forward: each block needs a unit of
  its own), and that the root plus the largest other unit is less than the whole model;
- after ``STEPS`` AdamW steps, every parameter within ``TOLERANCE`` of one process trained on the
  whole batch, and every frozen one bit for bit unchanged.

``...`` means "not answered yet".
"""
from __future__ import annotations

import random
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from ...config import RunSpec
from ...i18n import say, tr
from ...parallel.sharding.zero3 import ZeRO3
from ..common.exercises import records_in_ranks
from .checked_models import BLOCK_CONTAINERS, CHECKED_MODELS
from ...data import vocab_size
from .training import SEED, STEPS, one_process, train_wrapped

# AdamW moves every weight by about lr = 1e-3 a step whatever its gradient's size, so a rank
# stepping on its own gradient, a missed step or decay of a frozen weight is off by ~1e-3; sums
# in another order (the ranks' average against one process's mean) differ by a few 1e-6.
TOLERANCE = 1e-4
FIXED = (("SequentialStack", 32, 3, 2), ("ListStack", 40, 3, 3))   # model, width, depth, ranks


def _is_torch_fsdp(model) -> bool:
    from torch.distributed.fsdp import FSDPModule
    return isinstance(model, FSDPModule) or any(
        hasattr(p, "to_local") for p in model.parameters())


def _trainable_held(model, optimizer) -> int:
    """Bytes of trainable parameters this rank holds (each storage once)."""
    seen, total = set(), 0
    params = list(model.parameters()) + [p for g in optimizer.param_groups for p in g["params"]]
    for p in params:
        local = p.to_local() if hasattr(p, "to_local") else p
        storage = local.untyped_storage()
        if p.requires_grad and storage.nbytes() and storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += storage.nbytes()
    return total


@dataclass(frozen=True)
class WrapCheck:
    """In every rank, for each ``(model name, width, depth)``: build it as one process does,
    wrap it with the candidate, look at what came back, train it (``training.train_wrapped``)."""

    candidate: Callable
    cases: tuple

    def __call__(self, spec, rank, world, device, emit):
        vocab = vocab_size()
        for index, (name, width, depth) in enumerate(self.cases):
            torch.manual_seed(SEED)
            module = CHECKED_MODELS[name](vocab, width, depth)
            whole = sum(p.nbytes for p in dict.fromkeys(module.parameters()) if p.requires_grad)
            record = {"step": index, "model": name, "width": width, "depth": depth,
                      "whole": whole, "error": None, "kind": None}
            try:
                got = self.candidate(module)
                if not (isinstance(got, (tuple, list)) and len(got) == 2):
                    record["kind"] = "not a pair"
                    emit(record)
                    continue
                model, optimizer = got
                record["kind"] = "torch" if _is_torch_fsdp(model) else \
                    "zero3" if isinstance(model, ZeRO3) else type(model).__name__
                record["held"] = _trainable_held(model, optimizer)
                if isinstance(model, ZeRO3):
                    sizes = [unit.layout.numel * unit.shard.element_size()
                             for unit, _ in model.units]
                    record["gathered"] = sizes[-1] + max(sizes[:-1], default=0)   # root last
                    record["kept_whole"] = [aliases[0] for aliases, p in model.frozen
                                            if p.requires_grad]
                    block = f"{BLOCK_CONTAINERS[name]}."
                    record["in_root"] = [aliases[0] for aliases in model.units[-1][1]
                                         if any(a.startswith(block) for a in aliases)]
                run = train_wrapped(model, optimizer, rank, world)
                record["params"] = run["params"]
            except Exception as exc:   # noqa: BLE001 - said to the learner
                record["error"] = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
            emit(record)


def drawn_cases(seed: int | None = None) -> tuple:
    """The fixed cases and one drawn size of each model on the other number of ranks (3 or 4
    blocks: ListStack freezes its first, and a single trainable block besides the root would
    be the whole model gathered at once whatever the units)."""
    rng = random.Random(seed)
    drawn = tuple((name, rng.choice((24, 48)), rng.choice((3, 4)), 5 - ranks)
                  for name, _, _, ranks in FIXED)
    return FIXED + drawn


def _judge(record: dict, world: int, frozen: set) -> None:
    where = dict(model=record["model"], width=record["width"], depth=record["depth"], world=world)
    if record["error"] is not None:
        raise AssertionError(tr("my_wrap: {model} (width {width}, depth {depth}) on {world} "
                                "ranks: wrapping or training it failed: {error}",
                                error=record["error"], **where))
    if record["kind"] == "not a pair":
        raise AssertionError(tr("my_wrap must return a pair (model, optimizer)."))
    if record["kind"] == "torch":
        raise AssertionError(tr("my_wrap returned torch's fully_shard (FSDP2): this exercise asks "
                                "for gpututor's from-scratch ZeRO3 (ZeRO3(module, units=...)), the "
                                "one you can read."))
    if record["held"] >= record["whole"]:
        raise AssertionError(tr("my_wrap: {model} on {world} ranks: before the first step each "
                                "rank holds all {whole:,} bytes of trainable parameters: the "
                                "parameters are not sharded ({kind}). Wrap it with ZeRO3.",
                                whole=record["whole"], kind=record["kind"], **where))
    if record["kind"] != "zero3":
        raise AssertionError(tr("my_wrap: wrap the module with gpututor's ZeRO3 (got {kind})",
                                kind=record["kind"]))
    if record["kept_whole"]:
        raise AssertionError(tr("my_wrap: {model} on {world} ranks: {n} trainable parameters are "
                                "kept whole on every rank ({first}, ...), as data parallel keeps "
                                "them: shard every trainable parameter (no keep_whole).",
                                n=len(record["kept_whole"]), first=record["kept_whole"][0],
                                **where))
    if record["in_root"]:
        raise AssertionError(tr("my_wrap: {model} (width {width}, depth {depth}): {n} "
                                "parameters of its repeated blocks ({first}, ...) are left to the "
                                "root's unit, which stays gathered for all of forward: give each "
                                "repeated block a unit of its own.", n=len(record["in_root"]),
                                first=record["in_root"][0], **where))
    if record["gathered"] >= record["whole"]:
        raise AssertionError(tr("my_wrap: {model} (width {width}, depth {depth}): during forward "
                                "a rank holds {gathered:,} bytes gathered at once, not less than "
                                "the whole model's {whole:,}: the root's unit and the largest "
                                "other one are gathered together; give each repeated block a "
                                "unit of its own.",
                                gathered=record["gathered"], whole=record["whole"], **where))


def _compare(params: dict, reference: dict, frozen: set, where: dict) -> float:
    worst = 0.0
    for name, want in reference.items():
        got = params.get(name)
        if got is None or np.shape(got) != np.shape(want):
            raise AssertionError(tr("my_wrap: {model}: the trained model has no parameter {name} "
                                    "of the right shape", name=name, model=where["model"]))
        if name in frozen and not np.array_equal(got, want):
            raise AssertionError(tr("my_wrap: {model} on {world} ranks: the frozen parameter "
                                    "{name} changed; frozen ones must stay as they are.",
                                    name=name, **where))
        worst = max(worst, float(np.abs(np.asarray(got) - np.asarray(want)).max()))
    return worst


def check_my_wrap(candidate, seed: int | None = None) -> None:
    """Run ``candidate(module) -> (model, optimizer)`` in real ranks on the checked models (the
    fixed cases and drawn sizes: :func:`drawn_cases`) against one process. Prints what matched;
    raises ``AssertionError`` saying what did not."""
    if candidate is ...:
        say("my_wrap: not answered yet. Define your function and pass it in.")
        return
    if not callable(candidate):
        raise AssertionError(tr("my_wrap must be a function of the module: def my_wrap(module): "
                                "... return model, optimizer"))
    cases = drawn_cases(seed)
    vocab = vocab_size()
    worst = 0.0
    for world in sorted({c[3] for c in cases}):
        mine = tuple(c[:3] for c in cases if c[3] == world)
        spec = RunSpec(world_size=world, device="cpu", timeout=60)
        say("my_wrap: training {n} models on {world} ranks, and each in one process ...",
            n=len(mine), world=world)
        with warnings.catch_warnings():   # 3 ranks on fewer cores: they take turns (no timing here)
            warnings.simplefilter("ignore", UserWarning)
            records = records_in_ranks(WrapCheck(candidate, mine), spec,
                                       "my_wrap: on {world} ranks a rank failed: {error}")
        for index, (name, width, depth) in enumerate(mine):
            mine_records = [r for r in records if r["step"] == index]
            for record in mine_records:
                _judge(record, world, set())
            model = CHECKED_MODELS[name](vocab, width, depth)
            frozen = {n for n, p in model.named_parameters(remove_duplicate=False)
                      if not p.requires_grad}
            reference = one_process(CHECKED_MODELS[name], vocab, width, depth)["params"]
            first = next(r for r in mine_records if r["params"] is not None)
            where = dict(model=name, world=world)
            gap = _compare(first["params"], reference, frozen, where)
            if gap > TOLERANCE:
                raise AssertionError(tr("my_wrap: {model} (width {width}, depth {depth}) on "
                                        "{world} ranks: after {steps} AdamW steps a parameter "
                                        "differs from one process by {gap:.2g}, more than "
                                        "{tolerance:g}.", model=name, width=width, depth=depth,
                                        world=world, steps=STEPS, gap=gap, tolerance=TOLERANCE))
            worst = max(worst, gap)
    say("Correct: on {n} models and sizes, on 2 and 3 ranks, your wrapping shards every "
        "trainable parameter, leaves no parameter of a repeated block to the root's unit, never "
        "gathers the whole model at once, leaves the frozen ones as "
        "they were, and trains as one process does (largest parameter difference {gap:.1e}, "
        "within {tolerance:g}).", n=len(cases), gap=worst, tolerance=TOLERANCE)
