"""A checkpoint folder has one live owner: a second run is turned away, a restart resumes only
from its own run's checkpoints, a save becomes ``step{K}`` only when complete, and a full disk
ends the run instead of restarting into it."""
import errno
import json
import os
import re
import subprocess
import sys
import time

import pytest
import torch

from gpututor import RunSpec, launch
from gpututor.models import build_model
from gpututor.parallel import get_strategy
from gpututor.runtime.checkpoint import Checkpointer, CheckpointError, latest
from gpututor.runtime.checkpoint_files import check_folder
from gpututor.runtime.checkpoint_owner import (OWNER, DiskFull, claim_folder, release_folder,
                                               run_of_rank)
from conftest import tiny_spec


def test_a_second_run_is_refused_while_the_first_lives_and_never_resumes_from_its_saves(tmp_path):
    first = launch(tiny_spec(steps=12, checkpoint_every=2, checkpoint_dir=str(tmp_path)))
    try:   # the first run claimed the folder before its ranks started; it trains for seconds
        with pytest.raises(CheckpointError) as refused:
            launch(tiny_spec(steps=4, checkpoint_every=2, checkpoint_dir=str(tmp_path)))
        assert not first.done
    finally:
        first.wait()
    text = str(refused.value)
    assert f"checkpoint_dir={str(tmp_path)!r} is in use: run {first.run_id} (process " \
        f"{os.getpid()} on " in text
    assert "allowed is a folder no other live run writes" in text
    # The first run's last save, as if written after the second run started (a folder copied
    # in, a clock set back): a restart that went by time would resume from it, at step 12.
    later = time.time() + 3600
    os.utime(tmp_path / "step12" / ".metadata", (later, later))
    second = launch(tiny_spec(steps=4, checkpoint_every=2, checkpoint_dir=str(tmp_path),
                              inject_fault="1:3"), max_restarts=1)
    second.wait()
    assert second.failures[0]["resumed_from"] == 2     # its own step2, not step12
    for step in (2, 4):
        info = json.loads((tmp_path / f"step{step}" / "gpututor.json").read_text())
        assert info["run"] == second.run_id
    assert json.loads((tmp_path / "step12" / "gpututor.json").read_text())["run"] == first.run_id


def test_latest_ignores_another_runs_checkpoints(tmp_path):
    def checkpoint(step: int, run: str) -> None:
        folder = tmp_path / f"step{step}"
        folder.mkdir()
        (folder / "gpututor.json").write_text(json.dumps({"run": run}))
        (folder / ".metadata").write_bytes(b"")

    checkpoint(2, "ours")
    checkpoint(4, "ours")
    checkpoint(6, "theirs")
    (tmp_path / ".step8.tmp-ours").mkdir()           # a save of ours that did not finish
    assert latest(tmp_path, run="ours") == str(tmp_path / "step4")
    assert latest(tmp_path, run="theirs") == str(tmp_path / "step6")
    assert latest(tmp_path, run="nobody") is None
    assert latest(tmp_path) == str(tmp_path / "step6")   # a user's own pick: any run's


def test_a_dead_owners_folder_is_taken_over_and_a_live_ones_is_not(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        import psutil
        started = psutil.Process(other.pid).create_time()
        import socket
        owner = {"run": "theirs", "pid": other.pid, "started": started,
                 "host": socket.gethostname()}
        (tmp_path / OWNER).write_text(json.dumps(owner))
        with pytest.raises(CheckpointError, match=rf"is in use: run theirs \(process {other.pid}"):
            claim_folder(tmp_path, "ours")
        with pytest.raises(CheckpointError, match="is in use: run theirs"):
            run_of_rank(tmp_path)    # a rank of a run that does not own the folder
    finally:
        other.kill()
        other.wait()
    claim_folder(tmp_path, "ours")   # its process is gone: the file is stale
    assert json.loads((tmp_path / OWNER).read_text())["run"] == "ours"
    assert run_of_rank(tmp_path) == "ours"   # this process owns it
    release_folder(tmp_path, "ours")
    # the same pid with another start time is another process: stale too
    (tmp_path / OWNER).write_text(json.dumps({**owner, "pid": os.getpid(), "started": 1.0}))
    claim_folder(tmp_path, "ours")


def _one_process(tmp_path):
    spec = RunSpec(model_size="tiny", strategy="single", world_size=1, steps=4,
                   checkpoint_every=2, checkpoint_dir=str(tmp_path))
    model = build_model(spec)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr)
    return spec, model, optimizer, Checkpointer(spec, get_strategy("single"), 0)


