"""Checkpoints: a run resumed from one (even on another world size) continues the same curve."""
import subprocess
import sys

import pytest
import torch

from gpututor import launch
from conftest import tiny_spec


def test_resumed_run_continues_the_uninterrupted_loss_curve(tmp_path):
    full = launch(tiny_spec(steps=8, checkpoint_every=4, checkpoint_dir=str(tmp_path))).wait()
    assert (tmp_path / "step4.pt").exists() and (tmp_path / "step8.pt").exists()
    # resume the 2-rank run's step-4 checkpoint on ONE rank: same global batches, same result
    resumed = launch(tiny_spec(strategy="single", world_size=1, steps=8,
                               resume=str(tmp_path / "step4.pt"))).wait()
    assert resumed["first_step"] == 4 and resumed["steps"] == 4
    torch.testing.assert_close(torch.tensor(resumed["losses"]), torch.tensor(full["losses"][4:]),
                               rtol=1e-5, atol=1e-5)


def test_checkpoint_fields_are_validated(tmp_path):
    with pytest.raises(ValueError, match="checkpoint_dir=None is invalid"):
        tiny_spec(checkpoint_every=2)
    with pytest.raises(ValueError, match="resume='nowhere.pt' is invalid"):
        tiny_spec(resume="nowhere.pt")
    with pytest.raises(ValueError, match="checkpoint_every=-1 is invalid"):
        tiny_spec(checkpoint_every=-1, checkpoint_dir=str(tmp_path))


def test_cli_checkpoint_and_resume(tmp_path):
    common = [sys.executable, "-m", "gpututor", "run", "--model-size", "tiny", "--batch-size", "8",
              "--seq-len", "32", "--steps", "4", "--quiet"]
    first = subprocess.run(common + ["--world-size", "2", "--checkpoint-every", "2",
                                     "--checkpoint-dir", str(tmp_path)], capture_output=True,
                           text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    again = subprocess.run(common + ["--world-size", "2", "--resume", str(tmp_path / "step2.pt"),
                                     "--json", "-"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert '"first_step": 2' in again.stdout
