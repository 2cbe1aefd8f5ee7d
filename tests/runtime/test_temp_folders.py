"""Every temp folder a run or a rank group makes is removed on every path, a kernel's that was
killed included: its ranks remove it, or the next launch sweeps it (issue 40, item 4)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import psutil
import pytest

from conftest import tiny_spec, wait_no_ranks
from gpututor import RunFailed, launch
from gpututor.runtime import scratch_dirs
from gpututor.runtime.scratch_dirs import MARKER, new_scratch_dir, sweep_stale_dirs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KERNEL = textwrap.dedent("""
    import multiprocessing.util, os, sys, time
    from gpututor import launch
    from gpututor.config import RunSpec
    if __name__ == "__main__":
        run = launch(RunSpec(model="gpt", model_size="tiny", strategy="ddp", world_size=2,
                             batch_size=8, seq_len=32, steps=100_000, timeout=20.0))
        next(iter(run))                       # the ranks are training
        print(multiprocessing.util.get_temp_dir(), run._tmp, *run.pids,
              flush=True)
        time.sleep(600)                       # until the test kills this "kernel"
    """)


@pytest.fixture
def kernel(tmp_path):
    """A kernel-like process (its own session) that launches a run: yields it, the run's temp
    folder, the ranks' pids and multiprocessing's own folder once the run trains; that last one is
    removed afterwards whatever the test did."""
    script = tmp_path / "kernel.py"
    script.write_text(KERNEL)
    proc = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    pymp = None
    try:
        pymp, folder, *ranks = proc.stdout.readline().split()
        assert os.path.isdir(folder) and len(ranks) == 2
        yield proc, folder, [int(pid) for pid in ranks], pymp
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        if pymp is not None:
            shutil.rmtree(pymp, ignore_errors=True)


def gone(pids) -> bool:
    return not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids)


def test_a_kernel_killed_with_its_ranks_leaves_its_folder_and_the_next_launch_sweeps_it(kernel):
    kernel, folder, ranks, mp_folder = kernel
    os.killpg(kernel.pid, signal.SIGKILL)   # the kernel, its forkserver and its ranks at once
    kernel.wait()
    assert os.path.isdir(folder)                 # nobody was left to remove it
    # multiprocessing's own folder (the forkserver's socket) is a marked gpututor-mp-* folder
    # (warm.adopt_multiprocessing_temp_dir), not a /tmp/pymp-* that nothing would sweep
    # (where the temp folder is too deep for its socket's path, multiprocessing keeps pymp-*)
    adopted = len(os.path.join(os.path.dirname(folder), "gpututor-mp-12345678",
                               "listener-12345678")) < 104
    assert os.path.basename(mp_folder).startswith("gpututor-mp-" if adopted else "pymp-")
    assert os.path.isdir(mp_folder)
    launch(tiny_spec(strategy="single", world_size=1, steps=1)).wait()
    assert not os.path.exists(folder) and adopted != os.path.exists(mp_folder)
    assert not [d for d in os.listdir(os.path.dirname(folder)) if d.startswith("gpututor-")
                and owner_pid(os.path.join(os.path.dirname(folder), d)) == kernel.pid]


def test_a_kernel_killed_alone_has_its_folder_removed_by_its_ranks(kernel):
    kernel, folder, ranks, _ = kernel
    os.kill(kernel.pid, signal.SIGKILL)      # the kernel only: its ranks see their pipe close
    kernel.wait()
    # The ranks notice at once and remove the folder within ~2 s; 30 s is for a busy machine.
    deadline = time.monotonic() + 30
    while (os.path.exists(folder) or not gone(ranks)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(folder) and gone(ranks)


def owner_pid(folder: str) -> int | None:
    try:
        with open(os.path.join(folder, MARKER)) as f:
            return json.load(f)["pid"]
    except (OSError, ValueError, KeyError):
        return None


def test_finished_failed_and_stopped_runs_remove_their_folders():
    finished = launch(tiny_spec(strategy="single", world_size=1, steps=1))
    finished.wait()
    failed = launch(tiny_spec(steps=5, inject_fault="1:1"))
    with pytest.raises(RunFailed):
        failed.wait()
    stopped = launch(tiny_spec(steps=10_000))
    next(iter(stopped))
    stopped.stop()
    for run in (finished, failed, stopped):
        assert not os.path.exists(run._tmp), run.status
    assert not wait_no_ranks()


def marked(folder, pid: int, started: float) -> str:
    os.makedirs(folder)
    with open(os.path.join(folder, MARKER), "w") as f:
        json.dump({"pid": pid, "started": started}, f)
    return str(folder)


def dead_process() -> tuple[int, float]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = psutil.Process(proc.pid).create_time()
    proc.kill(), proc.wait()
    return proc.pid, started


def test_the_sweep_removes_only_this_users_folders_whose_owner_is_dead(tmp_path, monkeypatch):
    me = psutil.Process()
    dead = marked(tmp_path / "gpututor-dead", *dead_process())
    reused = marked(tmp_path / "gpututor-reused", me.pid, me.create_time() - 100)   # pid reused
    live = marked(tmp_path / "gpututor-live", me.pid, me.create_time())
    unmarked = tmp_path / "gpututor-being-made"
    unmarked.mkdir()
    other_name = marked(tmp_path / "not-ours", *dead_process())
    target = marked(tmp_path / "elsewhere" / "gpututor-x", *dead_process())
    link = tmp_path / "gpututor-link"
    link.symlink_to(target)
    # another user's folders are never touched: here, all of them look like another user's
    uid = os.getuid()
    monkeypatch.setattr(scratch_dirs.os, "getuid", lambda: uid + 1)
    assert sweep_stale_dirs(str(tmp_path)) == [] and os.path.isdir(dead)
    monkeypatch.undo()
    assert sorted(sweep_stale_dirs(str(tmp_path))) == sorted([dead, reused])
    assert not os.path.exists(dead) and not os.path.exists(reused)
    for kept in (live, unmarked, other_name, target, link):
        assert os.path.exists(kept), kept


def test_a_new_folder_names_its_owner_and_a_rank_group_start_sweeps(tmp_path):
    import tempfile
    import gpututor
    stale = marked(os.path.join(tempfile.gettempdir(), f"gpututor-ranks-stale{os.getpid()}"),
                   *dead_process())
    group = gpututor.ranks(1)
    try:
        assert not os.path.exists(stale)
        assert owner_pid(group._tmp) == os.getpid()
    finally:
        group.stop()
    assert not os.path.exists(group._tmp)
    folder = new_scratch_dir()
    try:
        with open(os.path.join(folder, MARKER)) as f:
            owner = json.load(f)
        assert owner == {"pid": os.getpid(), "started": psutil.Process().create_time()}
    finally:
        os.remove(os.path.join(folder, MARKER)), os.rmdir(folder)


START_A_PROCESS = textwrap.dedent("""
    import multiprocessing.util, os
    from gpututor.runtime import warm
    if __name__ == "__main__":
        proc = warm.context().Process(target=os.getpid)   # through the forkserver
        proc.start(); proc.join()
        print(proc.exitcode, multiprocessing.util.get_temp_dir())
    """)


@pytest.mark.parametrize("deep", [False, True])
def test_the_forkserver_starts_whatever_the_depth_of_the_temp_folder(tmp_path, deep):
    """The forkserver's socket lives in multiprocessing's temp folder and a Unix socket's path
    has at most 104-108 bytes: in a deep TMPDIR (pytest's own, macOS's /var/folders/...) the
    marked gpututor-mp-* folder would not fit ("AF_UNIX path too long", seen under xdist), so
    multiprocessing keeps its shorter pymp-* there. The deep folder is 70 characters: too deep
    for gpututor-mp-*/listener-* (109), not for pymp-*/listener-* (102)."""
    root = tempfile.mkdtemp(prefix="gt-", dir="/tmp")   # short, whatever pytest's tmp_path is
    try:
        tmp = os.path.join(root, "d" * (70 - len(root) - 1)) if deep else root
        os.makedirs(tmp, exist_ok=True)
        assert not deep or len(tmp) == 70
        script = tmp_path / "start.py"
        script.write_text(START_A_PROCESS)
        done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                              text=True, env={**os.environ, "TMPDIR": tmp}, timeout=240)
        assert done.returncode == 0, done.stderr
        exitcode, folder = done.stdout.split()
        assert exitcode == "0"
        assert os.path.basename(folder).startswith("pymp-" if deep else "gpututor-mp-")
        assert not any(n.startswith("gpututor-mp-") for n in os.listdir(tmp))   # removed at exit
    finally:
        shutil.rmtree(root, ignore_errors=True)
