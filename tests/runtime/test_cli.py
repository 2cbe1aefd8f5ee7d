"""The command line, on its own and under torchrun, writes the JSON summary of the contract."""
import json
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


def test_cli_run_writes_summary(tmp_path):
    out = tmp_path / "summary.json"
    result = gpututor("run", *ARGS, "--world-size", "2", "--json", str(out))
    assert result.returncode == 0, result.stderr
    summary = json.loads(out.read_text())
    assert CONTRACT_KEYS <= set(summary) and summary["world_size"] == 2
    assert len(summary["losses"]) == 3 and len(summary["peak_mem_bytes"]) == 2


def test_cli_bad_value_is_a_clear_error_before_start():
    result = gpututor("run", "--strategy", "ddp", "--world-size", "2", "--batch-size", "7")
    assert result.returncode == 2
    assert "batch_size=7 is invalid" in result.stderr and "allowed" in result.stderr


def test_cli_huge_device_memory_is_a_clear_error_not_a_traceback():
    result = gpututor("run", "--strategy", "ddp", "--world-size", "2", "--device-memory", "1e300GB")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "device_memory='1e300GB' is invalid" in result.stderr and "allowed" in result.stderr


def test_cli_fault_exits_nonzero_with_rank_traceback():
    result = gpututor("run", *ARGS, "--world-size", "2", "--inject-fault", "1:1")
    assert result.returncode == 1
    assert "rank 1 failed at step 1" in result.stderr and "InjectedFault" in result.stderr


def test_torchrun_runs_the_same_worker(tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    assert torchrun.exists(), f"torch installs torchrun next to its Python; none at {torchrun}"
    out_tr, out_launch = tmp_path / "torchrun.json", tmp_path / "launch.json"
    result = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node", "2",
                             "-m", "gpututor", "run", *ARGS, "--json", str(out_tr)],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert gpututor("run", *ARGS, "--world-size", "2", "--json", str(out_launch)).returncode == 0
    under_torchrun, launched = json.loads(out_tr.read_text()), json.loads(out_launch.read_text())
    assert CONTRACT_KEYS <= set(under_torchrun) and under_torchrun["world_size"] == 2
    assert under_torchrun["losses"] == pytest.approx(launched["losses"], rel=1e-6)


def test_cli_strategy_options(tmp_path):
    out = tmp_path / "dp.json"
    result = gpututor("run", *ARGS, "--world-size", "2", "--option", "bucket_cap_mb=0.25",
                      "--option", "comm_hook=bf16", "--json", str(out))
    assert result.returncode == 0, result.stderr
    assert ["comm_hook", "bf16"] in json.loads(out.read_text())["spec"]["options"]
    bad = gpututor("run", *ARGS, "--option", "comm_hook=zip")
    assert bad.returncode == 2 and "comm_hook='zip' is invalid" in bad.stderr
