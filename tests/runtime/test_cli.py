"""The command line, on its own and under torchrun, writes the JSON summary of the contract."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ARGS = ["--model", "gpt", "--model-size", "tiny", "--strategy", "ddp", "--steps", "3",
        "--batch-size", "8", "--seq-len", "32", "--seed", "1", "--quiet"]
CONTRACT_KEYS = {"strategy", "world_size", "steps", "tokens_per_s", "step_time_s", "losses",
                 "final_loss", "peak_mem_bytes", "compute_s", "comm_s"}


def gpututor(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "gpututor", *args], capture_output=True,
                          text=True, timeout=timeout)


def in_process(capsys, *args) -> subprocess.CompletedProcess:
    """``gpututor.runtime.cli.main`` on ``args`` in this process, as ``gpututor`` returns it: the
    same code as ``python -m gpututor`` (gpututor/__main__.py calls it), which the run below
    starts as its own process; a process per case cost an import of torch, seconds on 2 cores."""
    from gpututor.runtime.cli import main
    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as exit:   # argparse's refusals exit, as they do in a process of its own
        code = exit.code
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)


@pytest.fixture(scope="session")
def launched(tmp_path_factory):
    """``python -m gpututor run`` on 2 ranks, once a session: what it returned and its JSON
    summary (the summary test and the torchrun comparison read the same run). With
    pytest-xdist the two tests may run on two workers: the first to take the lock runs it, the
    other waits for it and reads what it left in the session's temporary folder."""
    import fcntl
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    out, done = root / "cli-launched.json", root / "cli-launched.result"
    with open(root / "cli-launched.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            result = gpututor("run", *ARGS, "--world-size", "2", "--json", str(out))
            done.with_suffix(".part").write_text(json.dumps([result.returncode, result.stderr]))
            done.with_suffix(".part").rename(done)
    code, stderr = json.loads(done.read_text())
    return subprocess.CompletedProcess(ARGS, code, "", stderr), out


def test_cli_run_writes_summary(launched):
    result, out = launched
    assert result.returncode == 0, result.stderr
    summary = json.loads(out.read_text())
    assert CONTRACT_KEYS <= set(summary) and summary["world_size"] == 2
    assert len(summary["losses"]) == 3 and len(summary["peak_mem_bytes"]) == 2


def test_cli_bad_value_is_a_clear_error_before_start(capsys):
    result = in_process(capsys, "run", "--strategy", "ddp", "--world-size", "2",
                        "--batch-size", "7")
    assert result.returncode == 2
    assert "batch_size=7 is invalid" in result.stderr and "allowed" in result.stderr


def test_cli_huge_device_memory_is_a_clear_error_not_a_traceback(capsys):
    result = in_process(capsys, "run", "--strategy", "ddp", "--world-size", "2",
                        "--device-memory", "1e300GB")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "device_memory='1e300GB' is invalid" in result.stderr and "allowed" in result.stderr


def test_cli_fault_exits_nonzero_with_rank_traceback(capsys):
    result = in_process(capsys, "run", *ARGS, "--world-size", "2", "--inject-fault", "1:1")
    assert result.returncode == 1
    assert "rank 1 failed at step 1" in result.stderr and "InjectedFault" in result.stderr


def test_torchrun_runs_the_same_worker(tmp_path, launched):
    torchrun = Path(sys.executable).with_name("torchrun")
    assert torchrun.exists(), f"torch installs torchrun next to its Python; none at {torchrun}"
    out_tr, (result_launch, out_launch) = tmp_path / "torchrun.json", launched
    result = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node", "2",
                             "-m", "gpututor", "run", *ARGS, "--json", str(out_tr)],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result_launch.returncode == 0, result_launch.stderr[-3000:]
    under_torchrun, launched = json.loads(out_tr.read_text()), json.loads(out_launch.read_text())
    assert CONTRACT_KEYS <= set(under_torchrun) and under_torchrun["world_size"] == 2
    assert under_torchrun["losses"] == pytest.approx(launched["losses"], rel=1e-6)


def test_cli_strategy_options(tmp_path, capsys):
    out = tmp_path / "dp.json"
    result = in_process(capsys, "run", *ARGS, "--world-size", "2",
                        "--option", "bucket_cap_mb=0.25", "--option", "comm_hook=bf16",
                        "--json", str(out))
    assert result.returncode == 0, result.stderr
    assert ["comm_hook", "bf16"] in json.loads(out.read_text())["spec"]["options"]
    bad = in_process(capsys, "run", *ARGS, "--option", "comm_hook=zip")
    assert bad.returncode == 2 and "comm_hook='zip' is invalid" in bad.stderr
