"""A per-rank memory capacity (``RunSpec.device_memory``): the guard, real runs, the CLI, CUDA.

The guard is the memory probe with a limit, so its numbers are checked against the probe's on
the same ops: with the capacity one byte under the probe's peak it must fail exactly there.
"""
import pickle
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gpututor import RunSpec, launch
from gpututor.measure.capacity import (CapacityGuard, DeviceOutOfMemory, PhaseTracker,
                                       check_setup, cuda_capacity, from_cuda_oom)
from gpututor.measure.memory import LiveBytesProbe
from gpututor.measure.timing import StepContext
from gpututor.runtime.launcher import RunFailed

ROOT = Path(__file__).resolve().parents[2]
W_BYTES = 256 * 256 * 4


# ---- the guard on a hand-made forward and backward (no ranks) ------------------------------------

def hand_step(watch, w, x):
    """Two matmuls and a ReLU, forward then backward, telling ``watch`` the phase."""
    watch.set_phase("forward")
    y = ((x @ w).relu() @ w).sum()
    watch.set_phase("backward")
    y.backward()


@pytest.fixture
def weights():
    torch.manual_seed(0)
    return torch.nn.Parameter(torch.randn(256, 256)), torch.randn(64, 256)


def probed(w, x):
    """The plain probe's view of the same step (the reference numbers)."""
    with LiveBytesProbe([w]) as probe:
        hand_step(probe, w, x)
    w.grad = None
    return probe


def test_guard_fails_exactly_at_the_probes_peak(weights):
    w, x = weights
    probe = probed(w, x)
    assert probe.baseline == W_BYTES and probe.peak > W_BYTES + probe.forward_end
    guard = CapacityGuard(probe.peak - 1, rank=1, step=7, params=[w])
    with pytest.raises(DeviceOutOfMemory) as caught:
        with guard:
            hand_step(guard, w, x)
    err = caught.value
    # the first moment the total passes peak - 1 is the moment the probe saw its peak
    assert (err.rank, err.step, err.phase) == (1, 7, "backward")
    assert err.held == probe.peak and err.capacity == probe.peak - 1
    assert err.categories == {"params": W_BYTES, "grads": 0, "optimizer": 0, "buffers": 0}
    assert err.phases == probe.at_peak
    text = str(err)
    for words in ("rank 1", "out of memory", "step 7", "(backward)",
                  f"capacity {(probe.peak - 1) / 1e6:.1f} MB", f"device_memory={probe.peak - 1}",
                  "params 0.3 MB", "activations/step tensors"):
        assert words in text, (words, text)


def test_guard_at_the_peak_passes_and_measures_like_the_probe(weights):
    w, x = weights
    probe = probed(w, x)
    with CapacityGuard(probe.peak, rank=0, step=0, params=[w]) as guard:
        hand_step(guard, w, x)
    assert (guard.peak, guard.forward_end, guard.at_peak) == \
        (probe.peak, probe.forward_end, probe.at_peak)


def test_guard_fails_in_forward(weights):
    w, x = weights
    resize = torch.UntypedStorage.resize_
    guard = CapacityGuard(W_BYTES + 1000, rank=0, step=3, params=[w])
    with pytest.raises(DeviceOutOfMemory) as caught:
        with guard:
            hand_step(guard, w, x)
    assert caught.value.phase == "forward" and caught.value.held > W_BYTES + 1000
    assert caught.value.phases["forward"] == caught.value.held - W_BYTES == 64 * 256 * 4
    assert torch.UntypedStorage.resize_ is resize   # the guard's exit put it back


def test_kept_gradients_count_until_they_are_freed(weights):
    w, x = weights
    w.grad = torch.zeros_like(w)
    with pytest.raises(DeviceOutOfMemory) as caught:   # params + kept grads do not fit at all
        with CapacityGuard(2 * W_BYTES - 1, 0, 0, params=[w], grads=[w.grad]):
            pass
    assert caught.value.categories["grads"] == W_BYTES
    guard = CapacityGuard(10 * W_BYTES, 0, 0, params=[w], grads=[w.grad])
    assert guard.baseline == 2 * W_BYTES
    with guard:
        w.grad = None        # what zero_grad(set_to_none=True) does first thing in a step
        assert guard.baseline == W_BYTES and guard.kept_grads == 0


