"""A strategy describes itself, and the rest of the package reads the description.

A toy strategy registered with no other edit appears in the command line's choices, the
planner's as-built memory, its layouts and the calibration's table; every registered
strategy's description is consistent (options, defaults, stages, precisions); and where a
strategy says which collectives a step runs, the bytes it says are the bytes its ranks meter.
"""
from __future__ import annotations

import re

import pytest

from gpututor import RunSpec, build_model, launch
from gpututor.config import RUN_PRECISIONS
from gpututor.lessons.choosing_hardware.calibrate import calibration_specs, collectives, predict_run
from gpututor.lessons.choosing_hardware.machine import Machine
from gpututor.models import config_of
from gpututor.parallel import STRATEGIES, check_spec, small_layout, small_model
from gpututor.parallel.base import STATES, MemoryLayout
from gpututor.parallel.data_parallel.scratch import NaiveDataParallel
from gpututor.plan.as_built import as_built, tiny_gpt_memory
from gpututor.plan.layouts import layouts, predict_layouts, transformer_of
from gpututor.runtime.cli import build_parser


class OneBucket(NaiveDataParallel):
    """A toy: the from-scratch all-reduce, described as one all-reduce of every gradient."""

    name = "toy-one-bucket"
    description = "a test's toy: the gradients all-reduced in one message"
    memory_layout = MemoryLayout(note="a toy: whole copies, as dp-naive")
    planned = True

    def step_collectives(self, spec, model):
        if spec.world_size == 1:
            return []
        return [("all_reduce", sum(p.numel() * p.element_size() for p in model.parameters()))]


@pytest.fixture
def toy(monkeypatch):
    strategy = OneBucket()
    monkeypatch.setitem(STRATEGIES, strategy.name, strategy)
    return strategy


def test_a_new_strategy_appears_everywhere_with_no_other_edit(toy):
    spec = RunSpec(strategy=toy.name, world_size=2, batch_size=8, seq_len=32, steps=2)
    check_spec(spec)
    # the command line's choices
    run_help = build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    assert toy.name in re.sub(r"-\s+", "-", run_help)   # (argparse may wrap at a hyphen)
    # the planner's as-built memory: a whole copy on each rank, as dp-naive holds it
    assert toy.name in as_built()
    cfg = config_of(spec)
    assert tiny_gpt_memory(cfg, 8, 32, toy.name, 2) == tiny_gpt_memory(cfg, 8, 32, "dp-naive", 2)
    # the planner's layouts: it is proposed, after the registry's own
    assert layouts()[toy.name] == (("dp",), 0)
    assert any(r["layout"] == toy.name for r in predict_layouts(transformer_of(spec), 8, 2))
    # the calibration's table, priced with the collectives it says it runs
    labels = [label for label, _ in calibration_specs(spec, world_size=2)]
    assert toy.name in labels
    total = sum(p.numel() * 4 for p in build_model(spec).parameters())
    assert collectives(spec) == [("all_reduce", total)]
    machine = Machine(matmul_flops=1e9, comm={"all_reduce": (1e-4, 1e8)}, world_size=2,
                      device="cpu")
    predicted = predict_run(spec, machine)
    assert predicted["comm_s"] == pytest.approx(2 * (1e-4 + total / (2 * 1e8)))


def test_without_the_toy_none_of_those_know_it():
    assert OneBucket.name not in STRATEGIES and OneBucket.name not in as_built()
    with pytest.raises(ValueError, match="strategy='toy-one-bucket' is invalid"):
        check_spec(RunSpec(strategy=OneBucket.name, world_size=2))


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_each_strategy_describes_itself_consistently(name):
    strategy = STRATEGIES[name]
    assert strategy.zero_stage in (0, 1, 2, 3)
    assert strategy.shards == STATES[:strategy.zero_stage]
    assert set(strategy.precisions) <= set(RUN_PRECISIONS) and strategy.precisions
    for option, default in strategy.defaults.items():
        assert option in strategy.options, f"{name}: default for unknown option {option!r}"
        assert strategy.options[option](default), f"{name}: its default {option}={default!r} " \
                                                  "fails its own check"
    if strategy.planned or strategy.memory_layout is not None:   # the planner reads these
        world, mesh, options = small_layout(name)
        spec = RunSpec(model=small_model(name), strategy=name, world_size=world, mesh=mesh,
                       options=options, batch_size=8, seq_len=32)
        if strategy.memory_layout is not None:
            ops = strategy.step_collectives(spec, build_model(spec))
            assert ops is not None and (bool(ops) == (world > 1)), f"{name}: {ops}"
            assert all(op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
                       and nbytes > 0 for op, nbytes in ops), f"{name}: {ops}"


# metered strategies whose ranks count every byte they send in collectives (the pipeline's
# description counts both directions of each hand-off, the time on a stage's critical path,
# while a rank meters only what it sends itself; torch's own collectives are not metered)
METERED = ["dp-naive", "dp-bucketed", "ddp", "zero1", "zero2", "zero3", "tp"]


@pytest.mark.parametrize("name", METERED)
def test_the_collectives_a_strategy_describes_are_those_its_ranks_meter(name):
    spec = RunSpec(strategy=name, world_size=2, batch_size=8, seq_len=32, steps=4,
                   model_size="tiny", timeout=60.0)
    described = sum(nbytes for _, nbytes in collectives(spec))
    measured = launch(spec).wait()["comm_bytes_per_step"]
    assert measured == pytest.approx(described, rel=1e-6), \
        f"{name}: says {described:.0f} bytes per step, its ranks metered {measured:.0f}"
