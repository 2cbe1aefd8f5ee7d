"""Persistent ranks (gpututor.ranks, %%ranks): output side by side, a rank's exception, names
kept per rank, a hang ended with the waiting ranks named, a dead rank, gather, guarded mode and
clear errors for bad input (a typo in %ranks start keeps the live group). Interrupts and leaks:
test_ranks_lifecycle.py; replies and their requests, the ceiling on ranks: test_ranks_replies.py."""
from __future__ import annotations

import re

import pytest
import torch

import gpututor
from gpututor.runtime.ranks import RankGroup
from gpututor.runtime.ranks import checks as ranks_checks


@pytest.fixture
def group():   # one group per test: conftest checks that no rank outlives its test
    with gpututor.ranks(4, timeout=30) as g:
        yield g


def ipython_shell():
    """The test IPython shell: ``start_ipython()`` makes it once per process and returns None
    when called again (another test file's test may have called it first)."""
    from IPython.terminal.interactiveshell import TerminalInteractiveShell
    from IPython.testing.globalipapp import start_ipython
    return start_ipython() or TerminalInteractiveShell.instance()


def test_a_cell_runs_on_every_rank_and_shows_one_column_per_rank(group):
    result = group.run("print('hello from', rank)\nrank * 10")
    assert result.ok and [o.rank for o in result.outcomes] == [0, 1, 2, 3]
    assert [o.stdout for o in result.outcomes] == [f"hello from {r}\n" for r in range(4)]
    assert [o.value for o in result.outcomes] == ["0", "10", "20", "30"]
    page = result._repr_html_()
    assert page.count("<th") == 4 and page.count("<td") == 4   # one column per rank
    assert [page.index(f"rank {r}") for r in range(4)] == sorted(page.index(f"rank {r}")
                                                                for r in range(4))
    first_line = str(result).splitlines()[0]   # the text view: the four headings on one line
    assert all(f"rank {r}" in first_line for r in range(4))


def test_names_persist_per_rank_and_some_ranks_can_run_alone(group):
    group.run("mine = torch.full((2,), float(rank))")
    result = group.run("mine.sum().item()", ranks=[0, 2])
    assert [o.rank for o in result.outcomes] == [0, 2]
    assert [o.value for o in result.outcomes] == ["0.0", "4.0"]
    values = group.gather("mine")
    assert [v.tolist() for v in values] == [[float(r)] * 2 for r in range(4)]
    assert "mine" in group.names[3]


def test_a_collective_runs_across_the_ranks(group):
    result = group.run("t = torch.tensor([float(rank + 1)])\ndist.all_reduce(t)\nt.item()")
    assert [o.value for o in result.outcomes] == ["10.0"] * 4


def test_a_ranks_exception_shows_under_its_column_and_the_others_keep_their_state(group):
    group.run("kept = rank")
    result = group.run("1 / 0 if rank == 2 else kept")
    assert not result.ok and not result.restarted
    assert [o.state for o in result.outcomes] == ["done", "done", "error", "done"]
    error = result[2].error
    assert error["type"] == "ZeroDivisionError"
    assert re.search(r'File "<cell \d+>", line 1', error["traceback"])   # the cell's own line
    assert "rank.py" not in error["traceback"]                           # not the machinery
    assert "ZeroDivisionError" in result._repr_html_().split("<td")[3]   # under rank 2's column
    assert [o.value for o in group.run("kept").outcomes] == ["0", "1", "2", "3"]


def test_a_cell_that_hangs_ends_at_its_timeout_naming_the_waiting_ranks(group):
    group.run("before = rank")
    pids = list(group.pids)
    result = group.run("if rank < 2:\n    dist.barrier()\n", timeout=2)
    assert result.restarted and not result.ok
    assert [o.state for o in result.outcomes] == ["waiting", "waiting", "done", "done"]
    message = result.message
    assert "within timeout=2 s: ranks 0, 1 were still waiting" in message
    assert "ranks that finished: 2, 3" in message
    for rank in (0, 1):   # each waiting rank's stack, with the cell's line it waits on
        assert f"rank {rank} is waiting here" in message
    assert message.count("dist.barrier()") == 2 and "in barrier" in message
    assert "The group was restarted (4 fresh ranks" in message and "before" in message
    assert set(group.pids).isdisjoint(pids)
    assert [o.value for o in group.run("rank").outcomes] == ["0", "1", "2", "3"]   # fresh
    assert group.names == {r: [] for r in range(4)}


