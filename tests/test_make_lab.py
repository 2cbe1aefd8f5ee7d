"""The README's first command, ``make lab``, serves the lessons for any user, root included
(JupyterLab stops as root without ``--allow-root``, as in most containers and GPU images)."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest
from jupyterlab_browser import isolated_jupyter_env

ROOT = Path(__file__).resolve().parent.parent


def test_make_lab_adds_allow_root_only_for_root():
    shown = subprocess.run(["make", "-n", "-o", "install", "lab"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout
    line = next(l for l in shown.splitlines() if "jupyter lab" in l)
    assert ("--allow-root" in line) == (os.geteuid() == 0), line


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_lab_serves_the_lessons(tmp_path):
    """``make lab`` in this environment (its install step taken as done) answers on its URL and
    lists lesson 00 (JupyterLab serves the lesson's folder, notebooks/); as root this is the case that used to stop at start."""
    env = isolated_jupyter_env(tmp_path)
    token = secrets.token_hex(16)
    venv = Path(sys.prefix)
    args = (f"--no-browser --ip=127.0.0.1 --ServerApp.port=0 --ServerApp.port_retries=0 "
            f"--IdentityProvider.token={token} "
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate")
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(["make", "-o", str(venv / "bin" / ".installed"), f"VENV={venv}",
                             f"LAB_ARGS={args}", "lab"], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        runtime, deadline, answer = Path(env["JUPYTER_RUNTIME_DIR"]), time.monotonic() + 90, None
        while answer is None and time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "lab.log").read_text()[-3000:]
            for info in runtime.glob("jpserver-*.json"):
                try:
                    port = json.loads(info.read_text())["port"]
                    url = f"http://127.0.0.1:{port}/api/contents?token={token}"
                    answer = json.load(urllib.request.urlopen(url, timeout=5))
                except (ValueError, KeyError, OSError):
                    pass   # written half, or not answering yet
            time.sleep(0.2)
        assert answer is not None, (tmp_path / "lab.log").read_text()[-3000:]
        assert "00_start_here.ipynb" in {item["name"] for item in answer["content"]}
        assert "URL it prints" in (tmp_path / "lab.log").read_text()   # make's own hint
    finally:
        tree = psutil.Process(proc.pid).children(recursive=True)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        psutil.wait_procs(tree, timeout=10)
        log.close()
