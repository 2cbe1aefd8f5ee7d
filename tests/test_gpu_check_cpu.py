"""``benchmarks/gpu_check.py`` as the lent GPU machine runs it: a stripped environment, packages
missing, one JSON line per section on disk as it ends, stopped by SIGTERM with nothing left
behind. Run on CPU (``--device cpu --quick``) with this environment's Python, a package blocked
by a ``sitecustomize`` so it cannot be imported, as on a machine where it is not installed.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
BLOCKER = '''import importlib.abc, sys
class _Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
sys.meta_path.insert(0, _Blocked())
'''


def start_check(tmp_path: Path, sections: str, blocked: set[str]) -> subprocess.Popen:
    """The check in a stripped environment (as ``env -i PATH=/usr/bin:/bin PYTHONPATH=$PWD``),
    with ``blocked`` packages made unimportable in it and in every process it starts."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER.format(blocked=blocked))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{site}:{ROOT}"}
    return subprocess.Popen([sys.executable, str(SCRIPT), "--device", "cpu", "--quick",
                             "--sections", sections, "--out", str(tmp_path / "out")],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def read_lines(tmp_path: Path) -> list[dict]:
    path = tmp_path / "out" / "gpu_check.jsonl"
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.endswith("}")]


def descendants(root: int) -> set[int]:
    parents = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier}
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_missing_package_is_not_run_and_named_in_the_exit(tmp_path):
    proc = start_check(tmp_path, "environment,devices,cuda_oom,lessons", {"nbformat"})
    output, _ = proc.communicate(timeout=120)
    lines = read_lines(tmp_path)
    by_section = {line["section"]: line for line in lines if "section" in line}
    assert list(by_section) == ["environment", "devices", "cuda_oom", "lessons"], output
    assert by_section["environment"]["status"] == "ok", output
    assert by_section["devices"]["status"] == "ok", by_section["devices"]   # two CPU ranks ran
    assert by_section["cuda_oom"] == {**by_section["cuda_oom"], "status": "not run",
                                      "why": "needs a CUDA device (--device cpu)"}
    assert by_section["lessons"]["status"] == "not run"
    assert "nbformat" in by_section["lessons"]["why"]
    summary = lines[-1]
    assert summary["summary"] and summary["failed"] == []
    assert summary["not_run"] == ["cuda_oom", "lessons"]
    assert proc.returncode == 3, output   # none failed, some could not run
    last = output.strip().splitlines()[-1]
    assert "could not run:" in last and "lessons" in last and "cuda_oom" in last, last


def test_sigterm_keeps_the_finished_lines_and_leaves_no_process(tmp_path):
    proc = start_check(tmp_path, "environment,single_rank,devices", set())
    deadline = time.monotonic() + 60
    while not read_lines(tmp_path) and time.monotonic() < deadline:   # environment is on disk
        time.sleep(0.1)
    assert [line["section"] for line in read_lines(tmp_path)] == ["environment"]
    while len(descendants(proc.pid)) < 2 and time.monotonic() < deadline:   # single_rank's rank
        time.sleep(0.1)
    children = descendants(proc.pid)
    assert children, "single_rank started no process"
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    lines = read_lines(tmp_path)
    statuses = {line["section"]: (line["status"], line["why"]) for line in lines
                if "section" in line}
    assert statuses == {"environment": ("ok", None),
                        "single_rank": ("not run", "stopped by SIGTERM while running"),
                        "devices": ("not run", "stopped by SIGTERM before it started")}, output
    assert lines[-1]["not_run"] == ["single_rank", "devices"]
    assert proc.returncode == 3, output
    time.sleep(0.5)
    assert not [pid for pid in children if alive(pid)], "processes outlived the check"