def test_guard_follows_storage_resizes():
    with pytest.raises(DeviceOutOfMemory) as caught:
        with CapacityGuard(10_000, rank=0, step=0) as guard:
            guard.set_phase("gather")
            t = torch.empty(1000)                       # 4 000 bytes: fits
            t.untyped_storage().resize_(0)
            t.untyped_storage().resize_(20_000)         # like FSDP2 re-gathering a parameter
    assert caught.value.phase == "gather" and caught.value.held == 20_000


def test_setup_check_names_the_setup_phase():
    model = torch.nn.Linear(100, 100)                  # 40 400 bytes of parameters
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    check_setup(40_400, 0, 0, model, optimizer)        # just fits
    with pytest.raises(DeviceOutOfMemory) as caught:
        check_setup(40_000, 2, 5, model, optimizer)
    assert (caught.value.rank, caught.value.step, caught.value.phase) == (2, 5, "setup")
    assert caught.value.held == 40_400


def test_error_pickles_and_formats_like_the_example():
    err = DeviceOutOfMemory(1, 0, "backward", 51_200_000, 48_000_000, 48_000_000,
                            {"params": 10_100_000, "grads": 0, "optimizer": 0},
                            {"forward": 30_000_000, "backward": 11_100_000})
    assert str(err) == (
        "rank 1 ran out of memory at step 0 (backward): tried to hold 51.2 MB (51,200,000 "
        "bytes), capacity 48.0 MB (device_memory=48000000); held by category: params 10.1 MB, "
        "grads 0.0 MB, optimizer 0.0 MB, activations/step tensors 41.1 MB (forward 30.0, "
        "backward 11.1)")
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.phases == err.phases


# ---- CUDA, without a GPU: the fraction, the allocator call, the message ------------------------

def test_a_cuda_capacity_leaves_the_allocator_uncapped(monkeypatch):
    """A cap on the caching allocator limits reserved memory (rounded blocks, cuBLAS's 32 MiB
    workspace): caps of tens of MB would fail every strategy. The capacity is the smaller of
    the cap and the GPU, and the allocator is never capped."""
    calls = []
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device: SimpleNamespace(total_memory=80_000_000_000))
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction",
                        lambda fraction, device=None: calls.append((fraction, device)))
    device = torch.device("cuda", 1)
    assert cuda_capacity(30_000_000, device) == 30_000_000
    assert cuda_capacity(None, device) == 80_000_000_000
    assert cuda_capacity(10**12, device) == 80_000_000_000     # not smaller: the GPU's own
    assert calls == []


def test_a_capped_cuda_step_is_watched_by_the_live_tensor_guard():
    """With a cap, the CapacityGuard on every device (it raises at the cap by tensor bytes, as
    on CPU); without one, only the phase tracker on CUDA, and nothing on CPU."""
    from gpututor.runtime.worker import step_guard
    model = torch.nn.Linear(100, 100)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    capped = RunSpec(world_size=1, strategy="single", device_memory=30_000_000)
    for device in (torch.device("cuda", 0), torch.device("cpu")):
        guard = step_guard(capped, device, 30_000_000, 0, 3, model, optimizer)
        assert isinstance(guard, CapacityGuard) and guard.capacity == 30_000_000
    free = capped.replace(device_memory=None)
    assert isinstance(step_guard(free, torch.device("cuda", 0), 80e9, 0, 3, model, optimizer),
                      PhaseTracker)
    assert step_guard(free, torch.device("cpu"), None, 0, 3, model, optimizer) is None


def test_cuda_oom_becomes_device_out_of_memory(monkeypatch):
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 40_000_000)
    error = torch.cuda.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.19 "
        "GiB of which 1.5 GiB is free.\nOf the allocated memory ...")
    model = torch.nn.Linear(100, 100)
    err = from_cuda_oom(error, 3, 12, "backward", 48_000_000, torch.device("cuda", 0), model,
                        torch.optim.SGD(model.parameters(), lr=0.1), 48_000_000)
    assert isinstance(err, DeviceOutOfMemory)
    assert err.held == 40_000_000 + 20 * 2**20 and err.categories["params"] == 40_400
    text = str(err)
    for words in ("rank 3 ran out of memory at step 12 (backward)", "capacity 48.0 MB",
                  "device_memory=48000000", "CUDA said: CUDA out of memory. Tried to allocate"):
        assert words in text, (words, text)
    assert "Of the allocated" not in text   # CUDA's first line only


