"""The collective benchmark: nccl-tests' bus-bandwidth factors and the CLI's JSON rows."""
import json
import subprocess
import sys

import pytest

from gpututor.formulas import bus_factor


@pytest.mark.parametrize("op,n,factor", [
    ("all_reduce", 2, 1.0), ("all_reduce", 4, 1.5), ("all_reduce", 8, 1.75),
    ("all_gather", 4, 0.75), ("reduce_scatter", 8, 0.875), ("broadcast", 4, 1.0),
])
def test_bus_factor_matches_nccl_tests(op, n, factor):
    assert bus_factor(op, n) == pytest.approx(factor)


def test_cli_bench_comm_writes_rows(tmp_path):
    out = tmp_path / "comm.json"
    result = subprocess.run([sys.executable, "-m", "gpututor", "bench", "comm", "--world-size",
                             "2", "--max-bytes", "65536", "--iters", "2", "--json", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = json.loads(out.read_text())["rows"]
    assert {r["op"] for r in rows} == {"all_reduce", "all_gather", "reduce_scatter", "broadcast"}
    for row in rows:
        assert {"op", "bytes", "time_s", "algbw", "busbw"} <= set(row)
        assert row["time_s"] > 0
        assert row["algbw"] == pytest.approx(row["bytes"] / row["time_s"])
        assert row["busbw"] == pytest.approx(row["algbw"] * bus_factor(row["op"], 2))


def test_cli_bench_comm_rejects_unknown_op():
    result = subprocess.run([sys.executable, "-m", "gpututor", "bench", "comm", "--ops", "gossip"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "gossip" in result.stderr and "allowed" in result.stderr
