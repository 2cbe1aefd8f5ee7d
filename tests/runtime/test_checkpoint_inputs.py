"""Bad checkpoints are refused before any rank starts, naming what is wrong; loading one never
runs code from it."""
import json
import pickle
import shutil

import pytest

from gpututor import launch
from gpututor.runtime.checkpoint import CheckpointError, latest
from gpututor.runtime.checkpoint_files import read_metadata
from conftest import tiny_spec


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One real checkpoint (ddp, 2 ranks, AdamW) after 2 steps."""
    folder = tmp_path_factory.mktemp("ckpt")
    launch(tiny_spec(steps=2, checkpoint_every=2, checkpoint_dir=str(folder))).wait()
    return folder / "step2"


def copy_of(saved, tmp_path):
    target = tmp_path / "step2"
    shutil.copytree(saved, target)
    return target


def resume(folder, **changes):
    return launch(tiny_spec(steps=4, resume=str(folder), **changes))


def test_a_file_saved_by_torch_save_is_not_read(tmp_path):
    old = tmp_path / "step2.pt"
    old.write_bytes(b"not read")
    with pytest.raises(ValueError, match="resume=.*step2.pt' is invalid.*existing checkpoint folder"):
        resume(old)


def test_a_folder_that_gpututor_did_not_write_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="has no gpututor.json: allowed is a folder gpututor"):
        resume(tmp_path)
    (tmp_path / "gpututor.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(CheckpointError, match="format='other'; allowed is 'gpututor-dcp-1'"):
        resume(tmp_path)
    (tmp_path / "gpututor.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="gpututor.json is not JSON"):
        resume(tmp_path)


def test_a_save_that_did_not_finish_is_refused_and_never_the_latest(saved, tmp_path):
    partial = copy_of(saved, tmp_path)
    (partial / ".metadata").unlink()    # DCP writes it last: without it, the save did not end
    with pytest.raises(CheckpointError, match="has no .metadata: the save did not finish"):
        resume(partial)
    assert latest(tmp_path) is None
    shutil.copytree(saved, tmp_path / "step1")
    assert latest(tmp_path) == str(tmp_path / "step1")


def test_another_models_checkpoint_names_the_parameter_and_both_shapes(saved):
    with pytest.raises(CheckpointError, match=r"parameter 'tok_emb.weight' has shape \(\d+, 96\) "
                                              r"there and \(\d+, 128\) in this model"):
        resume(saved, model_size="small")
    with pytest.raises(CheckpointError, match="it has no parameter 'fc1.weight'|no parameter"):
        resume(saved, model="mlp", model_size="small")


def test_another_optimizers_state_is_named(saved):
    with pytest.raises(CheckpointError, match="optim/momentum_buffer/.*it saved 'adamw'"):
        resume(saved, optimizer="sgd")


def test_a_truncated_data_file_is_refused_before_training(saved, tmp_path):
    broken = copy_of(saved, tmp_path)
    data = broken / "__0_0.distcp"
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match=r"data file '__0_0.distcp' holds 1000 bytes, its "
                                              r"index says \d+"):
        resume(broken)


def test_corrupt_bytes_inside_a_data_file_fail_the_load_naming_the_checkpoint(saved, tmp_path):
    broken = copy_of(saved, tmp_path)
    data = broken / "__1_0.distcp"
    raw = bytearray(data.read_bytes())
    raw[:64] = b"\0" * 64           # same length: only reading it finds the damage
    data.write_bytes(bytes(raw))
    with pytest.raises(Exception, match=r"rank 0 failed at step 0: CheckpointError: resume=.* "
                                        r"is invalid: reading it failed \(UnpicklingError"):
        resume(broken, strategy="single", world_size=1).wait()


class _RunsCode:
    def __reduce__(self):
        import os
        return (os.system, ("touch PWNED",))


def test_a_metadata_file_that_would_run_code_is_refused(saved, tmp_path):
    evil = copy_of(saved, tmp_path)
    marker = tmp_path / "PWNED"
    (evil / ".metadata").write_bytes(pickle.dumps(_RunsCode()))
    with pytest.raises(CheckpointError, match=r"\.metadata asks for (posix|os)\.system.*never "
                                              "runs code"):
        read_metadata(evil)
    with pytest.raises(CheckpointError, match="never runs code"):
        resume(evil)
    assert not marker.exists() and not (evil / "PWNED").exists()


def test_an_index_that_points_outside_the_folder_is_refused(saved, tmp_path):
    moved = copy_of(saved, tmp_path)
    metadata = read_metadata(moved)
    first = next(iter(metadata.storage_data))
    metadata.storage_data[first].relative_path = "../elsewhere.distcp"
    (moved / ".metadata").write_bytes(pickle.dumps(metadata))
    with pytest.raises(CheckpointError, match=r"names data file '\.\./elsewhere\.distcp', "
                                              "outside the folder"):
        resume(moved)


def _build(target: bytes, state: bytes) -> bytes:
    """A pickle (protocol 2) that pushes ``target``, then ``state``, then BUILD: the state is
    set on the target. ``state`` pushes ``(None, {NAME: None})``: pickle's slot state, set with
    setattr."""
    return b"\x80\x02" + target + state + b"b."


def _name_none(name: str) -> bytes:   # (None, {name: None})
    return b"N}X" + len(name).to_bytes(4, "little") + name.encode() + b"Ns\x86"


def test_a_metadata_that_sets_class_attributes_is_refused_and_changes_nothing(tmp_path):
    """A 40-byte .metadata that sets PurePosixPath.__truediv__ (an allowed class) would break
    every later `Path(...) / name` in the process."""
    from pathlib import Path, PurePosixPath
    (tmp_path / ".metadata").write_bytes(
        _build(b"cpathlib\nPurePosixPath\n", _name_none("__truediv__")))
    try:
        with pytest.raises(CheckpointError, match=r"\.metadata sets attributes of the class "
                                                  r"pathlib\.PurePosixPath \(pickle's BUILD"):
            read_metadata(tmp_path)
        assert "__truediv__" not in PurePosixPath.__dict__
        assert Path("/tmp") / "x" == Path("/tmp/x")
    finally:   # what the unguarded reader did, undone for the tests that follow
        if "__truediv__" in PurePosixPath.__dict__:
            del PurePosixPath.__truediv__


def test_a_metadata_that_sets_a_dunder_attribute_of_a_record_is_refused(tmp_path):
    record = b"ctorch.distributed.checkpoint.filesystem\n_StorageInfo\n)\x81"   # NEWOBJ
    (tmp_path / ".metadata").write_bytes(_build(record, _name_none("__reduce_ex__")))
    with pytest.raises(CheckpointError, match=r"sets attribute '__reduce_ex__' of a "
                                              "_StorageInfo: allowed are DCP's record fields"):
        read_metadata(tmp_path)


def test_a_metadata_with_a_transform_descriptor_is_refused(saved, tmp_path):
    """FileSystemReader would run the named stream transform (zstd decompression) over the
    bytes before torch.load: gpututor writes none, and reads none."""
    packed = copy_of(saved, tmp_path)
    metadata = read_metadata(packed)
    first = next(iter(metadata.storage_data.values()))
    first.transform_descriptors = ["stream.zstd/1"]
    (packed / ".metadata").write_bytes(pickle.dumps(metadata))
    with pytest.raises(CheckpointError, match=r"data in '__\d_0.distcp' is stored through "
                                              r"transforms \['stream.zstd/1'\]; allowed are "
                                              "plain tensors"):
        resume(packed)


def test_the_load_planner_never_unpickles_bytes(tmp_path, monkeypatch):
    """DCP's LoadPlanner.load_bytes calls torch.load(weights_only=False): code would run."""
    import io
    import torch
    from torch.distributed.checkpoint.metadata import MetadataIndex
    from torch.distributed.checkpoint.planner import LoadItemType, ReadItem
    from gpututor.runtime.checkpoint import _planners
    monkeypatch.chdir(tmp_path)
    payload = io.BytesIO()
    torch.save(_RunsCode(), payload)
    payload.seek(0)
    item = ReadItem(type=LoadItemType.BYTE_IO, dest_index=MetadataIndex("extra"),
                    dest_offsets=torch.Size([0]), storage_index=MetadataIndex("extra"),
                    storage_offsets=torch.Size([0]), lengths=torch.Size([0]))
    planner = _planners()[1]()
    planner.set_up_planner({}, None)
    with pytest.raises(CheckpointError, match="entry 'extra' is not a tensor: a gpututor "
                                              "checkpoint holds tensors only"):
        planner.load_bytes(item, payload)
    assert not (tmp_path / "PWNED").exists()


def test_a_load_reads_the_index_once_and_dcp_uses_that_copy(saved, monkeypatch):
    """One read per rank: the index check_folder checked is the one DCP plans the load by."""
    from gpututor.parallel import get_strategy
    from gpututor.runtime import checkpoint_files
    from gpututor.runtime.checkpoint import Checkpointer
    from gpututor.models import build_model
    import torch
    reads, real = [], checkpoint_files._Unpickler.load

    def counted(self):
        reads.append(1)
        return real(self)

    monkeypatch.setattr(checkpoint_files._Unpickler, "load", counted)
    spec = tiny_spec(strategy="single", world_size=1, resume=str(saved))
    model = build_model(spec)
    assert Checkpointer(spec, get_strategy("single"), 0).load(
        model, torch.optim.AdamW(model.parameters(), lr=spec.lr)) == 2
    assert len(reads) == 1