def test_a_rank_that_dies_restarts_the_group_saying_so(group):
    result = group.run("import os\nif rank == 1:\n    os._exit(7)\n")
    assert result.restarted and "rank 1 died during the cell" in result.message
    assert "code 7" in result.message
    assert group.running and group.run("rank").ok


def test_guarded_cells_refuse_every_built_in_collective_but_not_send_and_recv(group):
    refused = group.run("t = torch.ones(1)\ndist.all_reduce(t)", no_collectives=True)
    assert all(o.state == "error" and "not allowed here" in o.error["message"]
               for o in refused.outcomes)
    ring = ("t = torch.tensor([float(rank)])\ngot = torch.zeros(1)\n"
            "send = dist.isend(t, (rank + 1) % world_size)\n"
            "dist.recv(got, (rank - 1) % world_size)\nsend.wait()\ngot.item()")
    passed = group.run(ring, no_collectives=True)
    assert [o.value for o in passed.outcomes] == ["3.0", "0.0", "1.0", "2.0"]
    after = group.run("t = torch.ones(1)\ndist.all_reduce(t)\nt.item()")   # the guard is lifted
    assert [o.value for o in after.outcomes] == ["4.0"] * 4


def test_a_rank_imports_no_plotting_or_widget_code(group):
    result = group.run("import sys\nsorted({m.split('.')[0] for m in sys.modules} & "
                       "{'plotly', 'ipywidgets', 'IPython', 'matplotlib', 'anywidget'})")
    assert [o.value for o in result.outcomes] == ["[]"] * 4


def test_bad_input_is_refused_naming_the_field_the_value_and_what_is_allowed(group):
    with pytest.raises(ValueError, match=r"world_size=0 is invalid: allowed is an integer"):
        RankGroup(0)
    with pytest.raises(ValueError, match=r"timeout=0 is invalid: allowed is seconds in \[1, 3600\]"):
        RankGroup(2, timeout=0)
    with pytest.raises(ValueError, match=r"device='tpu' is invalid"):
        RankGroup(2, device="tpu")
    with pytest.raises(ValueError, match=r"ranks=\[7\] is invalid: allowed is ranks 0 to 3"):
        group.run("pass", ranks=[7])
    with pytest.raises(ValueError, match=r"timeout=-1 is invalid"):
        group.run("pass", timeout=-1)
    with pytest.raises(KeyError, match=r"name='nowhere' is not defined on ranks 0, 1, 2, 3"):
        group.gather("nowhere")
    with pytest.raises(ValueError, match=r"name='1x' is invalid"):
        group.gather("1x")


def test_the_magics_start_run_some_ranks_and_stop(capsys):
    from gpututor.runtime.ranks.magic import RanksMagics, parse_ranks
    shell = ipython_shell()
    shell.run_line_magic("load_ext", "gpututor")
    with pytest.raises(ValueError, match=r"world_size=0 is invalid: allowed is an integer in"):
        shell.run_line_magic("ranks", "start 0")
    with pytest.raises(RuntimeError, match=r"The ranks are not running: start them with"):
        shell.run_cell_magic("ranks", "", "rank")
    shell.run_line_magic("ranks", "start 2 --timeout 10")
    try:
        assert "2 ranks started on cpu" in capsys.readouterr().out
        shell.run_cell_magic("ranks", "", "x = rank + 100\nprint('x is', x)")
        shell.run_cell_magic("ranks", "1", "x")
        out = capsys.readouterr().out
        assert "x is 100" in out and "x is 101" in out and "rank 0" in out
        assert out.splitlines()[-1].strip() == "101"   # the second cell ran on rank 1 alone
        assert shell.run_line_magic("ranks", "gather x") == [100, 101]
        with pytest.raises(ValueError, match=r"ranks='7' is invalid: allowed is ranks 0 to 1 "
                                             r"\(this group has 2\)"):
            shell.run_cell_magic("ranks", "7", "pass")
        with pytest.raises(ValueError, match=r"option='--bogus' is invalid for %%ranks"):
            shell.run_cell_magic("ranks", "--bogus", "pass")
        shell.run_cell_magic("ranks", "--no-collectives", "dist.barrier()")
        assert "barrier is not allowed here" in capsys.readouterr().out
        shell.run_line_magic("ranks", "status")
        assert "rank 1: pid" in capsys.readouterr().out
    finally:
        shell.run_line_magic("ranks", "stop")
    assert "no process or temp file" in capsys.readouterr().out
    magics = next(m for m in shell.magics_manager.registry.values() if isinstance(m, RanksMagics))
    assert magics.group is None
    assert parse_ranks("all", 4) is None and parse_ranks("0,2", 4) == [0, 2]


