"""From-scratch data parallel (naive and bucketed) equals one process, like DDP does."""
import pytest
import torch

from gpututor import launch
from conftest import tiny_spec
from test_runs import reference_run


@pytest.mark.parametrize("strategy,options", [
    ("dp-naive", ()),
    ("dp-bucketed", (("bucket_cap_mb", 0.25),)),   # several buckets: overlap really happens
])
def test_from_scratch_data_parallel_equals_one_process(tmp_path, strategy, options):
    spec = tiny_spec(strategy=strategy, world_size=2, steps=4,
                     options=options + (("save_state", str(tmp_path / "dp.pt")),))
    summary = launch(spec).wait()
    ref_losses, ref_state = reference_run(spec)
    torch.testing.assert_close(torch.tensor(summary["losses"]), torch.tensor(ref_losses),
                               rtol=1e-5, atol=1e-6)
    state = torch.load(tmp_path / "dp.pt")
    for name, ref in ref_state.items():  # tolerance: see test_runs.test_ddp_two_ranks_equals...
        torch.testing.assert_close(state[name], ref, rtol=1e-5, atol=5e-5, msg=name)
    assert summary["comm_bytes_per_step"] > 0


def test_bucketed_with_accumulation_equals_big_batch(tmp_path):
    spec = tiny_spec(strategy="dp-bucketed", world_size=2, steps=3, grad_accum=2)
    summary = launch(spec).wait()
    ref_losses, _ = reference_run(spec.replace(grad_accum=1))
    torch.testing.assert_close(torch.tensor(summary["losses"]), torch.tensor(ref_losses),
                               rtol=1e-5, atol=1e-5)
