"""The lessons' kernel shuts down cleanly (issue 40): live ranks, runs, the forkserver and the
resource tracker are stopped first, so the kernel exits by itself with code 0, its ``atexit``
work runs, and it leaves no process or temp folder behind. Also: the forkserver is not used on
the Python versions whose forkserver listens on a socket any local user can reach."""
import os
import signal
import sys
import threading
import time
import types

import jupyter_client  # JupyterLab depends on it
import psutil
import pytest

from gpututor.runtime import live, warm

from test_kernel import _execute, live_descendants

CELL = """
import atexit, multiprocessing.util, pathlib
import gpututor
from gpututor import RunSpec, launch
atexit.register(pathlib.Path({marker!r}).write_text, "ran")
group = gpututor.ranks(2)
run = launch(RunSpec(model_size="tiny", world_size=2, batch_size=8, seq_len=32, steps=100000))
next(iter(run))
print("FOLDERS", group._tmp, run._tmp, multiprocessing.util.get_temp_dir())
"""


def test_a_graceful_shutdown_stops_ranks_runs_and_the_forkserver_and_exits_0(tmp_path):
    """A cell starts a %ranks group and a run that is still training; ``shutdown_kernel(now=False)``
    (what JupyterLab's "Shut Down Kernel" sends) must end the kernel by itself. Before, the
    resource tracker ignored ipykernel's SIGTERM, and jupyter_client's SIGTERM ended the kernel
    (exit -15): no atexit work ran and the temp folders stayed."""
    marker = tmp_path / "atexit-ran"
    km = jupyter_client.KernelManager(kernel_name="gpututor", transport="ipc")
    # the kernel's temp folders go to this test's own folder: only they are looked at below
    km.start_kernel(env={**os.environ, "TMPDIR": str(tmp_path), "GPUTUTOR_WARM_UP": "1"})
    client = km.client()
    client.start_channels()
    process = km.provisioner.process
    kernel = psutil.Process(process.pid)
    try:
        client.wait_for_ready(timeout=60)
        out = _execute(client, CELL.format(marker=str(marker)), timeout=180)
        assert "FOLDERS" in out, out
        folders = out.split("FOLDERS", 1)[1].split()[:3]
        assert all(os.path.isdir(f) and f.startswith(str(tmp_path)) for f in folders), folders
        children = live_descendants(kernel)
        assert len(children) >= 4, [p.cmdline() for p in children]  # ranks, forkserver, tracker
        started = time.monotonic()
        km.shutdown_kernel(now=False)
        took = time.monotonic() - started
    finally:
        client.stop_channels()
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    print(f"graceful shutdown took {took:.2f} s, exit code {process.returncode}")
    assert process.returncode == 0, f"exit code {process.returncode} after {took:.2f} s"
    left = [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, [(p.pid, p.cmdline()) for p in left]
    assert marker.read_text() == "ran"
    assert [f for f in folders if os.path.exists(f)] == []
    assert not list(tmp_path.glob("pymp-*")) and not list(tmp_path.glob("gpututor-*"))


class _Stoppable:
    def __init__(self, log: list, fail: bool = False):
        self.log, self.fail = log, fail

    def stop(self) -> None:
        self.log.append(self)
        if self.fail:
            raise RuntimeError("this one cannot stop")


def test_stop_all_stops_every_live_object_even_after_one_fails():
    log: list = []
    first, failing, last = _Stoppable(log), _Stoppable(log, fail=True), _Stoppable(log)
    for obj in (first, failing, last):
        live.register(obj)
    failed = live.stop_all()
    assert log == [first, failing, last]
    assert [type(e) for e in failed] == [RuntimeError]
    assert live.stop_all() == [] and log == [first, failing, last]  # each is stopped once


def test_the_registry_holds_its_objects_weakly():
    import gc
    log: list = []
    live.register(_Stoppable(log))
    gc.collect()
    live.stop_all()
    assert log == []


def _multiprocessing_helpers(monkeypatch, server, tracker) -> list:
    """Put ``server`` and ``tracker`` in multiprocessing's place; return the signals sent."""
    monkeypatch.setitem(sys.modules, "multiprocessing.forkserver",
                        types.SimpleNamespace(_forkserver=server))
    monkeypatch.setitem(sys.modules, "multiprocessing.resource_tracker",
                        types.SimpleNamespace(_resource_tracker=tracker))
    sent = []
    monkeypatch.setattr(warm, "_signal", lambda pid, signum: sent.append((pid, signum)))
    return sent


def test_stopping_the_forkserver_does_nothing_where_multiprocessing_has_no_stop(monkeypatch):
    """``_stop()`` is private to multiprocessing: a Python without it keeps its helpers (and the
    kernel exits as it did before), and nothing is signalled."""
    sent = _multiprocessing_helpers(monkeypatch, types.SimpleNamespace(_forkserver_pid=4241),
                                    types.SimpleNamespace(_pid=4242))
    warm.stop_forkserver(timeout=0.1)
    assert sent == []


class _Helper:
    """A forkserver or tracker whose ``_stop()`` returns only once its process is killed."""

    def __init__(self, pid: int, exits: bool):
        self._forkserver_pid = self._pid = pid
        self.stopped, self.killed = threading.Event(), threading.Event()
        if exits:
            self.killed.set()

    def _stop(self) -> None:
        self.killed.wait()
        self.stopped.set()


def test_a_helper_that_does_not_exit_when_asked_is_killed(monkeypatch):
    """The forkserver is terminated, then reaped; the tracker is asked (its pipe closed) and,
    as it does not exit within the timeout here, killed. Both are reaped in the end."""
    server, tracker = _Helper(4241, exits=True), _Helper(4242, exits=False)
    sent = _multiprocessing_helpers(monkeypatch, server, tracker)
    monkeypatch.setattr(warm, "_signal", lambda pid, signum: sent.append((pid, signum)) or
                        (tracker.killed.set() if signum == signal.SIGKILL else None))
    warm.stop_forkserver(timeout=0.2)
    assert sent == [(4241, signal.SIGTERM), (4242, signal.SIGKILL)]
    assert server.stopped.is_set() and tracker.stopped.is_set()


@pytest.mark.parametrize("version, safe", [((3, 10, 0), False), ((3, 10, 8), False),
                                           ((3, 10, 9), True), ((3, 11, 0), True),
                                           ((3, 12, 1), True)])
def test_the_forkserver_is_refused_where_any_local_user_can_reach_it(monkeypatch, version, safe):
    """CPython 3.10.0-3.10.8's forkserver listens on an abstract Unix socket that any local user
    can connect to and send it a pickle (CVE-2022-42919): there gpututor starts its ranks with
    spawn, and says so, and ``import gpututor`` starts no forkserver."""
    monkeypatch.setattr(sys, "version_info", (*version, "final", 0))
    monkeypatch.setattr(warm, "_warned", False)
    started = []
    monkeypatch.setattr(warm, "start_in_background", lambda: started.append("forkserver"))
    monkeypatch.setattr(warm, "in_kernel", lambda: True)
    monkeypatch.setenv("GPUTUTOR_WARM_UP", "1")
    if safe:
        assert warm.context("forkserver").get_start_method() == "forkserver"
        assert warm.warm_up_in_kernel() and len(started) == 1
        return
    with pytest.warns(RuntimeWarning, match="CVE-2022-42919") as caught:
        assert warm.context("forkserver").get_start_method() == "spawn"
        assert warm.context("forkserver").get_start_method() == "spawn"
    assert len(caught) == 1   # one warning, not one per run
    assert not warm.warm_up_in_kernel() and started == []
    import multiprocessing.forkserver
    before = multiprocessing.forkserver._forkserver._forkserver_pid
    warm.start_forkserver()   # nothing to warm up: no forkserver is started either
    assert multiprocessing.forkserver._forkserver._forkserver_pid == before
    assert warm.context("spawn").get_start_method() == "spawn"
