"""Lesson 09's exercise checkers: each takes the learner's answer and the lesson's own objects
(its runs, its spec, the capacity it measured) and derives what it expects, so the notebook
shows only the call. ``...`` means "not answered yet".

- :func:`check_pp_group`, :func:`check_dp_group`: rank 9's groups in a grid the lesson does not
  print (dp=3 x pp=3 x tp=2, the question's defaults), from :class:`RankGrid`.
- :func:`check_tp_extra`: the parameter bytes rank 0 of a ``tp=3`` layout (no cell launches
  one) holds beyond a third of the one-process model, predicted from the ``tp=2`` run's; the
  checker counts them on the model it builds and splits as ``ddp+tp`` does.
- :func:`check_layouts_that_fit`: the learner's fit test ``my_fits(rows, capacity)``, the
  layouts whose predicted bytes per rank fit a capacity, on rows and capacities it chooses and
  draws, against ``plan.layouts.predict_layouts``'s own verdict (the planner refuses while the
  learner's function runs).
- :func:`check_groups`: the learner's ``groups(shape, dim)``, every group of ranks along one dim,
  against :meth:`RankGrid.groups` on grids it chooses, and against torch's ``DeviceMesh`` in
  real ranks on the lesson's 3-D grid.
"""
from __future__ import annotations

import math
import numbers
import random
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import torch

from ...config import RunSpec
from ...models import build_model
from ...i18n import say, tr
from ...parallel.mesh import RankGrid, build_groups, device_mesh
from ...formulas import MB
from ...plan.layouts import HEADROOM, pick_layout, predict, predict_layouts, transformer_of
from ...plan.memory import Transformer, activation_bytes, model_state_bytes, per_device_memory
from ..common.code_exercise import call_refusing
from ..common.exercises import check_answer, records_in_ranks

QUESTION_GRID = (("dp", 3), ("pp", 3), ("tp", 2))   # exercises 1 and 2: not printed anywhere
QUESTION_RANK = 9


def _grid_name(shape) -> str:
    return " x ".join(f"{name}={degree}" for name, degree in shape)


def _ranks(answer) -> list[int] | None:
    """``answer`` as a list of rank numbers (a list, tuple, set, array or 1-D tensor of whole
    numbers), or None if it is not one."""
    if isinstance(answer, (str, bytes)) or not hasattr(answer, "__iter__"):
        return None
    ranks = []
    for r in answer:
        if isinstance(r, torch.Tensor) and r.numel() == 1:
            r = r.item()
        r = getattr(r, "item", lambda: r)() if not isinstance(r, numbers.Number) else r
        if isinstance(r, bool) or not isinstance(r, numbers.Real) or not math.isfinite(r) \
                or r != int(r):
            return None
        ranks.append(int(r))
    return ranks


def check_group(answer, dim: str, rank: int = QUESTION_RANK, shape: tuple = QUESTION_GRID) -> None:
    """"Which ranks form ``rank``'s group along ``dim`` in the grid ``shape``?" (a list of ranks,
    any order), against :meth:`RankGrid.group_of`."""
    grid = _grid_name(shape)
    if answer is ...:
        say("rank {rank}'s {dim} group: not answered yet. Replace ... with a list of ranks "
                 "and run the cell again.", rank=rank, dim=dim)
        return
    given = _ranks(answer)
    if given is None:
        raise AssertionError(tr("{answer} is not a list of ranks. Try again.", answer=repr(answer)))
    expected = RankGrid(shape).group_of(rank, dim)
    if rank not in given:
        raise AssertionError(tr("{answer} leaves out rank {rank} itself: a rank's group holds it "
                                "too. Try again.", answer=repr(answer), rank=rank))
    if sorted(given) != sorted(expected):
        raise AssertionError(tr("{answer} is not rank {rank}'s {dim} group in the grid {grid}. "
                                "Try again: which ranks differ from it only in the {dim} index?",
                                answer=repr(answer), rank=rank, dim=dim, grid=grid))
    say("Correct: rank {rank}'s {dim} group in the grid {grid} is {group}.", rank=rank,
             dim=dim, grid=grid, group=expected)


def check_pp_group(answer, rank: int = QUESTION_RANK, shape: tuple = QUESTION_GRID) -> None:
    """Exercise 1: ``rank``'s pipeline-parallel group in the grid ``shape``."""
    check_group(answer, "pp", rank, shape)


