"""What the lent H200 found on paths a CPU machine runs differently, each tested here on CPU:

- CPU ranks on a GPU machine saw the GPU: torch's PowerSGD hook then synchronized their "cuda"
  device and failed (lessons 02 and 13). Every kind of rank on CPU now runs with
  ``CUDA_VISIBLE_DEVICES=""``: ``launch()``'s, ``%%ranks``'s, and a torchrun rank's.
- tp-dtensor's AdamW failed on CUDA, where torch's optimizers default to foreach kernels and a
  batch mixed DTensors with plain tensors. Forcing foreach on CPU gives the same failure.
- an asynchronous save's index (its future's result) had ``storage_data`` None under torch 2.11,
  where the bytes written were read from it: they are read from the files then, for a
  synchronous save too (the restarts under torchrun and a checkpoint gpu test failed there
  before their fault; a synchronous save reads its bytes from the same index).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import tiny_spec
from gpututor import RunSpec, launch, ranks
from gpututor.runtime.checkpoint_files import written_bytes


def visible_task(spec, rank, world_size, device, emit) -> None:
    emit({"step": 0, "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
          "available": torch.cuda.is_available()})


def test_launch_ranks_on_cpu_see_no_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")   # as on a GPU machine: the parent sees one
    records = launch(RunSpec(world_size=2, device="cpu", timeout=30.0), task=visible_task).wait()
    assert [r["visible"] for r in records] == ["", ""]
    assert not any(r["available"] for r in records)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"   # the notebook's own process is untouched


def test_persistent_ranks_on_cpu_see_no_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with ranks(2, device="cpu") as group:
        result = group.run("import os\nos.environ.get('CUDA_VISIBLE_DEVICES')")
    assert result.ok and [o.value for o in result.outcomes] == ["''", "''"]


def test_a_torchrun_rank_on_cpu_sees_no_gpu(tmp_path):
    script = tmp_path / "show.py"
    script.write_text(
        "import os, sys\n"
        "from gpututor.runtime import cli\n"
        "import gpututor.runtime.joining as j\n"
        "seen = {}\n"
        "real = j.init_process_group\n"
        "def spy(*a, **k):\n"
        "    seen['visible'] = os.environ.get('CUDA_VISIBLE_DEVICES')\n"
        "    return real(*a, **k)\n"
        "j.init_process_group = spy\n"
        "code = cli.main(sys.argv[1:])\n"
        "open(os.environ['OUT'] + os.environ['RANK'], 'w').write(repr(seen.get('visible')))\n"
        "sys.exit(code)\n")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0", "OUT": str(tmp_path / "seen"),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                          os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                             "--nproc-per-node", "1", str(script), "run", "--device", "cpu",
                             "--model-size", "tiny", "--steps", "1", "--batch-size", "4",
                             "--seq-len", "16", "--quiet"],
                            capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "seen0").read_text() == "''"


def foreach_task(spec, rank, world_size, device, emit) -> None:
    """tp-dtensor's model and optimizer on one CPU rank; then the same optimizer with foreach
    forced, as CUDA's default is."""
    import torch.nn.functional as F
    from gpututor import batches, build_model
    from gpututor.measure.timing import StepContext
    from gpututor.parallel import get_strategy

    strategy = get_strategy("tp-dtensor")
    ctx = StepContext(spec, rank, world_size, device)
    model = strategy.wrap(build_model(spec), ctx)
    kinds = {hasattr(p, "device_mesh") for p in model.parameters()}
    out = {"step": 0, "mixed": kinds == {True, False}}
    for foreach in (None, True):
        optimizer = strategy.make_optimizer(model, spec)
        out.setdefault("foreach_asked", [g["foreach"] for g in optimizer.param_groups])
        if foreach:
            for group in optimizer.param_groups:
                group["foreach"] = True
        x, y = next(iter(batches(spec, rank, world_size)))
        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        try:
            optimizer.step()
            out[f"foreach={foreach}"] = "stepped"
        except RuntimeError as exc:
            out[f"foreach={foreach}"] = str(exc)[:200]
        optimizer.zero_grad()
    emit(out)


def test_tp_dtensor_optimizer_steps_a_mix_of_dtensors_and_tensors_without_foreach():
    spec = tiny_spec(strategy="tp-dtensor", world_size=1)
    (record,) = launch(spec, task=foreach_task).wait()
    assert record["mixed"]                   # split Linears are DTensors, the rest plain
    assert record["foreach_asked"] == [False]   # not torch's default (None: foreach on CUDA)
    assert record["foreach=None"] == "stepped"
    assert "mixed torch.Tensor and DTensor" in record["foreach=True"]   # what CUDA's default did


def test_written_bytes_reads_the_files_when_the_save_returns_no_index(tmp_path):
    staging, folder = tmp_path / "staging", tmp_path / "step2"
    staging.mkdir()
    (staging / "__1_0.distcp").write_bytes(b"x" * 300)
    (staging / "__0_0.distcp").write_bytes(b"x" * 100)
    assert written_bytes(None, 1, staging, folder) == 300
    staging.rename(folder)                    # rank 0 committed the save meanwhile
    assert written_bytes(None, 0, staging, folder) == 100
    assert written_bytes(None, 2, staging, folder) is None


def save_without_index_task(spec, rank, world_size, device, emit) -> None:
    """Training whose saves return an index without its storage data, as the H200's torch 2.11
    did for an asynchronous save (and, by the same reading, would for a synchronous one)."""
    import torch.distributed.checkpoint as dcp

    from gpututor.runtime.worker import train
    real = dcp.save

    def save(*args, **kwargs):
        metadata = real(*args, **kwargs)
        metadata.storage_data = None
        return metadata

    dcp.save = save
    train(spec, rank, world_size, device, emit)


def test_a_synchronous_save_whose_index_has_no_storage_data_counts_the_files(tmp_path):
    spec = tiny_spec(strategy="ddp", steps=2, checkpoint_every=2, checkpoint_dir=str(tmp_path))
    records = launch(spec, task=save_without_index_task).wait()
    written = {r["rank"]: r["checkpoint_written"] for r in records if r["checkpoint_written"]}
    on_disk = {rank: sum(f.stat().st_size for f in (tmp_path / "step2").glob(f"__{rank}_*"))
               for rank in range(spec.world_size)}
    assert {rank: w[0]["bytes"] for rank, w in written.items()} == on_disk
    assert all(n > 0 for n in on_disk.values())
