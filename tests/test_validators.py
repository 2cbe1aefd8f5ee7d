"""One set of validators (``gpututor.checks``): a bool is never a number, and a strategy option
or a constructor argument that expects a number refuses ``True`` before anything starts, with an
error that names the field, the value and what is allowed.

A spec is data: ``RunSpec(resume=...)`` names a folder that may be on another machine, so the
folder is looked at where the run starts (``launch()``, the command line), not when the spec
is made.
"""
from __future__ import annotations

import math

import pytest

from gpututor import RunSpec, checks, launch
from gpututor.parallel import STRATEGIES, check_spec, small_layout, small_model
from gpututor.runtime import launcher


@pytest.fixture
def no_rank_starts(monkeypatch):
    """Fail the test if launch() gets as far as starting ranks."""
    def start(*args, **kwargs):
        raise AssertionError("launch() started ranks")
    monkeypatch.setattr(launcher, "Run", start)


def spec_with_option(strategy: str, name: str, value) -> RunSpec:
    """The smallest valid run of ``strategy``, with option ``name`` set to ``value``."""
    world, mesh, options = small_layout(strategy)
    return RunSpec(model=small_model(strategy), strategy=strategy, world_size=world, mesh=mesh,
                   options=options + ((name, value),), batch_size=8, seq_len=32, steps=2)


NUMERIC_OPTIONS = [("ddp", "bucket_cap_mb"), ("dp-bucketed", "bucket_cap_mb"),
                   ("ddp", "powersgd_rank"), ("ddp", "link_gbps"), ("ddp", "link_latency_us"),
                   ("dp-naive", "link_gbps"), ("tp", "link_gbps"), ("tp", "link_latency_us")]


@pytest.mark.parametrize("strategy,name", NUMERIC_OPTIONS)
@pytest.mark.parametrize("value", [True, False])
def test_a_numeric_option_refuses_a_bool_before_anything_starts(strategy, name, value,
                                                                  no_rank_starts):
    spec = spec_with_option(strategy, name, value)   # options are checked by the strategy
    with pytest.raises(ValueError) as err:
        launch(spec)
    message = str(err.value)
    allowed = STRATEGIES[strategy].allowed[name]
    assert f"option {name}={value!r} is invalid: allowed is {allowed}" in message


def every_option():
    for strategy_name, strategy in STRATEGIES.items():
        for name in strategy.options:
            yield strategy_name, name


@pytest.mark.parametrize("strategy,name", list(every_option()))
def test_only_a_yes_or_no_option_takes_a_bool(strategy, name):
    """Registry-wide: an option takes True only where what it allows is True or False."""
    allowed = STRATEGIES[strategy].allowed[name]
    if allowed == "True or False":
        assert STRATEGIES[strategy].options[name](True) and STRATEGIES[strategy].options[name](False)
        assert not STRATEGIES[strategy].options[name](1)
        return
    with pytest.raises(ValueError, match=f"option {name}=True is invalid: allowed is "):
        check_spec(spec_with_option(strategy, name, True))


@pytest.mark.parametrize("strategy,name,value", [
    ("ddp", "bucket_cap_mb", 25), ("ddp", "bucket_cap_mb", 0.5), ("ddp", "powersgd_rank", 4),
    ("ddp", "link_gbps", 12.5), ("ddp", "link_latency_us", 0), ("dp-bucketed", "bucket_cap_mb", 1),
])
def test_a_numeric_option_still_takes_its_numbers(strategy, name, value):
    check_spec(spec_with_option(strategy, name, value))


@pytest.mark.parametrize("strategy,name,value", [
    ("ddp", "bucket_cap_mb", 0), ("ddp", "bucket_cap_mb", math.nan), ("ddp", "powersgd_rank", 2.0),
    ("ddp", "link_gbps", math.inf), ("ddp", "link_latency_us", -1), ("ddp", "bucket_cap_mb", "25"),
])
def test_a_numeric_option_refuses_what_is_out_of_its_range(strategy, name, value):
    with pytest.raises(ValueError, match=f"option {name}="):
        check_spec(spec_with_option(strategy, name, value))


@pytest.mark.parametrize("field", ["lr", "timeout", "peak_flops", "world_size", "steps"])
def test_a_numeric_field_refuses_a_bool(field):
    with pytest.raises(ValueError, match=f"^{field}=True is invalid: allowed is "):
        RunSpec(**{field: True})


def test_capacity_factor_refuses_a_bool():
    with pytest.raises(ValueError, match="^capacity_factor=True is invalid: allowed is "):
        RunSpec(model="moe", capacity_factor=True)