def check_dp_group(answer, rank: int = QUESTION_RANK, shape: tuple = QUESTION_GRID) -> None:
    """Exercise 2: ``rank``'s data-parallel group in the grid ``shape``."""
    check_group(answer, "dp", rank, shape)


# ---- exercise 3: what tensor parallel leaves whole ------------------------------------------

TP_EXTRA_DEGREE = 3   # exercise 3: a tp degree no cell launches (the medium GPT's 6 heads split)


def parameter_bytes(spec: RunSpec, tp: int = 1, rank: int = 0) -> int:
    """Bytes of the parameters rank ``rank`` of a ``tp``-way Megatron split of ``spec``'s model
    holds (``ddp+tp``'s split; 1: the whole model), counted on ``meta``: each distinct
    parameter's elements × their size, tied ones once (as the runs' memory probe counts them)."""
    from ...parallel.tensor_parallel.megatron import TensorParallelGroup, parallelize
    model = build_model(spec, meta=True)
    if tp > 1:
        parallelize(model, TensorParallelGroup(rank=rank, size=tp))
    return sum(p.nbytes for p in model.parameters())


def tp_extra_bytes(spec: RunSpec, tp: int = TP_EXTRA_DEGREE, rank: int = 0) -> float:
    """Parameter bytes rank ``rank`` of a ``tp``-way split of ``spec``'s model holds beyond
    ``1/tp`` of the whole model's: what tensor parallel leaves whole, less its ``1/tp``."""
    return parameter_bytes(spec, tp, rank) - parameter_bytes(spec) / tp


def check_tp_extra(answer, spec: RunSpec, tp: int = TP_EXTRA_DEGREE) -> None:
    """Exercise 3: the bytes of parameters rank 0 of a ``tp``-way layout of ``spec`` (3: no
    cell launches one) holds beyond exactly ``1/tp`` of the one-process model's, within 1 %;
    the checker counts them (:func:`tp_extra_bytes`) on the model it builds and splits."""
    check_answer(answer, tp_extra_bytes(spec, tp),
                 tr("parameter bytes of a tp={tp} rank 0 beyond 1/{tp} of the model", tp=tp),
                 rel_tol=0.01, source="counted")


# ---- exercise 4 (code): the planner's fit test -------------------------------------------------

PARTS = ("params", "grads", "optimizer", "activations")   # what the learner's rows hold per rank
# a model of the checker's own, on 8 ranks, where layouts have several grids (tp 2 or 4, pp 2 or 4)
OTHER_MODEL = Transformer(8, 256, 8, 96, 128, name="a GPT of 8 layers, width 256")


def fit_cases(spec, capacity: float, share: float = 0.75,
              rng: random.Random | None = None) -> list[tuple]:
    """Exercise 4's cases, ``(label, model, global batch, ranks, capacity)``: ``spec``'s model on
    4 ranks at ``share`` of ``capacity`` (the lesson's question) first; then, for it, for it on 8
    ranks and for :data:`OTHER_MODEL` on 8, capacities drawn just under and just over each
    layout's limit (its smallest predicted total over the planner's headroom), so that every set
    the limits allow comes up, and a rule that is off by a few percent does not pass."""
    rng = rng or random.Random()
    model = transformer_of(spec)
    sets = ((tr("section 8's rows (4 ranks)"), model, spec.batch_size, 4),
            (tr("this lesson's model on 8 ranks"), model, spec.batch_size, 8),
            (tr("{name}, on 8 ranks", name=OTHER_MODEL.name), OTHER_MODEL, 32, 8))
    cases = [sets[0] + (share * capacity,)]
    for label, shape, batch, world in sets:
        limits = {}
        for row in predict_layouts(shape, batch, world):
            limits[row["layout"]] = min(limits.get(row["layout"], math.inf),
                                        row["total"] / HEADROOM)
        for limit in sorted(limits.values()):
            cases += [(label, shape, batch, world, limit * (1 + side * rng.uniform(0.002, 0.03)))
                      for side in (-1, 1)]
    return cases


def layouts_that_fit(model, global_batch: int, world_size: int, capacity: float) -> set[str]:
    """The layouts the planner predicts to fit ``capacity`` per rank (a layout fits if one of its
    grids does: its predicted total stays under the planner's headroom)."""
    return {r["layout"] for r in predict_layouts(model, global_batch, world_size, capacity)
            if r["fits"]}


