"""Lesson 09's checkers (gpututor/lessons/composing_parallelisms/exercises.py): the published solutions pass,
named plausible wrong answers fail for the reason their message gives, nothing the check cell
passes is the answer, and the code exercises refuse the package's own grid and planner while they
run."""
import math
import re

import numpy as np
import pytest
import torch

from gpututor import RunSpec, launch
from gpututor.i18n import set_language
from gpututor.lessons.composing_parallelisms.exercises import (GROUP_GRIDS, QUESTION_GRID, check_dp_group,
                                                 check_groups, check_layouts_that_fit,
                                                 check_pp_group, check_tp_extra, layouts_that_fit)
from gpututor.parallel.mesh import RankGrid
from gpututor.plan.layouts import HEADROOM, predict_layouts, transformer_of
from exercise_solutions import published, rejected

STEM = "09_composing_parallelisms"
# lesson 09's spec (its cell 3, on CPU): the capacity of its exercises is measured from it
BASE = RunSpec(model="gpt", model_size="medium", batch_size=8, seq_len=64, steps=4, timeout=60.0,
               device="cpu")


# ---- exercises 1 and 2: rank 9's groups in a grid the lesson does not print -------------------

def transposed(shape):
    """The mistake of laying the grid out the other way round: the first dim innermost."""
    return RankGrid(tuple(reversed(shape)))


def test_group_checkers_take_the_question_from_their_defaults_and_reject_the_classic_mistakes(
        capsys):
    check_pp_group(published(STEM, "my_pp_group"))
    assert "Correct: rank 9's pp group in the grid dp=3 x pp=3 x tp=2 is [7, 9, 11]" \
        in capsys.readouterr().out
    check_dp_group(published(STEM, "my_dp_group"))
    assert "Correct: rank 9's dp group in the grid dp=3 x pp=3 x tp=2 is [3, 9, 15]" \
        in capsys.readouterr().out
    for shape_of_answer in (np.array([11, 7, 9]), torch.tensor([7, 9, 11]), (9, 11, 7)):
        check_pp_group(shape_of_answer)                       # any order, any container

    wrong_pp = {
        "neighbours by rank number": [8, 9, 10],
        "the transposed grid's pp group": transposed(QUESTION_GRID).group_of(9, "pp"),
        "steps of pp's own degree, not tp's": [6, 9, 12],
        "the dp group": [3, 9, 15],
        "the tp group": [8, 9],
        "the whole pp x tp block of its replica": list(range(6, 12)),
    }
    assert wrong_pp["the transposed grid's pp group"] != [7, 9, 11]
    for mistake, answer in wrong_pp.items():
        rejected(check_pp_group, answer,
                 match=re.escape(f"{answer!r} is not rank 9's pp group in the grid dp=3 x pp=3 "
                                 "x tp=2"))
    wrong_dp = {"every odd rank": list(range(1, 18, 2)), "the pp group": [7, 9, 11],
                "steps of dp's degree": [3, 6, 9],
                "the transposed grid's dp group": transposed(QUESTION_GRID).group_of(9, "dp")}
    for mistake, answer in wrong_dp.items():
        rejected(check_dp_group, answer, match=re.escape(f"{answer!r} is not rank 9's dp group"))
    for mistake, answer in {"rank 0's dp group, not rank 9's": [0, 6, 12],
                            "the other ranks only": [3, 15]}.items():
        rejected(check_dp_group, answer, match=re.escape(f"{answer!r} leaves out rank 9 itself"))
    for mistake, answer in {"the rank itself, not its group": 9, "a string": "3915",
                            "names, not ranks": ["three", "nine"], "not whole": [3.5, 9]}.items():
        rejected(check_dp_group, answer, match=re.escape(f"{answer!r} is not a list of ranks"))
    check_pp_group(...)
    assert "not answered yet" in capsys.readouterr().out


