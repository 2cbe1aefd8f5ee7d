"""The checkpoint writer never touches CUDA in its thread: with CUDA available, DCP's default
writer (``thread_count=1``) copies ahead on the current CUDA stream, which in an async save's
thread is GPU 0's on every rank. Checked on CPU with ``torch.cuda`` faked: available, and any
stream use an error."""
import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException

from gpututor.runtime.checkpoint import checkpoint_writer


@pytest.fixture
def cuda_that_must_not_be_touched(monkeypatch):
    touched = []

    def refuse(*args, **kwargs):
        touched.append(args)
        raise RuntimeError("the writer thread touched CUDA")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_stream", refuse)
    monkeypatch.setattr(torch.cuda, "Stream", refuse)
    return touched


def test_the_writer_reads_cpu_state_without_cuda(tmp_path, cuda_that_must_not_be_touched):
    state = {"w": torch.arange(12.0).reshape(3, 4), "b": torch.ones(5)}
    dcp.save(state, storage_writer=checkpoint_writer(tmp_path / "mine"), no_dist=True)
    assert cuda_that_must_not_be_touched == []
    back = {"w": torch.zeros(3, 4), "b": torch.zeros(5)}
    dcp.load(back, checkpoint_id=str(tmp_path / "mine"), no_dist=True)
    assert torch.equal(back["w"], state["w"]) and torch.equal(back["b"], state["b"])


def test_dcps_default_writer_would_have(tmp_path, cuda_that_must_not_be_touched):
    default = dcp.FileSystemWriter(str(tmp_path / "default"), single_file_per_rank=True,
                                   thread_count=1)
    # DCP reports a rank's failure as a CheckpointException, a BaseException, not an Exception
    with pytest.raises(CheckpointException, match="the writer thread touched CUDA"):
        dcp.save({"w": torch.ones(4)}, storage_writer=default, no_dist=True)
    assert cuda_that_must_not_be_touched        # what the fix avoids
