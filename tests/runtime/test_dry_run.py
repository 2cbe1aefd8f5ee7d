"""``gpututor run --dry-run``: an N-rank layout checked on this machine with a fake process group.

Every registered strategy (but pp-torch, refused with a reason) builds and steps for its ranks;
the bytes per rank are the real ones (the planner's model-state formula, or a real run's)."""
from __future__ import annotations

import json

import pytest

from gpututor import RunSpec, build_model, launch
from gpututor.models import count_parameters
from gpututor.parallel import STRATEGIES, small_model
from gpututor.plan.memory import model_state_bytes
from gpututor.runtime.cli import main
from gpututor.runtime.dry_run import dry_run

LAYOUTS = {   # strategy -> (world size, mesh, options) of a small layout to dry-run
    "single": (1, None, ()), "ddp": (2, None, ()), "dp-naive": (2, None, ()),
    "dp-bucketed": (2, None, ()), "zero1": (4, None, ()), "zero2": (4, None, ()),
    "zero3": (4, None, ()), "fsdp": (4, None, ()), "tp": (2, None, ()), "tp-dtensor": (2, None, ()),
    "pp": (2, None, (("microbatches", 2),)),
    "ddp+tp": (4, {"dp": 2, "tp": 2}, ()), "dp-naive+tp": (4, {"dp": 2, "tp": 2}, ()),
    "fsdp+tp": (4, {"dp": 2, "tp": 2}, ()), "ddp+pp": (4, {"dp": 2, "pp": 2}, (("microbatches", 2),)),
    "dp-naive+pp": (4, {"dp": 2, "pp": 2}, (("microbatches", 2),)),
    "ddp+tp+pp": (8, {"dp": 2, "tp": 2, "pp": 2}, (("microbatches", 2),)),
    "cp": (2, None, ()), "ddp+cp": (4, {"dp": 2, "cp": 2}, ()),
    "ep": (2, None, ()), "ddp+ep": (4, {"dp": 2, "ep": 2}, ()),
    "local-sgd": (2, None, (("sync_every", 1),)), "diloco": (2, None, (("sync_every", 1),)),
}


def _spec(strategy, **kw):
    world, mesh, options = LAYOUTS[strategy]
    return RunSpec(model=small_model(strategy), model_size="tiny", strategy=strategy, world_size=world, mesh=mesh,
                   options=options, batch_size=8, seq_len=32, **kw)


def test_every_strategy_but_pp_torch_has_a_layout_here():
    assert set(LAYOUTS) | {"pp-torch"} == set(STRATEGIES)


@pytest.mark.parametrize("strategy", sorted(LAYOUTS))
def test_dry_run_reports_what_a_real_run_holds(strategy):
    spec = _spec(strategy)
    rows = dry_run(spec)
    assert [r["rank"] for r in rows] == list(range(spec.world_size))
    real = launch(spec.replace(steps=1, device="cpu")).wait()["mem_by_category"]
    for r in rows:   # the same bytes, rank by rank, as a real (gloo) run of one step
        assert [r["params"], r["grads"], r["optimizer"]] == [
            real[c][r["rank"]] for c in ("params", "grads", "optimizer")], r


def test_an_8_rank_fsdp_layout_matches_the_planner_formula():
    spec = RunSpec(model="gpt", model_size="small", strategy="fsdp", world_size=8,
                   batch_size=16, seq_len=32)
    rows = dry_run(spec)
    n_params = count_parameters(build_model(spec))   # the small GPT's, as the ranks build it
    formula = model_state_bytes(n_params, "fp32", "adam", zero_stage=3, dp=8)
    for r in rows:
        for c in ("params", "grads", "optimizer", "total"):
            assert r[c] == pytest.approx(formula[c], rel=0.01), (r["rank"], c)


def test_pp_torch_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="strategy='pp-torch' cannot be dry-run.*strategy='pp'"):
        dry_run(RunSpec(model="gpt", model_size="tiny", strategy="pp-torch", world_size=2))


def test_cli_dry_run_prints_the_table_and_writes_json(tmp_path, capsys):
    path = tmp_path / "dry.json"
    assert main(["run", "--strategy", "zero3", "--world-size", "4", "--model-size", "tiny",
                 "--dry-run", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "dry run of zero3 on 4 ranks" in out and out.count("\n") >= 5
    written = json.loads(path.read_text())
    assert written["dry_run"] and len(written["ranks"]) == 4