def test_the_question_grid_is_not_one_the_lesson_makes():
    import ast
    import nbformat
    from test_exercises import ROOT
    made = [ast.literal_eval(node.args[0])
            for cell in nbformat.read(ROOT / "notebooks" / f"{STEM}.ipynb", as_version=4).cells
            if cell.cell_type == "code"
            for node in ast.walk(ast.parse(cell.source))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RankGrid"]
    assert len(made) == 2 and QUESTION_GRID not in made   # grid (2-D) and grid3 (3-D)


# ---- exercise 3: what tensor parallel leaves whole, under a tp no run used -------------------

def _runs(whole: float = 10_948_608, tp_rank0: float = 5_624_064):
    """What lesson 09's runs record of parameter bytes (this machine's ddp+tp dp=2 x tp=2 run and
    one process, medium GPT: the count below gives the same)."""
    single = {"mem_by_category": {"params": [whole]}}
    runs = {"ddp+tp": {"mem_by_category": {"params": [tp_rank0, tp_rank0, tp_rank0, tp_rank0]}},
            "ddp+pp": {"mem_by_category": {"params": [7e6, 5e6, 7e6, 5e6]}}}
    return runs, single


def test_tp_extra_is_a_tp3_prediction_the_checker_counts_and_a_tp3_run_measures(capsys):
    from gpututor.lessons.composing_parallelisms.exercises import parameter_bytes, tp_extra_bytes
    runs, single = _runs()
    # the runs' two numbers are what counting on the model gives (tp=2 and the whole model)
    assert parameter_bytes(BASE) == single["mem_by_category"]["params"][0]
    assert parameter_bytes(BASE, tp=2) == runs["ddp+tp"]["mem_by_category"]["params"][0]
    check_tp_extra(published(STEM, "my_tp_extra", runs=runs, single=single), BASE)
    assert "Correct. parameter bytes of a tp=3 rank 0 beyond 1/3 of the model: 1.997e+05" \
        in capsys.readouterr().out
    extra = tp_extra_bytes(BASE)
    for shape_of_answer in (np.float64(extra), torch.tensor(extra), int(extra)):
        check_tp_extra(shape_of_answer, BASE)
    whole, held = single["mem_by_category"]["params"][0], runs["ddp+tp"]["mem_by_category"]["params"][0]
    extra_2 = held - whole / 2
    wrong = {"the tp=2 run's extra, pasted": extra_2,
             "as if every parameter were split": 0,
             "all that stays whole, not 2/3 of it": 2 * extra_2,
             "a third of what stays whole, not two thirds": 2 * extra_2 / 3,
             "the tp=2 rank's bytes beyond a third": held - whole / 3}
    for mistake, answer in wrong.items():
        rejected(check_tp_extra, answer, BASE, match="is not what counting on the model gives")
    # the count is what a real tp=3 layout's rank 0 holds (3 ranks, one step)
    run = launch(BASE.replace(strategy="ddp+tp", world_size=3, mesh={"dp": 1, "tp": 3},
                              steps=1)).wait()
    assert run["mem_by_category"]["params"][0] - whole / 3 == extra


# ---- exercise 4 (code): the planner's fit test -------------------------------------------------

@pytest.fixture(scope="module")
def capacity() -> int:
    """Lesson 09's capacity, measured as the lesson does (cells 3 and 5): 60 % of one rank's
    peak in a step of its spec, on this machine."""
    single = launch(BASE.replace(strategy="single", world_size=1)).wait()
    return int(0.6 * single["peak_mem_bytes"][0])


def _total(row):
    return row["params"] + row["grads"] + row["optimizer"] + row["activations"]


WRONG_FITS = {
    "forgot the planner's 80 % headroom": lambda rows, c: {r["layout"] for r in rows
                                                           if _total(r) <= c},
    "every grid of a layout must fit": lambda rows, c: {r["layout"] for r in rows} - {
        r["layout"] for r in rows if _total(r) > HEADROOM * c},
    "model states only, no activations": lambda rows, c: {
        r["layout"] for r in rows if _total(r) - r["activations"] <= HEADROOM * c},
    "90 %, the headroom of lesson 08's clusters": lambda rows, c: {
        r["layout"] for r in rows if _total(r) <= 0.9 * c},
    "every layout": lambda rows, c: [r["layout"] for r in rows],
    "none": lambda rows, c: [],
}


def test_fit_test_passes_as_published_and_in_any_shape_and_tells_the_question(capsys, capacity):
    solution = published(STEM, "my_fits")
    check_layouts_that_fit(solution, BASE, capacity)
    out = capsys.readouterr().out
    question = layouts_that_fit(transformer_of(BASE), BASE.batch_size, 4, 0.75 * capacity)
    assert "Correct: your sets are the planner's in " in out
    assert ("At 3/4 of this lesson's capacity on 4 ranks, your function says these fit: "
            f"{', '.join(sorted(question)) or 'none'}.") in out
    check_layouts_that_fit(lambda rows, c: sorted(solution(rows, c), reverse=True), BASE,
                           capacity)   # a list, in any order
    check_layouts_that_fit(lambda rows, c: solution(rows, c) or None, BASE, capacity)   # None
    for mistake, answer in WRONG_FITS.items():
        rejected(check_layouts_that_fit, answer, BASE, capacity,
                 match=r"your set is not the planner's: it (holds|leaves out) a layout")
    rejected(check_layouts_that_fit, lambda rows, c: "fsdp", BASE, capacity,
             match="not a list of layout names")
    # {layout: fits?} read as its keys would be every layout: refused as a dict, not as a set
    rejected(check_layouts_that_fit, lambda rows, c: {r["layout"]: _total(r) <= HEADROOM * c
                                                      for r in rows}, BASE, capacity,
             match="returned a dict: return the names of the layouts that fit, not a dict")
    rejected(check_layouts_that_fit, ["fsdp"], BASE, capacity,
             match="pass your function my_fits itself")
    check_layouts_that_fit(..., BASE, capacity)
    assert "not answered yet" in capsys.readouterr().out


def test_fit_test_refuses_the_planner_and_gets_rows_without_their_verdict(capacity):
    from gpututor.plan.layouts import pick_layout
    from gpututor.plan.memory import per_device_memory
    seen = []

    def records(rows, c):
        seen.extend(rows)
        return {r["layout"] for r in rows if _total(r) <= HEADROOM * c}
    check_layouts_that_fit(records, BASE, capacity)
    assert seen and all(set(r) == {"layout", "mesh", "params", "grads", "optimizer",
                                   "activations"} for r in seen)
    for way in (lambda rows, c: [r["layout"] for r in predict_layouts(
                    transformer_of(BASE), BASE.batch_size, 4, c) if r["fits"]],
                lambda rows, c: [pick_layout(rows)["layout"]],
                lambda rows, c: [r["layout"] for r in rows if per_device_memory(
                    transformer_of(BASE))["total"] < c]):
        rejected(check_layouts_that_fit, way, BASE, capacity, match="called the planner")


def test_fit_cases_cover_every_set_and_several_grids_per_layout(capacity):
    """The drawn capacities lie just under and over each layout's limit, so every set the limits
    allow comes up (the empty one too); the other model on 8 ranks has layouts with several
    grids; the capacities change from one check to the next."""
    import random
    from gpututor.lessons.composing_parallelisms.exercises import OTHER_MODEL, fit_cases
    cases = fit_cases(BASE, capacity, rng=random.Random(0))
    assert cases[0][4] == 0.75 * capacity
    for label in {c[0] for c in cases}:
        sets = [frozenset(layouts_that_fit(*c[1:])) for c in cases[1:] if c[0] == label]
        layouts = {r["layout"] for r in predict_layouts(*[c for c in cases if c[0] == label][0][1:4])}
        assert frozenset() in sets and frozenset(layouts) in sets and len(set(sets)) == len(layouts) + 1
    grids = [r["layout"] for r in predict_layouts(OTHER_MODEL, 32, 8)]
    assert len(grids) > len(set(grids))
    assert fit_cases(BASE, capacity)[1][4] != fit_cases(BASE, capacity)[1][4]


# ---- exercise 5 (code): every group of a grid ------------------------------------------------

def test_groups_checker_runs_the_function_on_its_grids_and_against_device_mesh(capsys):
    check_groups(published(STEM, "my_groups", math=math))   # the notebook imported math
    out = capsys.readouterr().out
    assert "Correct: your groups are RankGrid's along every dim of 5 grids, and on dp=2 x pp=2 x " \
           "tp=2 the same as torch's DeviceMesh in 8 real ranks." in out
    assert any(3 in dict(g).values() for g in GROUP_GRIDS) and \
        any(len(g) == 3 for g in GROUP_GRIDS)   # 3-wide dims and 3-D grids among its inputs


def _torch_groups(shape, dim):   # right, picotron's way, returning a tensor: passes
    names = [name for name, _ in shape]
    ranks = torch.arange(math.prod(d for _, d in shape)).view(*(d for _, d in shape))
    return ranks.movedim(names.index(dim), -1).reshape(-1, dict(shape)[dim])


def test_groups_checker_rejects_the_classic_mistakes_without_telling_the_groups(capsys):
    def neighbours(shape, dim):          # right for tp only: consecutive ranks
        world, degree = math.prod(d for _, d in shape), dict(shape)[dim]
        return [list(range(s, s + degree)) for s in range(0, world, degree)]

    def no_movedim(shape, dim):          # reshape without moving the dim last: rows of the grid
        ranks = torch.arange(math.prod(d for _, d in shape))
        return ranks.reshape(-1, dict(shape)[dim]).tolist()

    def transposed_grid(shape, dim):     # the first dim innermost
        return _torch_groups(tuple(reversed(shape)), dim).tolist()

    def world_over_degree_stride(shape, dim):   # stride world/degree: right for the outermost dim
        world, degree = math.prod(d for _, d in shape), dict(shape)[dim]
        return [list(range(s, world, world // degree)) for s in range(world // degree)]

    for wrong in (neighbours, no_movedim, transposed_grid, world_over_degree_stride):
        with pytest.raises(AssertionError, match=r"rank \d+'s group is not the grid's") as raised:
            check_groups(wrong)
        assert "[" not in str(raised.value)   # names a rank, never a group

    def rank_zeros_group_only(shape, dim):
        return [_torch_groups(shape, dim)[0].tolist()]

    def descending(shape, dim):          # the right ranks, stage order reversed
        return [list(reversed(g)) for g in _torch_groups(shape, dim).tolist()]

    rejected(check_groups, rank_zeros_group_only, match="every rank 0 to 7 must be in exactly one")
    rejected(check_groups, descending, match="hold the right ranks, but not each in order")
    rejected(check_groups, lambda shape, dim: None, match="did not return a list of groups")
    rejected(check_groups, lambda shape, dim: [["a", "b"]], match="did not return a list of groups")
    check_groups(...)
    assert "not answered yet" in capsys.readouterr().out


def test_groups_checker_refuses_the_packages_grid_however_it_is_reached(capsys):
    from gpututor.parallel import mesh as imported_module
    from gpututor.parallel.mesh import build_groups

    def with_rank_grid(shape, dim):
        return RankGrid(shape).groups(dim)

    def one_group_at_a_time(shape, dim):
        grid = imported_module.RankGrid(shape)
        return sorted({tuple(grid.group_of(r, dim)) for r in range(grid.world_size)})

    def through_the_ranks_tensor(shape, dim):
        return _torch_groups(shape, dim).tolist() if RankGrid(shape).ranks is None else []

    def through_build_groups(shape, dim):
        return [build_groups(RankGrid(shape), 0)[dim].ranks]

    for candidate in (with_rank_grid, one_group_at_a_time, through_the_ranks_tensor,
                      through_build_groups):
        rejected(check_groups, candidate, match="your function used the package's RankGrid")
    assert RankGrid((("dp", 2), ("tp", 2))).groups("dp") == [[0, 2], [1, 3]]   # restored after
    assert str(RankGrid((("dp", 2),))).startswith("rank grid dp=2")


def test_groups_checker_takes_a_tensor_answer(capsys):
    check_groups(_torch_groups)
    assert "Correct: your groups are RankGrid's" in capsys.readouterr().out


# ---- the checkers speak Chinese in a Chinese kernel -------------------------------------------

def test_lesson_09_checkers_speak_chinese(capsys):
    set_language("zh")
    try:
        check_pp_group([7, 9, 11])
        check_dp_group(...)
        check_groups(...)
        check_layouts_that_fit(..., BASE, 1e6)
        out = capsys.readouterr().out
        for chinese in ("正确：网格 dp=3 x pp=3 x tp=2 中进程 9 的 pp 组是 [7, 9, 11]",
                        "进程 9 的 dp 组：尚未作答", "网格的分组：尚未作答", "装得下的布局：尚未作答"):
            assert chinese in out, (chinese, out)
        for call, words in (((check_dp_group, [9, 10]), "不是网格 dp=3 x pp=3 x tp=2 中进程 9 的 dp 组"),
                            ((check_dp_group, [3, 15]), "漏掉了进程 9 本身"),
                            ((check_layouts_that_fit, lambda rows, c: ["fsdp"], BASE, 1e6),
                             "你的集合与规划器的不同"),
                            ((check_groups, lambda shape, dim: [[0]]), "必须恰好属于一个组"),
                            ((check_groups, lambda shape, dim: RankGrid(shape).groups(dim)),
                             "用了本软件包的 RankGrid")):
            with pytest.raises(AssertionError, match=words):
                call[0](*call[1:])
    finally:
        set_language("en")
