"""Profiling a few steps of the tiny GPT: the profiler changes no number of the training, and
what it reports (top operators, timeline, phases, breakdown, trace file) is consistent."""
from __future__ import annotations

import json

import pytest
import torch

from gpututor import RunSpec
from gpututor.data import batches
from gpututor.measure.profile import OP_KINDS, PHASES, category, profile_steps
from gpututor.models import build_model
from gpututor.lessons.one_device_speed.profile_figures import timeline_figure, top_ops_figure

SPEC = RunSpec(model="gpt", model_size="tiny", batch_size=8, seq_len=32, steps=4, world_size=1)
STEPS, WARMUP = 3, 1


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = build_model(SPEC)
        optimizer = torch.optim.AdamW(model.parameters(), lr=SPEC.lr)
        path = tmp_path_factory.mktemp("profile") / "trace.json"
        yield profile_steps(model, batches(SPEC), optimizer, steps=STEPS, warmup=WARMUP,
                            trace_path=path)
    finally:
        torch.set_num_threads(threads)


def test_profiled_losses_equal_an_unprofiled_run(profiled):
    from gpututor.lessons.common.one_device import train_with   # the same model (seeded) and batches
    losses = train_with(SPEC, lambda p: torch.optim.AdamW(p, lr=SPEC.lr))["losses"]   # as the fixture
    assert len(profiled.losses) == STEPS
    torch.testing.assert_close(torch.tensor(profiled.losses), torch.tensor(losses[WARMUP:]))


def test_top_ops_lead_with_matmuls_and_fit_in_the_wall_time(profiled):
    rows = profiled.top_ops(10)
    assert len(rows) == 10
    names = [r["name"] for r in rows]
    assert {"aten::addmm", "aten::mm"} & set(names)
    assert category("aten::addmm") == category("aten::mm") == "compute"
    assert all(r["category"] == "compute" for r in rows if r["name"] in ("aten::addmm", "aten::mm"))
    assert all(n.startswith("aten::") for n in names)      # no ranges (phases, steps), only ops
    assert [r["self_s"] for r in rows] == sorted((r["self_s"] for r in rows), reverse=True)
    assert all(0 < r["share"] <= 1 and r["calls"] >= 1 for r in rows)
    assert all(r["self_s"] <= r["total_s"] + 1e-9 for r in rows)
    assert sum(r["self_s"] for r in profiled.top_ops(10_000)) <= profiled.wall_s


def test_categories_are_decided_by_name():
    assert category("aten::copy_") == category("aten::index_select") == "copy"
    assert category("aten::_scaled_dot_product_flash_attention_for_cpu") == "compute"
    assert category("aten::gelu") == category("aten::native_layer_norm") == "other"


def test_timeline_is_sorted_and_inside_the_profiled_steps(profiled):
    rows = profiled.timeline()
    assert rows
    starts = [r["start_s"] for r in rows]
    assert starts == sorted(starts)
    assert all(0 <= r["start_s"] <= r["end_s"] <= profiled.wall_s for r in rows)
    assert {r["category"] for r in rows} <= set(OP_KINDS)
    assert {r["phase"] for r in rows} >= set(PHASES)
    assert {r["step"] for r in rows} == set(range(STEPS))
    assert all(r["name"].startswith("aten::") for r in rows)
    # outermost only: the addmm inside each aten::linear is not a row of its own
    assert "aten::linear" in {r["name"] for r in rows}
    assert "aten::addmm" not in {r["name"] for r in rows if r["phase"] == "forward"}


def test_every_phase_of_every_step_is_there_in_order(profiled):
    rows = profiled.phases()
    assert [(r["step"], r["phase"]) for r in rows] == [(s, p) for s in range(STEPS) for p in PHASES]
    assert all(0 <= r["start_s"] < r["end_s"] <= profiled.wall_s for r in rows)
    assert all(a["end_s"] <= b["start_s"] for a, b in zip(rows, rows[1:]))


def test_breakdown_adds_up_to_the_wall_time(profiled):
    parts = profiled.breakdown()
    assert parts["wall_s"] == profiled.wall_s > 0
    assert all(parts[k] >= 0 for k in ("compute_s", "copy_s", "other_s", "idle_s"))
    total = parts["compute_s"] + parts["copy_s"] + parts["other_s"] + parts["idle_s"]
    assert total == pytest.approx(parts["wall_s"], rel=0.01)
    assert parts["compute_s"] > 0


def test_trace_file_is_a_chrome_trace(profiled):
    trace = json.loads(open(profiled.trace_path).read())
    names = {e.get("name") for e in trace["traceEvents"]}
    assert {"forward", "backward", "optimizer", "aten::mm"} <= names


@pytest.mark.parametrize("field, kwargs", [
    ("steps", dict(steps=0)), ("warmup", dict(warmup=-1)), ("batches", dict(steps=4, warmup=1)),
])
def test_bad_arguments_name_the_field(field, kwargs):
    model = build_model(SPEC)                      # SPEC has 4 batches: 1 + 4 are too many
    with pytest.raises(ValueError, match=field):
        profile_steps(model, batches(SPEC), **kwargs)


def test_figures_have_their_traces_and_the_shares_in_the_title(profiled):
    top = top_ops_figure(profiled.top_ops(8))
    assert len(top.data) == 1 and len(top.data[0].y) == 8
    assert top.data[0].y[-1] == profiled.top_ops(1)[0]["name"]       # the largest on top
    line = timeline_figure(profiled)
    assert [t.name for t in line.data] == [*PHASES, *OP_KINDS]
    parts = profiled.breakdown()
    title = line.layout.title.text
    for name in (*OP_KINDS, "idle"):
        assert f"{name} {parts[name + '_s'] / parts['wall_s']:.0%}" in title
    ops = [t for t in line.data if t.name in OP_KINDS]
    assert sum(len(t.x) for t in ops) == len(profiled.timeline())


def test_each_trace_gets_a_new_private_file(tmp_path, monkeypatch):
    """Lesson 01c's trace: a unique file per call, this user's alone, not a fixed name in the
    shared temp folder (which another user could have made first, or linked elsewhere)."""
    import os
    import stat
    import tempfile
    from pathlib import Path

    from gpututor.measure.profile import new_trace_path
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    first, second = new_trace_path(), new_trace_path()
    assert first != second and first.parent.parent == second.parent.parent == tmp_path
    for path in (first, second):
        folder = os.lstat(path.parent)
        assert stat.S_ISDIR(folder.st_mode) and folder.st_uid == os.getuid()
        assert stat.S_IMODE(folder.st_mode) == 0o700 and not path.exists()
    model = build_model(SPEC)
    profile_steps(model, batches(SPEC), steps=1, warmup=0, trace_path=first)
    assert json.loads(first.read_text())["traceEvents"]          # the trace went into it
    assert os.listdir(tmp_path / first.parent.name) == ["trace.json"]
    notebooks = Path(__file__).resolve().parents[2] / "notebooks"
    for notebook in (notebooks / "01c_one_device_speed.ipynb",
                     notebooks / "zh" / "01c_one_device_speed.ipynb"):
        text = notebook.read_text()
        assert "gpututor_lesson01c_trace" not in text and "new_trace_path()" in text
