"""Persistent ranks: an interrupt stops the cell on every rank, a restart gives fresh ranks, and
nothing is left behind: no process, no listening socket, no temp folder, after 50 start/stop
cycles, after the kernel exits without stopping them, or after it is killed."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

import gpututor
from gpututor.runtime.ranks import CellInterrupted


def interrupt_after(seconds: float) -> threading.Timer:
    """SIGINT to this process after ``seconds``, as the kernel's interrupt button sends it."""
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def gone(pids, within: float = 30.0) -> bool:
    """Whether every pid has exited within ``within`` seconds (a ceiling for a busy machine: it
    returns as soon as they have)."""
    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:   # it exited between two reads of /proc: gone
            return False

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = [p for p in pids if running(p)]
        if not alive:
            return True
        time.sleep(0.1)
    return False


def listening(pid: int) -> list:
    try:
        return [c for c in psutil.Process(pid).net_connections("inet")
                if c.status == psutil.CONN_LISTEN]
    except psutil.NoSuchProcess:
        return []


def test_an_interrupt_stops_the_cell_on_every_rank_and_keeps_their_names(interruptible):
    with gpututor.ranks(4, timeout=60) as group:
        group.run("kept = rank")
        pids = list(group.pids)
        timer = interrupt_after(1.0)
        # CellInterrupted itself says the interrupt ended the cell: the cell's timeout (60 s)
        # would have restarted the group and returned instead
        with pytest.raises(CellInterrupted) as stopped:
            group.run("import time\ntime.sleep(60)")
        timer.join()
        result = stopped.value.result
        assert result.interrupted and not result.restarted
        assert [o.state for o in result.outcomes] == ["interrupted"] * 4
        assert all("KeyboardInterrupt" in o.error["traceback"] for o in result.outcomes)
        assert "every rank stopped the cell and kept its names" in result.message
        assert group.pids == pids
        assert [o.value for o in group.run("kept").outcomes] == ["0", "1", "2", "3"]


def test_an_interrupt_of_ranks_stuck_in_a_collective_restarts_the_group(interruptible):
    with gpututor.ranks(2, timeout=60) as group:
        group.run("lost = 1")
        timer = interrupt_after(1.0)
        with pytest.raises(CellInterrupted) as stopped:
            group.run("if rank == 0:\n    dist.barrier()\n")
        timer.join()
        result = stopped.value.result
        assert result.restarted and "ranks 0 did not stop within" in result.message
        assert "Lost: rank 0: lost; rank 1: lost" in result.message
        assert group.run("rank").ok


def test_a_restart_gives_fresh_ranks_without_the_old_names():
    with gpututor.ranks(2) as group:
        group.run("old = rank")
        pids = list(group.pids)
        group.restart()
        assert set(group.pids).isdisjoint(pids) and gone(pids)
        result = group.run("'old' in dir()")
        assert [o.value for o in result.outcomes] == ["False", "False"]
        assert group.started_s > 0


def test_fifty_starts_and_stops_leave_no_process_socket_or_temp_folder():
    me = psutil.Process()
    listening_before = {c.laddr for c in listening(me.pid)}
    children_before = {p.pid for p in me.children(recursive=True)}
    pids, folders = [], []
    for cycle in range(50):
        group = gpututor.ranks(4)
        if cycle == 0:   # while they live, every socket of every rank is on loopback
            sockets = [c for p in group.pids for c in psutil.Process(p).net_connections("inet")]
            assert sockets and all(c.laddr.ip == "127.0.0.1" for c in sockets)
        assert group.run("rank").ok
        pids += group.pids
        folders.append(group._tmp)
        group.stop()
    assert gone(pids), [p for p in pids if psutil.pid_exists(p)]
    assert not [p for p in pids if listening(p)]
    assert {c.laddr for c in listening(me.pid)} == listening_before
    assert not [f for f in folders if os.path.exists(f)]
    extra = {p.pid for p in me.children(recursive=True)} - children_before
    assert not extra & set(pids)


SCRIPT = textwrap.dedent("""
    import sys, time, gpututor
    if __name__ == "__main__":
        group = gpututor.ranks(2)
        group.run("x = rank")
        print(" ".join(map(str, group.pids)), group._tmp, flush=True)
        if sys.argv[1] == "hang":
            time.sleep(600)
""")


@pytest.mark.parametrize("how", ["exit", "killed"])
def test_a_kernel_that_exits_or_is_killed_leaves_no_rank_or_temp_folder(tmp_path, how):
    script = tmp_path / "kernel.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), "exit" if how == "exit" else "hang"],
                            stdout=subprocess.PIPE, text=True)
    try:
        *pids, folder = proc.stdout.readline().split()
        pids = [int(p) for p in pids]
        assert len(pids) == 2 and all(psutil.pid_exists(p) for p in pids)
        if how == "killed":
            proc.kill()   # no finalizer runs: each rank sees its alive pipe close and goes
        proc.wait(timeout=60)
        assert gone(pids, within=10)
        assert not os.path.exists(folder)   # removed by the kernel's finalizer, or by the ranks
    finally:
        if proc.poll() is None:
            proc.kill()


def test_in_a_jupyter_kernel_the_interrupt_button_stops_the_cell_on_every_rank():
    """A real kernel (jupyter_client, as a notebook server starts one): the interrupt signals
    the kernel's process group; the cell ends with KeyboardInterrupt, the ranks keep their
    names, and the next cell shows one HTML column per rank."""
    import jupyter_client
    km = jupyter_client.KernelManager(kernel_name="python3")
    km.start_kernel(env={**os.environ, "OMP_NUM_THREADS": "1"})
    client = km.client()
    client.start_channels()

    def run(code: str, interrupt_after_s: float | None = None, timeout: float = 240.0) -> list:
        msg_id, messages = client.execute(code), []
        deadline, interrupted = time.monotonic() + timeout, False
        while time.monotonic() < deadline:
            if interrupt_after_s is not None and not interrupted and \
                    time.monotonic() > deadline - timeout + interrupt_after_s:
                km.interrupt_kernel()
                interrupted = True
            try:
                msg = client.get_iopub_msg(timeout=0.5)
            except Exception:  # noqa: BLE001 - queue.Empty: nothing yet
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return messages
            messages.append(msg)
        raise TimeoutError(code)

    try:
        client.wait_for_ready(timeout=120)
        run("%load_ext gpututor\n%ranks start 2")
        run("%%ranks\nkept = rank * 7")
        # the KeyboardInterrupt below says the interrupt ended the cell (left alone, it would
        # have slept its 120 s and ended with no error)
        stopped = run("%%ranks\nimport time\ntime.sleep(120)", interrupt_after_s=3.0)
        errors = [m["content"]["ename"] for m in stopped if m["msg_type"] == "error"]
        assert errors == ["KeyboardInterrupt"]
        shown = [m["content"]["data"] for m in stopped if m["msg_type"] == "display_data"]
        assert shown and "KeyboardInterrupt" in shown[0]["text/html"]
        after = run("%%ranks\nkept")
        page = next(m["content"]["data"]["text/html"] for m in after
                    if m["msg_type"] == "display_data")
        assert page.count("<th") == 2 and "<pre style='margin:0'>0</pre>" in page \
            and "<pre style='margin:0'>7</pre>" in page
        run("%ranks stop")
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)
