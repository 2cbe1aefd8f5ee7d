"""The planner on a rank grid: its layouts are the registry's, its predictions sit near the
measured bytes, and the layout it picks for a capacity runs under that capacity."""
import pytest

from gpututor import RunSpec, launch
from gpututor.parallel import STRATEGIES
from gpututor.plan.layouts import grids, layouts, pick_layout, predict_layouts, transformer_of


def test_layouts_are_the_registrys_planned_strategies_simplest_first():
    assert list(layouts()) == ["ddp", "fsdp", "tp", "pp", "ddp+tp", "fsdp+tp", "ddp+pp",
                               "ddp+tp+pp"]
    for name, (dims, zero_stage) in layouts().items():
        assert STRATEGIES[name].dims() == dims and STRATEGIES[name].zero_stage == zero_stage
    assert layouts()["fsdp+tp"][1] == 3 and layouts()["ddp+tp"][1] == 0   # the dp part's stage


def test_grids_of_a_world_size():
    assert grids(4, ("dp", "tp")) == [{"dp": 2, "tp": 2}]
    assert grids(8, ("dp", "tp", "pp")) == [{"dp": 2, "tp": 2, "pp": 2}]
    assert {tuple(g.values()) for g in grids(8, ("dp", "pp"))} == {(2, 4), (4, 2)}
    assert grids(3, ("dp", "tp")) == []


def test_prediction_sits_near_the_measured_state():
    spec = RunSpec(model="gpt", model_size="medium", batch_size=8, seq_len=32, steps=2,
                   strategy="fsdp", world_size=4)
    measured = launch(spec).wait()["mem_by_category"]
    row = next(r for r in predict_layouts(transformer_of(spec), 8, 4) if r["layout"] == "fsdp")
    for part in ("grads", "optimizer"):   # sharded state: the formula's 1/N, padding aside
        assert row[part] == pytest.approx(measured[part][0], rel=0.05)


def test_the_pick_runs_under_the_capacity():
    base = RunSpec(model="gpt", model_size="medium", batch_size=8, seq_len=32, steps=2)
    single = launch(base.replace(strategy="single", world_size=1)).wait()
    capacity = int(0.6 * single["peak_mem_bytes"][0])
    rows = predict_layouts(transformer_of(base), 8, 4, capacity)
    assert not next(r for r in rows if r["layout"] == "ddp")["fits"]   # copies do not fit
    pick = pick_layout(rows)
    assert pick is not None and pick["layout"] != "ddp"
    run = launch(base.replace(strategy=pick["layout"], world_size=4, mesh=pick["mesh"]
                              if len(pick["mesh"]) > 1 else None, device_memory=capacity,
                              options=(("microbatches", 2),) if "pp" in pick["mesh"] else ()))
    summary = run.wait()   # RunFailed (out of memory) would fail the test
    assert max(summary["peak_mem_bytes"]) <= capacity


def test_cli_plan_layouts():
    import json
    import subprocess
    import sys
    from pathlib import Path

    from gpututor.plan.layouts import HEADROOM
    # a capacity between what ddp and fsdp are predicted to need (what each may fill is
    # HEADROOM of it): ddp does not fit, fsdp does, so the simplest that fits is fsdp
    spec = RunSpec(model="gpt", model_size="medium", batch_size=8, seq_len=64)
    need = {r["layout"]: r["total"] / HEADROOM
            for r in predict_layouts(transformer_of(spec), 8, 4)}
    assert need["fsdp"] < need["ddp"]
    capacity = int((need["fsdp"] + need["ddp"]) / 2)
    out = subprocess.run([sys.executable, "-m", "gpututor", "plan", "--layouts", "--tiny-gpt",
                          "medium", "--world-size", "4", "--batch-size", "8", "--seq-len", "64",
                          "--device-memory", str(capacity), "--json", "-"],
                         cwd=Path(__file__).resolve().parents[2], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    answer = json.loads(out)
    assert answer["device_memory"] == capacity and answer["pick"]["layout"] == "fsdp"
    assert {r["layout"] for r in answer["layouts"]} >= {"ddp", "fsdp", "ddp+tp", "ddp+pp"}
