"""The one-GPU policy, with CUDA mocked as present: with fewer GPUs than ranks, "auto" runs every
rank on the CPU and says why; pin_device makes every run of a comparison one kind of device."""
from __future__ import annotations

import pytest
import torch

from gpututor import RunSpec


@pytest.fixture
def gpus(monkeypatch):
    def set_count(n):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
    return set_count


def test_auto_on_one_gpu_puts_one_rank_on_it_and_two_on_the_cpu(gpus):
    gpus(1)
    one = RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1)
    two = one.replace(strategy="ddp", world_size=2)
    assert one.device_choice() == ("cuda", "auto: 1 GPU(s) here, one per rank")
    device, why = two.device_choice()
    assert device == "cpu" and "fewer than the 2 ranks" in why


def test_pin_device_gives_every_run_of_a_comparison_one_kind(gpus):
    gpus(1)
    base = RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1).pin_device(2)
    assert base.device == "cpu"
    assert {base.resolved_device(), base.replace(strategy="ddp", world_size=2).resolved_device()} == {"cpu"}
    gpus(8)
    assert RunSpec(model="gpt", model_size="tiny").pin_device(8).device == "cuda"


def test_no_gpu_and_an_explicit_device_say_so(gpus):
    gpus(0)
    assert RunSpec().device_choice() == ("cpu", "auto: no GPU visible, every rank is a CPU process")
    assert RunSpec(device="cpu").device_choice() == ("cpu", "device='cpu' was asked for")


def test_a_comparison_pins_later_auto_runs_to_the_cpu_its_runs_used(gpus):
    from gpututor.ui.comparison import Comparison
    gpus(1)
    comparison = Comparison()
    two = {"model": "gpt", "model_size": "tiny", "batch_size": 8, "seq_len": 64, "precision": "fp32",
           "device": "cpu", "world_size": 2, "strategy": "ddp", "tokens_per_s": 150.0,
           "compute_s": 0.1, "comm_s": 0.01, "steps": 3, "step_time_s": 0.1, "final_loss": 2.0}
    comparison.add(two)
    solo = RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1, batch_size=8)
    assert solo.resolved_device() == "cuda"            # alone, auto would use the GPU
    assert comparison.pin(solo).device == "cpu"          # next to CPU runs: the CPU too
    assert comparison.pin(solo.replace(device="cuda")).device == "cuda"   # asked for: kept


def test_a_speedup_across_kinds_of_device_is_refused_and_said(gpus):
    from gpututor.ui.comparison import Comparison
    gpus(1)
    common = {"model": "gpt", "model_size": "tiny", "batch_size": 8, "seq_len": 64, "precision": "fp32",
              "compute_s": 0.1, "comm_s": 0.01, "steps": 3, "step_time_s": 0.1, "final_loss": 2.0}
    comparison = Comparison()
    comparison.add({**common, "device": "cuda:0", "world_size": 1, "strategy": "single", "tokens_per_s": 900.0})
    comparison.add({**common, "device": "cpu", "world_size": 2, "strategy": "ddp", "tokens_per_s": 150.0})
    assert comparison.rows()[1]["speedup"] is None
    assert "the 1-rank run ran on cuda:0, this one on cpu" in comparison.explain()