def test_phase_tracker_follows_the_step_context():
    ctx = StepContext(RunSpec(world_size=1, strategy="single"), 0, 1, torch.device("cpu"),
                      probe=PhaseTracker())
    with pytest.raises(ValueError):
        with ctx.phase("optimizer"):
            raise ValueError("boom")
    assert ctx.probe.phase == "optimizer"
    assert PhaseTracker().phase == "forward"


# ---- real runs ---------------------------------------------------------------------------------

def run_spec(**changes) -> RunSpec:
    base = dict(model="gpt", model_size="tiny", strategy="single", world_size=1, batch_size=8,
                seq_len=32, steps=3, timeout=20.0)
    return RunSpec(**{**base, **changes})


def test_real_run_under_and_over_the_capacity():
    free = launch(run_spec()).wait()
    peak = free["peak_mem_bytes"][0]
    with pytest.raises(RunFailed) as caught:
        launch(run_spec(device_memory=peak // 2)).wait()
    text = str(caught.value)
    assert "out of memory" in text and "rank 0" in text and "DeviceOutOfMemory" in text
    assert f"device_memory={peak // 2}" in text and f"capacity {peak // 2 / 1e6:.1f} MB" in text
    error = caught.value.error   # the rank's own error travels with its fields
    assert isinstance(error, DeviceOutOfMemory) and error.rank == 0 and error.capacity == peak // 2
    roomy = launch(run_spec(device_memory=2 * peak)).wait()
    torch.testing.assert_close(torch.tensor(roomy["losses"]), torch.tensor(free["losses"]))
    assert roomy["peak_mem_bytes"] == free["peak_mem_bytes"]   # the guard probes like the probe


def test_sharding_fits_where_one_rank_does_not():
    sizes = dict(model_size="small", steps=3)
    single_peak = launch(run_spec(**sizes)).wait()["peak_mem_bytes"][0]
    fsdp = run_spec(**sizes, strategy="fsdp", world_size=2)
    fsdp_free = launch(fsdp).wait()
    fsdp_peak = max(fsdp_free["peak_mem_bytes"])
    assert fsdp_peak < 0.8 * single_peak
    limit = (fsdp_peak + single_peak) // 2
    with pytest.raises(RunFailed, match="out of memory"):
        launch(run_spec(**sizes, device_memory=limit)).wait()
    fits = launch(fsdp.replace(device_memory=limit)).wait()
    assert fits["status"] == "finished"
    torch.testing.assert_close(torch.tensor(fits["losses"]), torch.tensor(fsdp_free["losses"]))


def test_cli_device_memory_fails_with_out_of_memory():
    result = subprocess.run(
        [sys.executable, "-m", "gpututor", "run", "--model", "gpt", "--model-size", "tiny",
         "--strategy", "single", "--world-size", "1", "--steps", "2", "--batch-size", "8",
         "--seq-len", "32", "--device-memory", "1MB", "--quiet"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 1, result.stderr
    assert "gpututor: run failed" in result.stderr and "out of memory" in result.stderr
    assert "device_memory=1000000" in result.stderr and "(setup)" in result.stderr


def test_cli_rejects_a_bad_device_memory():
    result = subprocess.run([sys.executable, "-m", "gpututor", "run", "--device-memory", "lots",
                             "--world-size", "1", "--strategy", "single"],
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 2 and "device_memory='lots' is invalid" in result.stderr


def test_cli_medium_gpt_fails_on_one_rank_and_fits_on_four_sharded():
    """The issue's check: below one rank's peak, `single` fails; fsdp and zero3 on 4 ranks fit."""
    common = ["--model", "gpt", "--model-size", "medium", "--batch-size", "8", "--seq-len",
              "32", "--steps", "2", "--quiet"]
    peak = launch(RunSpec(model="gpt", model_size="medium", strategy="single", world_size=1,
                          batch_size=8, seq_len=32, steps=2)).wait()["peak_mem_bytes"][0]
    cap = str(int(0.9 * peak))
    cli = lambda *extra: subprocess.run(
        [sys.executable, "-m", "gpututor", "run", *common, "--device-memory", cap, *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=180)
    one = cli("--strategy", "single", "--world-size", "1")
    assert one.returncode != 0 and "out of memory" in one.stderr and cap in one.stderr
    for strategy in ("fsdp", "zero3"):
        four = cli("--strategy", strategy, "--world-size", "4")
        assert four.returncode == 0, four.stderr[-2000:]
