"""A %%ranks cell that reads an exercise's placeholder (``...``) it does not define itself is not
run: every rank says "not answered yet". A cell that defines the name, whichever way, runs."""
from __future__ import annotations

import ast

import pytest

from gpututor.runtime.ranks.rank import unanswered


@pytest.mark.parametrize("cell", [
    "my_allreduce(x, rank, world_size)",
    "y = my_allreduce(x, rank, world_size)\nprint(y)",
])
def test_a_cell_reading_a_placeholder_is_held_back(cell):
    assert unanswered(ast.parse(cell), {"my_allreduce": ..., "x": 1}) == ["my_allreduce"]


@pytest.mark.parametrize("cell", [
    "my_allreduce = lambda t, r, w: t\nmy_allreduce(x, rank, world_size)",
    "def my_allreduce(t, r, w):\n    return t\nmy_allreduce(x, rank, world_size)",
    "class my_allreduce:\n    pass\nmy_allreduce()",
    "from mine import my_allreduce\nmy_allreduce(x, rank, world_size)",
    "import my_allreduce\nmy_allreduce.run()",
    "my_allreduce = ...",
])
def test_a_cell_that_defines_the_name_runs(cell):
    assert unanswered(ast.parse(cell), {"my_allreduce": ..., "x": 1}) == []


def test_a_name_already_answered_runs():
    assert unanswered(ast.parse("my_allreduce(x, 0, 2)"), {"my_allreduce": print}) == []


def test_a_cell_every_rank_held_back_is_said_once():
    from gpututor.runtime.ranks.view import CellResult, RankOutcome
    held = CellResult(3, [RankOutcome(r, unanswered=["my_allreduce"]) for r in range(4)])
    assert str(held).count("not answered yet") == 1 and held._repr_html_().count("not answered") == 1
    mixed = CellResult(3, [RankOutcome(0, unanswered=["f"]), RankOutcome(1, text=[("stdout", "hi")])])
    assert "rank 1" in str(mixed) and "not answered yet" in str(mixed)