def test_adam8bit_block_refuses_a_bool():
    import torch
    from gpututor.precision.adam8bit import Adam8bit
    with pytest.raises(ValueError, match="^block=True is invalid: allowed is "):
        Adam8bit([torch.nn.Parameter(torch.zeros(4))], block=True)


def test_the_predicates_refuse_bools_and_non_finite_numbers():
    assert checks.is_number(1) and checks.is_number(0.5) and not checks.is_number(True)
    assert not checks.is_number(math.nan) and not checks.is_number("1")
    assert checks.is_int(3) and not checks.is_int(True) and not checks.is_int(3.0)
    in_unit = checks.number_in(0, 1, low_open=True)
    assert in_unit(1) and in_unit(0.5) and not in_unit(0) and not in_unit(True)
    small = checks.int_in(1, 64)
    assert small(1) and small(64) and not small(65) and not small(True) and not small(2.0)
    assert checks.int_in(1)(10**9)
    hooks = checks.one_of(("none", "fp16"))
    assert hooks("fp16") and not hooks(["fp16"]) and not hooks({"x": 1})
    assert checks.one_of({"none": None})("none") and not checks.one_of({"none": None})(["none"])
    checks.choice("zero_stage", 1, (0, 1, 2, 3))
    with pytest.raises(ValueError, match=r"^zero_stage=True is invalid: allowed values are 0, 1"):
        checks.choice("zero_stage", True, (0, 1, 2, 3))   # True == 1 to Python, not here


# ---- resume: a folder is looked at where the run starts -------------------------------------

def test_a_spec_may_resume_from_a_folder_of_another_machine():
    spec = RunSpec(strategy="single", world_size=1, resume="/nonexistent/cluster/path/step10")
    assert spec.resume == "/nonexistent/cluster/path/step10"


def test_launch_refuses_a_missing_resume_folder_before_any_rank_starts(no_rank_starts):
    spec = RunSpec(strategy="single", world_size=1, resume="/nonexistent/cluster/path")
    with pytest.raises(ValueError, match="^resume='/nonexistent/cluster/path' is invalid: allowed "
                                         "is an existing checkpoint folder$"):
        launch(spec)


def test_launch_refuses_a_file_as_resume_before_any_rank_starts(tmp_path, no_rank_starts):
    saved = tmp_path / "model.pt"
    saved.write_bytes(b"not read")
    spec = RunSpec(strategy="single", world_size=1, resume=str(saved))
    with pytest.raises(ValueError, match=r"^resume='.*model.pt' is invalid: allowed is an existing "
                                         "checkpoint folder$"):
        launch(spec)


@pytest.mark.parametrize("value", ["", 3, True])
def test_resume_must_be_a_path(value):
    with pytest.raises(ValueError, match=f"^resume={value!r} is invalid: allowed is None or "):
        RunSpec(strategy="single", world_size=1, resume=value)


def test_the_command_line_refuses_a_missing_resume_folder_before_training(capsys,
                                                                         no_rank_starts):
    from gpututor.runtime.cli import main
    code = main(["run", "--strategy", "single", "--world-size", "1", "--steps", "2",
                 "--resume", "/nonexistent/cluster/path", "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert "gpututor: error: resume='/nonexistent/cluster/path' is invalid" in err


def test_a_torchrun_rank_refuses_a_missing_resume_folder_before_its_process_group(
        capsys, monkeypatch):
    from gpututor.runtime import cli, worker
    for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("TORCHELASTIC_MAX_RESTARTS", raising=False)

    def no_group(*args, **kwargs):
        raise AssertionError("the process group was started")
    monkeypatch.setattr(worker, "init_process_group", no_group)
    code = cli.main(["run", "--strategy", "single", "--steps", "2", "--device", "cpu",
                     "--resume", "/nonexistent/cluster/path", "--quiet"])
    assert code == 2
    assert "gpututor: error: resume='/nonexistent/cluster/path' is invalid" in capsys.readouterr().err


def test_a_link_is_scaled_by_a_number_of_flops_not_a_bool():
    from gpututor.parallel.link import scaled_link
    with pytest.raises(ValueError, match="^here_flops=True is invalid: allowed is the FLOP/s"):
        scaled_link("pcie4", True)


def test_pin_memory_is_none_true_or_false_not_one():
    import torch
    from gpututor.precision.offload import OffloadedAdam
    with pytest.raises(ValueError, match="^pin_memory=1 is invalid: allowed values are None, True"):
        OffloadedAdam([torch.nn.Parameter(torch.zeros(4))], pin_memory=1)