def _names(got) -> set[str] | None:
    """What the learner's function returned as a set of layout names, or None."""
    if got is None:
        return set()
    if isinstance(got, (str, bytes)) or not hasattr(got, "__iter__"):
        return None
    names = list(got)
    return set(names) if all(isinstance(n, str) for n in names) else None


def check_layouts_that_fit(candidate: Callable, spec, capacity: float, share: float = 0.75) -> None:
    """Run ``candidate(rows, capacity)`` (rows as ``predict_layouts`` gives them, with only
    ``layout``, ``mesh`` and the four byte counts of :data:`PARTS`) on :func:`fit_cases` against
    the planner's own ``fits``; the planner's functions refuse while it runs. Says which case is
    wrong and which way, then what the function says at ``share`` of ``capacity``."""
    what = tr("layouts that fit")
    if candidate is ...:
        say("{what}: not answered yet. Define your function and pass it in.", what=what)
        return
    if not callable(candidate):
        raise AssertionError(tr("{what}: pass your function my_fits itself, not {got!r}.",
                                what=what, got=candidate))
    refused = (predict_layouts, predict, pick_layout, per_device_memory, activation_bytes,
               model_state_bytes, layouts_that_fit)
    cases, question = fit_cases(spec, capacity, share), None
    for label, model, batch, world, cap in cases:
        case = tr("{rows}, capacity {mb:.2f} MB", rows=label, mb=cap / MB)
        rows = [{"layout": r["layout"], "mesh": dict(r["mesh"]), **{k: r[k] for k in PARTS}}
                for r in predict_layouts(model, batch, world)]
        got = call_refusing(candidate, (rows, cap), refused=refused,
                            called=tr("{what}: your function called the planner: compare the "
                                      "bytes with the capacity yourself.", what=what),
                            failed=tr("{what} [{case}]: your function raised {error}"),
                            what=what, case=case)
        if hasattr(got, "keys"):   # a dict {layout: fits?}: its keys would be every layout
            raise AssertionError(tr("{what} [{case}]: your function returned a dict: return the "
                                    "names of the layouts that fit, not a dict.", what=what,
                                    case=case))
        names = _names(got)
        if names is None:
            raise AssertionError(tr("{what} [{case}]: your function returned {got!r}, not a "
                                    "list of layout names.", what=what, case=case, got=got))
        expected = layouts_that_fit(model, batch, world, cap)
        if names != expected:
            how = tr("it holds a layout the planner does not fit") if names - expected \
                else tr("it leaves out a layout the planner fits")
            raise AssertionError(tr(
                "{what} [{case}]: your set is not the planner's: {how}. A layout fits if on one "
                "of its grids a rank's bytes, all four kinds, stay within {headroom:.0%} of the "
                "capacity.", what=what, case=case, how=how, headroom=HEADROOM))
        question = names if question is None else question
    say("Correct: your sets are the planner's in {cases} cases (three sets of rows, capacities "
        "just under and over every layout's limit). At {share} of this lesson's capacity on 4 "
        "ranks, your function says these fit: {names}.", cases=len(cases),
        share=str(Fraction(share).limit_denominator(100)),
        names=", ".join(sorted(question)) or tr("none"))


# ---- exercise 5 (code): every group of a grid -----------------------------------------------

GROUP_GRIDS = ((("dp", 2), ("pp", 2), ("tp", 2)), (("dp", 3), ("tp", 2)),
               (("dp", 2), ("pp", 3), ("tp", 2)), (("pp", 2), ("tp", 4)), (("dp", 4),))
DEVICE_MESH_GRID = (("dp", 2), ("pp", 2), ("tp", 2))   # lesson 09's 3-D grid, in 8 real ranks


@dataclass(frozen=True)
class DeviceMeshCheck:
    """In every rank: torch's ``DeviceMesh`` over ``shape`` (``init_device_mesh``, the named
    mesh FSDP2 and DTensor take), and whether this rank's group along each dim in ``groups``
    (``{dim: groups}``, the learner's) is the ranks of ``mesh[dim]``, in the same order."""

    shape: tuple
    groups: tuple   # ((dim, ((rank, ...), ...)), ...)

    def __call__(self, spec, rank, world, device, emit):
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", tuple(d for _, d in self.shape),
                                mesh_dim_names=tuple(n for n, _ in self.shape))
        for dim, groups in self.groups:
            mine = next((list(g) for g in groups if rank in g), None)
            emit({"step": 0, "dim": dim, "same": mine == mesh[dim].mesh.tolist()})