def test_an_interrupted_save_leaves_no_step_folder_and_is_cleaned_up(tmp_path, monkeypatch):
    from torch.distributed.checkpoint.api import CheckpointException   # (a BaseException)
    from torch.distributed.checkpoint.filesystem import FileSystemWriter
    spec, model, optimizer, saver = _one_process(tmp_path)
    real_finish = FileSystemWriter.finish

    def interrupted(self, metadata, results):   # the data is written, .metadata is not
        raise RuntimeError("interrupted before .metadata")

    monkeypatch.setattr(FileSystemWriter, "finish", interrupted)
    with pytest.raises(CheckpointException, match="interrupted before .metadata"):
        saver.save(model, optimizer, 1)
    assert not (tmp_path / "step2").exists()
    assert not list(tmp_path.glob(".step*"))       # rank 0 removed its staging folder
    # a save whose process was killed leaves its staging folder behind
    killed = tmp_path / ".step4.tmp-20260101-000000-deadbeef"
    killed.mkdir()
    (killed / "__0_0.distcp").write_bytes(b"\0" * 1000)
    monkeypatch.setattr(FileSystemWriter, "finish", real_finish)
    saver.save(model, optimizer, 3)
    assert check_folder(tmp_path / "step4", saver.shapes)[0]["run"] == saver.run
    assert not list(tmp_path.glob(".step*"))       # the good save removed what was left


def test_a_save_never_removes_a_folder_another_rank_of_its_run_is_writing(tmp_path):
    """Each rank's DCP writer makes the staging folder as it plans, before any collective: rank 0
    removing it then raced the others (CI: rank 1's mkdir failed with FileExistsError while rank
    0 removed the folder). A rank running ahead may also be writing the next save already."""
    spec, model, optimizer, saver = _one_process(tmp_path)
    here = tmp_path / f".step2.tmp-{saver.run}"          # another rank made this save's folder
    here.mkdir()
    (here / "from_rank_1").write_text("written")
    ahead = tmp_path / f".step4.tmp-{saver.run}"         # and the next save's
    ahead.mkdir()
    saver.save(model, optimizer, 1)
    assert (tmp_path / "step2" / "from_rank_1").read_text() == "written"
    assert ahead.exists()
    # a restart of the run (a new Checkpointer as its ranks start) removes what the run left
    Checkpointer(spec, get_strategy("single"), 0)
    assert not ahead.exists()
    assert (tmp_path / "step2").exists()


def test_a_full_disk_raises_disk_full_naming_the_folder(tmp_path, monkeypatch):
    from torch.distributed.checkpoint.filesystem import FileSystemWriter
    spec, model, optimizer, saver = _one_process(tmp_path)

    def full(self, plan, planner):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(FileSystemWriter, "write_data", full)
    with pytest.raises(DiskFull, match=re.escape(
            f"checkpoint_dir={str(tmp_path)!r} is full: saving step 2's checkpoint failed (No "
            "space left on device); restarting would only fill it again, so the run stops here")):
        saver.save(model, optimizer, 1)
    assert not (tmp_path / "step2").exists() and not list(tmp_path.glob(".step*"))


SITECUSTOMIZE = """\
import errno
from torch.distributed.checkpoint.filesystem import FileSystemWriter

def full(self, plan, planner):
    raise OSError(errno.ENOSPC, "No space left on device")

FileSystemWriter.write_data = full   # every save of every rank finds the disk full
"""


def test_a_full_disk_stops_the_run_instead_of_restarting(tmp_path, monkeypatch):
    """The ranks start with spawn (not the forkserver, which imported everything already), each
    running a ``sitecustomize`` that makes DCP's writer raise ENOSPC."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(tmp_path / "site"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    folder = tmp_path / "ckpt"
    run = launch(tiny_spec(steps=4, checkpoint_every=2, checkpoint_dir=str(folder)),
                 start_method="spawn", max_restarts=2)
    with pytest.raises(Exception, match=r"DiskFull: checkpoint_dir='.*ckpt' is full: saving step "
                                        r"2's checkpoint failed \(No space left on device\)"):
        run.wait()
    assert run.attempt == 1 and len(run.failures) == 1
    assert run.failures[0]["resumed_from"] is None
    assert not list(folder.glob("step*")) and not list(folder.glob(".step*"))
