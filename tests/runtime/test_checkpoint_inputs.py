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
