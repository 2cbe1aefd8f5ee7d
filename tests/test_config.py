"""Every RunSpec field rejects bad values before anything starts, naming field, value, allowed.

Field checks run when a RunSpec is made; the strategy's checks (its name, its options, how the
batch splits) run in ``check_spec``, and what this machine can do (a GPU per rank, fp16) in
``check_machine``: ``launch()`` calls both before any process starts.
"""
import pytest

from gpututor import RunSpec, launch
from gpututor.parallel import check_spec
from gpututor.runtime.guard import check_machine

BAD_VALUES = [
    ("model", "resnet"), ("model", None),
    ("model_size", "huge"),
    ("strategy", "zero9"), ("strategy", ""),
    ("world_size", 0), ("world_size", -1), ("world_size", 2.0), ("world_size", True),
    ("precision", "fp4"), ("precision", "fp16"),  # fp16 needs CUDA; this machine has none
    ("batch_size", 0), ("batch_size", 7),          # 7 does not split into 2 ranks
    ("seq_len", 1), ("seq_len", 10_000),
    ("steps", 0), ("steps", "10"),
    ("lr", 0), ("lr", float("nan")), ("lr", -1.0), ("lr", "fast"),
    ("optimizer", "lion"),
    ("seed", -1), ("seed", 1.5),
    ("device", "tpu"), ("device", "cuda"),         # no CUDA here
    ("threads_per_rank", 0),
    ("grad_accum", 0), ("grad_accum", 3),          # 32 / 2 ranks does not split into 3
    ("activation_checkpointing", "yes"),
    ("inject_fault", "x:1"), ("inject_fault", "5:1"), ("inject_fault", "1:2:explode"),
    ("inject_fault", "²:3"), ("inject_fault", "1:³"),   # str.isdigit() says yes, int() no
    ("device_memory", "1e300GB"),                        # 1e300 * 1e9 overflows a float
    ("timeout", 0), ("timeout", float("inf")),
    ("warmup_steps", -1),
    ("options", {"a": 1}), ("options", (("nope", 1),)),
    ("save_state", ""),
]


@pytest.mark.parametrize("field,value", BAD_VALUES, ids=[f"{f}={v!r}" for f, v in BAD_VALUES])
def test_bad_value_names_field_value_and_allowed(field, value):
    import torch
    if field == "device" and value == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    if field == "precision" and value == "fp16" and torch.cuda.is_available():
        pytest.skip("fp16 is allowed with CUDA")
    with pytest.raises(ValueError) as err:
        check_machine(check_spec(RunSpec(**{"world_size": 2, "strategy": "ddp", field: value})))
    message = str(err.value)
    assert field in message and "allowed" in message
    if value not in ("", None) and field != "options":
        assert repr(value) in message or str(value) in message


def test_single_strategy_needs_one_rank():
    with pytest.raises(ValueError, match="world_size=2 is invalid for strategy='single'"):
        check_spec(RunSpec(strategy="single", world_size=2))


def test_launch_runs_the_strategy_checks_before_starting_anything():
    for bad in (RunSpec(strategy="zero9"), RunSpec(batch_size=7),
                RunSpec(options=(("schedule", "gpipe"),))):
        with pytest.raises(ValueError, match="is invalid"):
            launch(bad)


def test_field_checks_need_no_strategy_registry():
    """config.py stands alone: a spec is data, and its field checks import nothing else."""
    spec = RunSpec(strategy="not-yet-registered", world_size=3, batch_size=7)
    assert spec.strategy == "not-yet-registered"


def test_defaults_are_valid_and_replace_revalidates():
    spec = RunSpec()
    assert spec.replace(steps=3).steps == 3
    with pytest.raises(ValueError, match="steps"):
        spec.replace(steps=-3)


def test_launch_rejects_unknown_start_method():
    with pytest.raises(ValueError, match="start_method='fork'"):
        launch(RunSpec(strategy="single", world_size=1, steps=1), start_method="fork")


def test_every_field_is_in_exactly_one_section():
    import dataclasses
    from gpututor.config import SECTIONS
    listed = [f for fields in SECTIONS.values() for f in fields]
    assert sorted(listed) == sorted(f.name for f in dataclasses.fields(RunSpec))
    assert len(listed) == len(set(listed))
    spec = RunSpec(world_size=4, strategy="ddp", inject_fault="1:2")
    assert spec.section("how")["world_size"] == 4 and spec.section("harness")["inject_fault"] == "1:2"
    with pytest.raises(ValueError, match="section='when' is invalid: allowed values are 'what'"):
        spec.section("when")


def test_the_size_tables_vocabulary_is_a_placeholder_of_one_home():
    """GPTConfig and MLPConfig carry one placeholder vocabulary (the English corpus's); a run's
    model gets its own corpus's from models.config_of."""
    from gpututor.model_sizes import PLACEHOLDER_VOCAB, GPTConfig, MLPConfig, MoEConfig
    from gpututor.data import vocab_size
    from gpututor.models import config_of
    assert GPTConfig().vocab_size == MoEConfig().vocab_size == MLPConfig().vocab_size == \
        PLACEHOLDER_VOCAB == vocab_size("en")
    zh = RunSpec(model="mlp", world_size=1, strategy="single", corpus="zh")
    assert config_of(zh).vocab_size == vocab_size("zh") != zh.model_config.vocab_size


def test_text_forms_become_normal_forms():
    spec = RunSpec(world_size=4, strategy="ddp+tp", mesh="tp=2,dp=2", device_memory="1.5GB")
    assert spec.mesh == (("dp", 2), ("tp", 2)) and spec.device_memory == 1_500_000_000
    assert RunSpec(device_memory="512MiB").device_memory == 512 * 2**20
    for bad in ({"dp": True}, [("dp", 2, 1)], [(["dp"], 2)], {"dp": 1, "xx": 2}, "dp=2,dp=1"):
        with pytest.raises(ValueError, match="^mesh=.* is invalid: allowed is a grid such as"):
            RunSpec(world_size=2, mesh=bad)
    for bad in (True, float("nan"), "12 parsecs", "1e300GB"):
        with pytest.raises(ValueError, match="^device_memory=.* is invalid: allowed is a"):
            RunSpec(device_memory=bad)
