"""Sequence parallel (Korthikanti et al. 2022) on top of Megatron TP: equal to one process, and
each rank keeps less activation memory than tensor parallel alone."""
import pytest

from gpututor import RunSpec, launch
from gpututor.parallel import check_spec
from gpututor.plan.layouts import transformer_of
from gpututor.plan.memory import activation_bytes
from conftest import assert_equals_one_process

BASE = dict(model="gpt", model_size="small", batch_size=8, seq_len=64, steps=3, timeout=60.0,
            optimizer="sgd")   # SGD: weights comparable to ~1e-6 (see test_composed)


@pytest.mark.parametrize("strategy,world,mesh", [("tp", 2, None), ("ddp+tp", 4, {"dp": 2, "tp": 2})])
def test_sequence_parallel_equals_one_process(tmp_path, strategy, world, mesh):
    spec = RunSpec(strategy=strategy, world_size=world, mesh=mesh, save_state=str(tmp_path / "w.pt"),
                   options=(("sequence_parallel", True),), **BASE)
    assert_equals_one_process(spec, launch(spec).wait())


def test_sequence_parallel_keeps_less_activation_memory_than_tp():
    runs = {sp: launch(RunSpec(strategy="tp", world_size=2, options=(("sequence_parallel", sp),),
                               **BASE)).wait() for sp in (False, True)}
    tp, sp = (runs[k]["mem_by_category"]["activations"][0] for k in (False, True))
    assert sp < tp
    # the formula's saving (the norms' inputs, 4·b·s·h·2 per layer split by tp) sits near the
    # measured one: within a factor of two (the probe also sees the gathered copies)
    shape = transformer_of(RunSpec(**BASE))
    formula = [activation_bytes(shape, 8, tp=2, sequence_parallel=flag, precision="fp32",
                                dropout=False) for flag in (False, True)]
    assert 0.5 < (tp - sp) / (formula[0] - formula[1]) < 2


def test_sequence_parallel_is_checked_before_launch():
    with pytest.raises(ValueError, match="sequence_parallel=True is invalid"):
        check_spec(RunSpec(strategy="tp", world_size=2, seq_len=63, batch_size=8,
                           options=(("sequence_parallel", True),)))
    with pytest.raises(ValueError, match="sequence_parallel=True is invalid with a pp dim"):
        check_spec(RunSpec(strategy="ddp+tp+pp", world_size=8, batch_size=8,
                           mesh={"dp": 2, "tp": 2, "pp": 2}, options=(("sequence_parallel", True),
                                                                      ("microbatches", 2))))