def test_a_typo_in_ranks_start_keeps_the_live_group_and_its_names(monkeypatch):
    from gpututor.runtime.ranks.magic import RanksMagics
    shell = ipython_shell()
    shell.run_line_magic("load_ext", "gpututor")
    magics = next(m for m in shell.magics_manager.registry.values() if isinstance(m, RanksMagics))
    shell.run_line_magic("ranks", "start 2 --timeout 10")
    try:
        shell.run_cell_magic("ranks", "", "x = rank + 100")
        group, pids = magics.group, list(magics.group.pids)
        monkeypatch.setattr(ranks_checks, "usable_cpu_cores", lambda: 1)
        typos = [("start 2 --device tpu", r"device='tpu' is invalid"),
                 ("start 999", r"world_size=999 is invalid"),
                 ("start 5 --device cpu", r"world_size=5 is invalid on CPU here .*: allowed is 1 to 4$"),
                 ("start two", r"world_size='two' is invalid: allowed is a whole number of "
                               r"ranks \(at most 4 on this machine's CPU\)"),
                 ("start 2 --timeout 0", r"timeout=0.0 is invalid: allowed is seconds"),
                 ("start 2 --bogus", r"option='--bogus' is invalid for %ranks start")]
        for line, match in typos:
            with pytest.raises(ValueError, match=match):
                shell.run_line_magic("ranks", line)
            assert magics.group is group and group.running and group.pids == pids, line
        assert shell.run_line_magic("ranks", "gather x") == [100, 101]
    finally:
        shell.run_line_magic("ranks", "stop")
    assert magics.group is None


def test_every_sentence_the_ranks_show_has_a_chinese_line():
    import ast
    from pathlib import Path
    from gpututor.i18n import ZH
    folder = Path(gpututor.__file__).parent / "runtime" / "ranks"
    shown = [node.args[0].value for path in folder.glob("*.py")
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("tr", "say")
             and node.args and isinstance(node.args[0], ast.Constant)]
    assert len(shown) > 15 and [s for s in shown if s not in ZH] == []


def test_a_gathered_tensor_arrives_on_cpu_detached(group):
    group.run("w = torch.ones(3, requires_grad=True) * rank")
    values = group.gather("w", ranks=[1, 3])
    assert all(isinstance(v, torch.Tensor) and not v.requires_grad for v in values)
    assert [v.tolist() for v in values] == [[1.0] * 3, [3.0] * 3]


def test_the_packages_models_grids_and_strategies_work_inside_the_ranks(group):
    code = ("from gpututor import RunSpec, build_model\n"
            "from gpututor.parallel.mesh import RankGrid\n"
            "spec = RunSpec(model='gpt', model_size='tiny', world_size=world_size, "
            "mesh={'dp': 2, 'tp': 2})\n"
            "grid = RankGrid.of(spec)\n"
            "model = build_model(spec)\n"
            "w = next(model.parameters()).detach().clone()\n"
            "dist.all_reduce(w)\n"
            "torch.allclose(w, next(model.parameters()) * world_size)")
    result = group.run(code)
    assert result.ok, str(result)
    assert [o.value for o in result.outcomes] == ["True"] * 4   # same seed, same weights
    assert "tp" in str(group.gather("grid")[0])


def test_a_script_that_starts_ranks_outside_the_main_guard_is_told_how_to_fix_it(tmp_path):
    import subprocess
    import sys
    script = tmp_path / "script.py"
    script.write_text("import gpututor\ngroup = gpututor.ranks(2)\n")
    bad = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode != 0
    assert "gpututor.ranks() is called at the top level of script.py (line 2)" in bad.stderr
    assert "group = gpututor.ranks(4)" in bad.stderr
