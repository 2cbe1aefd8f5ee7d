"""The checks of tests/lesson_outputs.py find each problem they name, and pass a clean cell (the
lessons' own executed outputs are checked in tests/test_exercises.py, where each runs)."""
from __future__ import annotations

import nbformat
from lesson_outputs import CELL_COLUMNS, legend_mismatches, output_problems


def notebook(*outputs):
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = list(outputs)
    return nbformat.v4.new_notebook(cells=[cell])


def test_a_clean_cell_has_no_problem():
    nb = notebook(nbformat.v4.new_output("stream", text="a short line\n" + "字" * 50 + "\n"),
                  nbformat.v4.new_output("display_data", data={
                      "text/html": "<p>" + "x" * 500 + "</p>", "text/plain": "x" * 500}))
    assert output_problems(nb) == []


def test_each_problem_is_found_and_named_by_its_cell():
    nb = notebook(nbformat.v4.new_output("error", ename="TypeError", evalue="boom", traceback=[]),
                  nbformat.v4.new_output("stream", name="stderr", text="UserWarning: ranks share"),
                  nbformat.v4.new_output("stream", text="y" * (CELL_COLUMNS + 1) + "\n"),
                  nbformat.v4.new_output("stream", text="字" * (CELL_COLUMNS // 2 + 1) + "\n"),
                  nbformat.v4.new_output("display_data", data={
                      "text/html": "<pre style='margin:0;color:#b00'>Traceback</pre>",
                      "text/plain": "<CellResult>"}))
    found = output_problems(nb)
    assert len(found) == 5 and all(f.startswith("cell 0: ") for f in found), found
    assert "TypeError: boom" in found[0] and "stderr" in found[1] and "red text" in found[4]
    assert output_problems(nb, on_purpose={0: "shows an error"}) == found[2:4]


def test_a_legend_entry_drawn_in_two_colours_is_found():
    cycled = {"data": [{"type": "scatter", "name": "naive", "legendgroup": "naive"},
                       {"type": "scatter", "name": "naive", "legendgroup": "naive",
                        "showlegend": False}]}
    assert legend_mismatches(cycled) == ["'naive' drawn in [None, None]"]
    two = {"data": [{"type": "bar", "name": "a", "marker": {"color": "#111111"}},
                    {"type": "bar", "name": "a", "marker": {"color": "#222222"}}]}
    assert len(legend_mismatches(two)) == 1
    same = {"data": [{"type": "scatter", "name": "a", "line": {"color": "#111111"}},
                     {"type": "scatter", "name": "a", "line": {"color": "#111111"}},
                     {"type": "scatter", "name": "b"}]}
    assert legend_mismatches(same) == []
