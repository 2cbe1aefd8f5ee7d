"""From-scratch data parallel (naive and bucketed) equals one process, like DDP does."""
import pytest
import torch

from gpututor import launch
from conftest import reference_run, tiny_spec


@pytest.mark.parametrize("strategy,options", [
    ("dp-naive", ()),
    ("dp-bucketed", (("bucket_cap_mb", 0.25),)),   # several buckets: overlap really happens
])
def test_from_scratch_data_parallel_equals_one_process(tmp_path, strategy, options):
    spec = tiny_spec(strategy=strategy, world_size=2, steps=4,
                     options=options, save_state=str(tmp_path / "dp.pt"))
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


def test_unknown_or_bad_option_is_a_clear_error():
    with pytest.raises(ValueError, match="option 'bucket_size' is invalid for strategy='ddp'"):
        tiny_spec(options=(("bucket_size", 1),))
    with pytest.raises(ValueError, match="comm_hook='zip' is invalid: allowed is one of none"):
        tiny_spec(options=(("comm_hook", "zip"),))


def test_ddp_accumulation_with_no_sync_equals_big_batch():
    spec = tiny_spec(strategy="ddp", world_size=2, steps=3, grad_accum=2,
                     options=(("bucket_cap_mb", 0.25),))
    summary = launch(spec).wait()
    ref_losses, _ = reference_run(spec.replace(grad_accum=1))
    torch.testing.assert_close(torch.tensor(summary["losses"]), torch.tensor(ref_losses),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hook,tolerance,byte_ratio", [
    ("bf16", 2e-2, 0.5),      # bf16 keeps 8 bits of mantissa: gradients off by ~0.4 %
    ("fp16", 5e-3, 0.5),
    ("powersgd", 5e-2, None),  # rank-1 approximation of each matrix after 2 plain steps
])
def test_compression_hooks_change_losses_only_within_tolerance(hook, tolerance, byte_ratio):
    base = tiny_spec(strategy="ddp", world_size=2, steps=6)
    plain = launch(base).wait()
    compressed = launch(base.replace(options=(("comm_hook", hook),))).wait()
    torch.testing.assert_close(torch.tensor(compressed["losses"]), torch.tensor(plain["losses"]),
                               rtol=tolerance, atol=tolerance)
    ratio = compressed["comm_bytes_per_step"] / plain["comm_bytes_per_step"]
    if byte_ratio is not None:
        assert ratio == pytest.approx(byte_ratio)
    else:
        assert ratio < 0.5


def test_equivalent_link_keeps_flops_per_byte_and_flops_per_message():
    from gpututor.parallel.link import EmulatedLink, equivalent_bandwidth, equivalent_latency
    device, here = 100e12, 50e9              # a device 2000x faster than this machine
    bandwidth = equivalent_bandwidth(device, 32e9, here)
    latency = equivalent_latency(device, 10e-6, here)
    assert bandwidth == pytest.approx(16e6) and latency == pytest.approx(20e-3)
    real, emulated = EmulatedLink(32e9, 10e-6), EmulatedLink(bandwidth, latency)
    for nbytes in (4, 4e6, 4e9):      # latency-bound to bandwidth-bound: every message x2000
        assert emulated.allreduce_seconds(nbytes, 4) == pytest.approx(
            2000 * real.allreduce_seconds(nbytes, 4))


@pytest.mark.parametrize("strategy", ["ddp", "dp-naive", "dp-bucketed"])
def test_emulated_link_adds_exactly_the_modelled_delay(strategy):
    from gpututor.parallel.link import EmulatedLink
    base = tiny_spec(strategy=strategy, world_size=2, steps=4)
    fast = launch(base).wait()
    options = (("link_gbps", 0.01), ("link_latency_us", 100.0))   # 10 MB/s: slow on purpose
    slow_run = launch(base.replace(options=options))
    slow = slow_run.wait()
    torch.testing.assert_close(torch.tensor(slow["losses"]), torch.tensor(fast["losses"]))
    link = EmulatedLink(0.01e9, 100e-6)
    record = slow_run.records[-1]
    # every bucket / tensor all-reduced this step got its modelled delay, and nothing more
    assert record["emulated_comm_s"] >= link.allreduce_seconds(record["comm_bytes"], 2)
    assert record["emulated_comm_s"] <= link.allreduce_seconds(record["comm_bytes"], 2) + \
        2 * link.latency * 200
    assert slow["step_time_s"] > fast["step_time_s"] + 0.5 * link.allreduce_seconds(
        record["comm_bytes"], 2)
