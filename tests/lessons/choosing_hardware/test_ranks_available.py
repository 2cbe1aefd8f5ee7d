"""``ranks_available`` counts the GPUs a run may use: from ``first_gpu`` on, as the ranks take
them (``runtime/joining.rank_device``: local rank r on GPU ``first_gpu + r``). CPU only: torch's
view of the GPUs is faked."""
from __future__ import annotations

import pytest
import torch

from gpututor.config import RunSpec
from gpututor.lessons.choosing_hardware.calibrate import calibration_specs
from gpututor.lessons.choosing_hardware.machine import ranks_available


@pytest.fixture
def four_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)


@pytest.mark.parametrize("first_gpu,available", [(0, 4), (1, 3), (3, 1), (4, 0), (7, 0)])
def test_only_the_gpus_from_first_gpu_on_count(four_gpus, first_gpu, available):
    spec = RunSpec(model_size="tiny", device="cuda", world_size=1, first_gpu=first_gpu)
    assert ranks_available(spec) == available


def test_auto_on_the_gpus_from_first_gpu_on(four_gpus):
    """auto picks CUDA for 2 ranks on GPUs 2 and 3; only those 2 are the run's."""
    spec = RunSpec(model_size="tiny", device="auto", world_size=2, first_gpu=2)
    assert spec.resolved_device() == "cuda"
    assert ranks_available(spec) == 2


def test_cpu_ranks_are_not_counted_in_gpus(four_gpus):
    assert ranks_available(RunSpec(model_size="tiny", device="cpu", first_gpu=3)) >= 1 << 20


def test_calibration_skips_strategies_that_the_gpus_after_first_gpu_cannot_hold(four_gpus):
    """GPUs 3.. of 4 hold one rank: the 2-rank strategies are skipped, with the count why."""
    base = RunSpec(model_size="tiny", device="cuda", world_size=1, first_gpu=3, batch_size=8)
    runs = dict(calibration_specs(base, strategies=["ddp"], world_size=2))
    assert runs["ddp"] == "needs 2 CUDA devices, this machine has 1"