def _as_groups(result) -> list[list[int]]:
    """The candidate's result as a list of groups of ranks; TypeError if it is not one."""
    if isinstance(result, torch.Tensor):
        result = result.tolist()
    if isinstance(result, (str, bytes)) or not hasattr(result, "__iter__"):
        raise TypeError(f"{type(result).__name__} is not a list of groups")
    groups = []
    for group in result:
        ranks = _ranks(group.tolist() if isinstance(group, torch.Tensor) else group)
        if ranks is None:
            raise TypeError(f"{group!r} is not a group of ranks")
        groups.append(ranks)
    return groups


def check_groups(candidate: Callable) -> None:
    """Run ``candidate(shape, dim)`` for every dim of five grids (``(name, degree)`` pairs,
    outermost first) with :class:`RankGrid` refused, against :meth:`RankGrid.groups` (groups in
    any order, each in order along ``dim``); then compare its groups of lesson 09's 3-D grid
    with torch's ``DeviceMesh`` in 8 real ranks. Says what is wrong, not what is right."""
    if candidate is ...:
        say("groups of a grid: not answered yet. Define your function and pass it in.")
        return
    refused = (RankGrid.groups, RankGrid.group_of, RankGrid.index, RankGrid.ranks.fget,
               RankGrid.__str__, build_groups, device_mesh)
    yours = {}
    for shape in GROUP_GRIDS:
        grid, world = _grid_name(shape), math.prod(d for _, d in shape)
        for dim, degree in shape:
            want = RankGrid(shape).groups(dim)
            got = call_refusing(candidate, (shape, dim), refused=refused, read=_as_groups,
                                called=tr("groups of a grid: your function used the package's "
                                          "RankGrid: work the groups out yourself."),
                                mistyped=tr("groups of a grid: for {grid} along {dim} your "
                                            "function did not return a list of groups of ranks: "
                                            "{error}"),
                                grid=grid, dim=dim)
            members = sorted(r for g in got for r in g)
            if members != list(range(world)) or any(len(g) != degree for g in got):
                raise AssertionError(tr(
                    "groups of a grid: for {grid} along {dim}, every rank 0 to {last} must be in "
                    "exactly one group, and each group must hold {degree} ranks (the degree of "
                    "{dim}); yours do not.", grid=grid, dim=dim, last=world - 1, degree=degree))
            if sorted(map(sorted, got)) != sorted(map(sorted, want)):
                wrong = next(r for r in range(world)
                             if sorted(next(g for g in got if r in g)) !=
                             next(g for g in want if r in g))
                raise AssertionError(tr(
                    "groups of a grid: for {grid} along {dim}, rank {rank}'s group is not the "
                    "grid's. Its group holds the ranks that differ from it only in the {dim} "
                    "index: how far apart are two ranks whose {dim} index differs by one?",
                    grid=grid, dim=dim, rank=wrong))
            if sorted(got) != sorted(want):
                raise AssertionError(tr(
                    "groups of a grid: for {grid} along {dim} your groups hold the right ranks, "
                    "but not each in order along {dim} (member i is the rank at index i: pipeline "
                    "stage i, tensor-parallel shard i).", grid=grid, dim=dim))
            yours[shape, dim] = got
    shape = DEVICE_MESH_GRID
    groups = tuple((dim, tuple(map(tuple, yours[shape, dim]))) for dim, _ in shape)
    world = math.prod(d for _, d in shape)
    records = records_in_ranks(DeviceMeshCheck(shape, groups),
                               RunSpec(world_size=world, device="cpu", timeout=60),
                               "groups of a grid: the check in {world} real ranks failed: {error}")
    different = [r for r in records if not r["same"]]
    if different:   # RankGrid agreed but DeviceMesh does not: the package's grid is wrong
        raise AssertionError(tr("groups of a grid: in {world} real ranks, rank {rank}'s {dim} "
                                "group is not torch's DeviceMesh's mesh['{dim}'].", world=world,
                                rank=different[0]["rank"], dim=different[0]["dim"]))
    say("Correct: your groups are RankGrid's along every dim of {count} grids, and on "
             "{grid} the same as torch's DeviceMesh in {world} real ranks.",
             count=len(GROUP_GRIDS), grid=_grid_name(shape), world=world)
