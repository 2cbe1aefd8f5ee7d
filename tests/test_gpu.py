"""On CUDA, where this machine has GPUs: every strategy trains like one process (CPU reference,
same seed and batches), on one GPU and on two; the device each rank uses is its own.

Skipped where CUDA is missing (this project's CI machine has none); ``benchmarks/gpu_check.sh``
is the fuller check to run on a GPU machine. Losses compare at 1e-3: CUDA kernels (TF32 matmuls
off by default in torch, but other reduction orders) round differently from the CPU's."""
from __future__ import annotations

import pytest
import torch

from conftest import reference_run, tiny_spec
from gpututor import launch
from gpututor.parallel import STRATEGIES, small_layout, small_model

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = pytest.mark.gpu


@pytest.mark.skipif(GPUS < 1, reason="needs a CUDA device")
def test_one_rank_on_one_gpu_equals_the_cpu_loop():
    spec = tiny_spec(strategy="single", world_size=1, device="cuda")
    summary = launch(spec).wait()
    assert summary["device"].startswith("cuda")
    torch.testing.assert_close(torch.tensor(summary["losses"]), torch.tensor(reference_run(spec)[0]),
                               rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name", sorted(n for n, s in STRATEGIES.items()
                                        if s.trains_as_one_process))
def test_every_strategy_on_gpus_equals_one_process(name):
    world, mesh, options = small_layout(name)
    if GPUS < world:
        pytest.skip(f"needs {world} CUDA devices, {GPUS} here")
    spec = tiny_spec(strategy=name, model=small_model(name), world_size=world, mesh=mesh,
                     options=options, device="cuda")
    run = launch(spec)
    summary = run.wait()
    torch.testing.assert_close(torch.tensor(summary["losses"]), torch.tensor(reference_run(spec)[0]),
                               rtol=1e-3, atol=1e-3)
    assert sorted({r["device"] for r in run.records}) == [f"cuda:{k}" for k in range(world)]


@pytest.mark.skipif(GPUS < 1, reason="needs a CUDA device")
def test_fp16_resumes_with_its_loss_scale(tmp_path):
    """An fp16 run resumed from a checkpoint continues the uninterrupted run's losses: the
    GradScaler's scale (halved on the first, overflowing steps) is saved with the checkpoint."""
    spec = tiny_spec(strategy="single", world_size=1, device="cuda", precision="fp16", steps=6,
                     checkpoint_every=3, checkpoint_dir=str(tmp_path))
    full = launch(spec).wait()
    resumed = launch(spec.replace(checkpoint_every=0, checkpoint_dir=None,
                                  resume=str(tmp_path / "step3"))).wait()
    assert resumed["first_step"] == 3
    torch.testing.assert_close(torch.tensor(resumed["losses"]), torch.tensor(full["losses"][3:]),
                               rtol=1e-5, atol=0)
