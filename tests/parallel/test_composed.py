"""The rank grid, and layouts composed on it, proven equal to one process on the same batch."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpututor import RunSpec, launch
from gpututor.parallel import check_spec
from gpututor.parallel.mesh import RankGrid
from conftest import assert_equals_one_process

ROOT = Path(__file__).resolve().parents[2]
BASE = dict(model="gpt", model_size="small", batch_size=8, seq_len=32, steps=3, timeout=60.0)
LAYOUTS = [   # strategy, mesh: every composed layout of the registry
    ("ddp+tp", {"dp": 2, "tp": 2}),
    ("dp-naive+tp", {"dp": 2, "tp": 2}),
    ("fsdp+tp", {"dp": 2, "tp": 2}),
    ("ddp+pp", {"dp": 2, "pp": 2}),
    ("dp-naive+pp", {"dp": 2, "pp": 2}),
    ("ddp+tp+pp", {"dp": 2, "tp": 2, "pp": 2}),
]


def test_grid_is_printable_data():
    grid = RankGrid((("dp", 2), ("tp", 2)))
    assert grid.ranks.tolist() == [[0, 1], [2, 3]]
    assert grid.groups("tp") == [[0, 1], [2, 3]] and grid.groups("dp") == [[0, 2], [1, 3]]
    assert grid.group_of(3, "dp") == [1, 3] and grid.index(3, "dp") == 1
    assert grid.index(2, "tp") == 0 and grid.degree("pp") == 1
    assert "tp groups (same dp index): [0, 1] [2, 3]" in str(grid)
    three = RankGrid((("dp", 2), ("pp", 2), ("tp", 2)))   # tp innermost: consecutive ranks
    assert three.groups("tp")[0] == [0, 1] and three.groups("pp")[0] == [0, 2]
    assert three.groups("dp")[0] == [0, 4]


def test_mesh_is_checked_before_anything_starts():
    with pytest.raises(ValueError, match="mesh=None is invalid for strategy='ddp\\+tp'"):
        check_spec(RunSpec(strategy="ddp+tp", world_size=4))
    with pytest.raises(ValueError, match="multiply to the world size"):
        RunSpec(strategy="ddp+tp", world_size=4, mesh={"dp": 2, "tp": 1})
    with pytest.raises(ValueError, match="exactly the dims dp, tp"):
        check_spec(RunSpec(strategy="ddp+tp", world_size=4, mesh={"dp": 2, "pp": 2}))
    with pytest.raises(ValueError, match="mesh tp=3 is invalid"):
        check_spec(RunSpec(strategy="ddp+tp", model_size="tiny", world_size=6,
                           mesh={"dp": 2, "tp": 3}, batch_size=6))
    with pytest.raises(ValueError, match="mesh='dp=two' is invalid"):
        RunSpec(mesh="dp=two")


@pytest.mark.parametrize("strategy,mesh", LAYOUTS, ids=[s for s, _ in LAYOUTS])
def test_layout_equals_one_process(tmp_path, strategy, mesh):
    options = (("microbatches", 2),) if "pp" in mesh else ()
    # SGD with momentum here: AdamW's first steps move every weight by about ±lr whatever the
    # gradient's size, so where a gradient is nearly zero the rounding of summing split matmuls
    # in another order (~1e-7) can show up as ~1e-4 in a weight (the single-dim tests allow
    # for that); with SGD the layouts must agree with one process to ~1e-6 everywhere.
    spec = RunSpec(strategy=strategy, mesh=mesh, world_size=math.prod(mesh.values()),
                   options=options, save_state=str(tmp_path / "w.pt"), optimizer="sgd", **BASE)
    assert_equals_one_process(spec, launch(spec).wait())


def test_each_rank_holds_its_share():
    """dp x tp: a rank holds about 1/tp of the blocks' weights; dp x pp: a stage's blocks."""
    runs = {name: launch(RunSpec(strategy=name, mesh=mesh, world_size=4, **BASE)).wait()
            for name, mesh in (("ddp", None), ("ddp+tp", {"dp": 2, "tp": 2}),
                               ("ddp+pp", {"dp": 2, "pp": 2}))}
    params = {name: s["mem_by_category"]["params"] for name, s in runs.items()}
    assert params["ddp+tp"][0] < 0.7 * params["ddp"][0]
    assert max(params["ddp+pp"]) < 0.8 * params["ddp"][0]
    assert params["ddp+tp"][0] == params["ddp+tp"][2]   # dp replicas hold the same slice


def test_cli_runs_a_layout_with_the_single_losses():
    # SGD at lr 0.1: a gradient off by 2x changes the second loss by 0.12, 2.5 % (AdamW: by
    # ~1e-6 relative, under the 1e-4 below; see test_data_parallel)
    common = ["--model", "gpt", "--model-size", "tiny", "--batch-size", "8", "--seq-len", "32",
              "--steps", "3", "--optimizer", "sgd", "--lr", "0.1", "--quiet", "--json", "-"]
    run = lambda *extra: json.loads(subprocess.run(
        [sys.executable, "-m", "gpututor", "run", *common, *extra], cwd=ROOT,
        capture_output=True, text=True, timeout=120, check=True).stdout)
    single = run("--strategy", "single", "--world-size", "1")
    layout = run("--strategy", "fsdp+tp", "--mesh", "dp=2,tp=2")   # world size from the mesh
    assert layout["world_size"] == 4
    for a, b in zip(layout["losses"], single["losses"]):
        assert abs(a - b) <= 1e-4 * abs(b)


def test_sharded_models_never_exist_whole_on_a_rank():
    """Built on meta, cut or sharded there, then made: no rank's setup peak reaches the whole
    model's parameter bytes (one process's setup holds at least all of them)."""
    base = RunSpec(model="gpt", model_size="medium", batch_size=8, seq_len=32, steps=1,
                   timeout=60.0)
    single = launch(base.replace(strategy="single", world_size=1)).wait()
    whole = single["mem_by_category"]["params"][0]
    assert single["setup_peak_mem_bytes"][0] >= whole
    for strategy, world, mesh in (("fsdp", 4, None), ("zero3", 4, None), ("tp", 2, None),
                                  ("pp", 4, None),
                                  ("fsdp+tp", 4, {"dp": 2, "tp": 2}),
                                  ("dp-naive+tp", 4, {"dp": 2, "tp": 2})):
        # (ddp+tp makes half the model too, but then DDP allocates its gradient buckets: a
        # second copy of that half, so its setup peak is about the whole model's size)
        options = (("microbatches", 2),) if strategy == "pp" else ()
        run = launch(base.replace(strategy=strategy, world_size=world, mesh=mesh,
                                  options=options)).wait()
        assert max(run["setup_peak_mem_bytes"]) < 0.75 * whole, (strategy, run["setup_peak_mem_bytes"])
        torch.testing.assert_close(torch.tensor(run["losses"]), torch.tensor(single["losses"]),
                                   rtol=1e-5, atol=1e-6)
