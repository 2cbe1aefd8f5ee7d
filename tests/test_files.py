"""Files a learner reads are written whole or not at all (gpututor.files): a failure halfway
leaves the old file as it was, and every writer of such a file in the package goes through it."""
from __future__ import annotations

import json
import os
import stat

import pytest
import torch

from conftest import tiny_spec
from gpututor import files
from gpututor.files import write_atomically, write_text_atomically

OLD = '{"final_loss": 1.0}\n'


def test_a_failure_mid_write_leaves_the_old_file_intact(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(OLD)

    def half_then_fail(f):
        f.write('{"final_loss": ')
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_atomically(path, half_then_fail)
    assert path.read_text() == OLD and os.listdir(tmp_path) == ["summary.json"]   # no temp left
    write_text_atomically(path, '{"final_loss": 2.0}\n')
    assert path.read_text() == '{"final_loss": 2.0}\n' and os.listdir(tmp_path) == ["summary.json"]


def test_permissions_are_the_old_files_or_open_w_ones(tmp_path):
    kept = tmp_path / "kept.json"
    kept.write_text(OLD)
    kept.chmod(0o640)
    write_text_atomically(kept, "{}")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    umask = os.umask(0o027)
    try:
        write_text_atomically(tmp_path / "new.json", "{}")
        with open(tmp_path / "plain.json", "w") as f:
            f.write("{}")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == \
        stat.S_IMODE((tmp_path / "plain.json").stat().st_mode) == 0o640


@pytest.fixture
def rename_fails(monkeypatch):
    """The last step of every atomic write fails, as a crash just before it would."""
    def fail(src, dst):
        raise OSError("no space left on device")
    monkeypatch.setattr(files.os, "replace", fail)


def test_the_cli_summary_is_written_atomically(tmp_path, rename_fails):
    from gpututor.runtime.cli import _write_summary
    path = tmp_path / "summary.json"
    path.write_text(OLD)
    with pytest.raises(OSError, match="no space"):
        _write_summary({"final_loss": 2.0}, str(path))
    assert path.read_text() == OLD


def test_the_planners_json_is_written_atomically(tmp_path, rename_fails):
    from gpututor.runtime.cli import main
    for extra in ([], ["--layouts", "--tiny-gpt", "tiny", "--world-size", "2", "--batch-size", "8"]):
        path = tmp_path / "plan.json"
        path.write_text(OLD)
        with pytest.raises(OSError, match="no space"):
            main(["plan", *(extra or ["--model", "70b", "--gpus", "8"]), "--json", str(path)])
        assert path.read_text() == OLD


def test_lesson_findings_are_written_atomically(tmp_path, monkeypatch, rename_fails):
    from gpututor.lessons.common import results
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"00.speedup": {"values": {"speedup": 1.5, "world_size": 2.0},
                                               "when": "then"}}))
    before = path.read_text()
    monkeypatch.setenv("GPUTUTOR_RESULTS", str(path))
    with pytest.raises(OSError, match="no space"):
        results.remember("00.speedup", speedup=1.9, world_size=2, gpus=0)
    assert path.read_text() == before


def test_a_distilled_students_weights_are_written_atomically(tmp_path, rename_fails, one_thread):
    from gpututor.compression.distill import DistillTask
    spec = tiny_spec(strategy="single", world_size=1, steps=1)
    path = tmp_path / "student.pt"
    path.write_bytes(b"old weights")
    task = DistillTask(spec, str(tmp_path / "unused.pt"), alpha=0.0, save_state=str(path))
    with pytest.raises(OSError, match="no space"):
        task(spec, 0, 1, torch.device("cpu"), emit=lambda record: None)
    assert path.read_bytes() == b"old weights"


def test_a_runs_saved_weights_are_written_atomically(tmp_path, rename_fails, one_thread):
    """``RunSpec.save_state`` (rank 0 writes the trained weights): trained here in this process,
    as rank 0 of one, so the failing rename is the one the worker calls."""
    from gpututor.runtime.worker import train
    path = tmp_path / "weights.pt"
    path.write_bytes(b"old weights")
    spec = tiny_spec(strategy="single", world_size=1, steps=1, save_state=str(path))
    with pytest.raises(OSError, match="no space"):
        train(spec, 0, 1, torch.device("cpu"), emit=lambda record: None)
    assert path.read_bytes() == b"old weights"
    assert [p.name for p in tmp_path.iterdir()] == ["weights.pt"]   # no temp file left
