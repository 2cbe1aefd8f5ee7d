"""The worker's loop and the record fields it fills (runtime/worker.py, runtime/record_fields.py):
FLOPs counted once and MFU from formulas.flops_utilization, memory probed once, checkpoint
fields that no two records share, faults on their rank and step only."""
import pytest
import torch
import torch.distributed as dist

from gpututor import RunSpec
from gpututor.formulas import flops_utilization
from gpututor.runtime.record_fields import NOT_COUNTED, FlopFields, MemoryFields
from gpututor.runtime.worker import (CHECKPOINT_FIELDS, InjectedFault, checkpoint_after,
                                     init_process_group, inject_fault, train)

CPU = torch.device("cpu")


def test_flops_are_counted_once_and_mfu_is_the_models_flops_at_the_peak():
    flops = FlopFields(flops_per_token=600.0, model_cfg=None, spec=RunSpec(seq_len=16),
                       device=CPU, dp_size=1, world_size=2, peak_flops=1e4)
    # a model-parallel rank (dp 1 of world 2) does half of the batch's model FLOPs
    assert flops.fields(None, 2.0, 10) == {"flops": None, "achieved_flops": None,
                                           "model_flops": 3000.0, "mfu": 3000.0 / (2.0 * 1e4)}
    assert flops.fields(5000, 2.0, 10)["achieved_flops"] == 2500.0   # the counted step
    later = flops.fields(None, 4.0, 10)                              # kept from then on
    assert later["flops"] == 5000 and later["achieved_flops"] == 1250.0
    assert later["mfu"] == flops_utilization(3000.0, 4.0, 1e4)
    unknown_peak = FlopFields(600.0, None, RunSpec(seq_len=16), CPU, 1, 1, peak_flops=None)
    assert unknown_peak.fields(None, 1.0, 10)["mfu"] is None


def test_memory_is_probed_once_and_model_state_counted_on_the_first_steps_and_the_last():
    memory = MemoryFields(setup_peak=123, device=CPU, probe_step=2, last_step=9)
    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    assert [memory.state(step, model, optimizer) == NOT_COUNTED for step in (0, 2, 3, 8, 9)] \
        == [False, False, True, True, False]
    assert memory.fields(None) == {"mem_activations": None, "mem_peak": None,
                                   "mem_setup_peak": 123, "mem_allocator_peak": None}
    assert memory.fields((10, 20))["mem_peak"] == 20
    assert memory.fields(None)["mem_activations"] == 10   # kept from the probed step on


def test_without_checkpoints_each_record_gets_its_own_checkpoint_fields():
    ctx = type("Ctx", (), {"spec": RunSpec(steps=3)})()
    first = checkpoint_after(None, ctx, 0, None, None)
    first["checkpoint_written"].append("not in the next record")
    assert checkpoint_after(None, ctx, 1, None, None) == CHECKPOINT_FIELDS
    assert list(first) == list(CHECKPOINT_FIELDS)


def test_a_fault_fires_on_its_rank_and_step_only():
    fault = RunSpec(inject_fault="1:3").fault
    inject_fault(None, 1, 3)
    inject_fault(fault, 0, 3)
    inject_fault(fault, 1, 2)
    with pytest.raises(InjectedFault, match="rank 1 raises at step 3"):
        inject_fault(fault, 1, 3)


def test_every_record_of_a_run_carries_its_mfu_flops_and_probes(tmp_path, one_thread):
    spec = RunSpec(model_size="tiny", strategy="single", world_size=1, steps=4, batch_size=4,
                   seq_len=16, device="cpu", peak_flops=1e12)
    init_process_group(spec, 0, 1, CPU, store=dist.FileStore(str(tmp_path / "store"), 1))
    records = []
    try:
        train(spec, 0, 1, CPU, emit=records.append)
    finally:
        dist.destroy_process_group()
    assert [r["probe"] for r in records] == [False, True, True, False]   # steps 1 and 2 measure
    assert [r["flops"] is None for r in records] == [True, False, False, False]
    assert [r["mem_activations"] is None for r in records] == [True, True, False, False]
    for r in records:
        assert r["mfu"] == flops_utilization(r["model_flops"], r["step_time_s"], 1e12)
        assert r["model_flops"] > 0 and r["params"] > 0
        assert {k: r[k] for k in CHECKPOINT_FIELDS} == CHECKPOINT_FIELDS
