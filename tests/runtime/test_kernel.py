"""In a real IPython kernel: interrupting a cell that waits on a run takes the ranks down."""
import time

import psutil
import pytest

import jupyter_client  # JupyterLab depends on it

SETUP = """
import signal, os
from gpututor import RunSpec, launch
watched = [signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP]
before = {s: signal.getsignal(s) for s in watched}
run = launch(RunSpec(model_size="tiny", world_size=2, batch_size=8, seq_len=32, steps=100000))
next(iter(run))
"""
CHECK = """
import psutil
print("STATUS", run.status)
print("HANDLERS_SAME", {s: signal.getsignal(s) for s in watched} == before)
"""


def _execute(client, code: str, timeout: float = 60) -> str:
    msg_id = client.execute(code, stop_on_error=False)
    out = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = client.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out.append(msg["content"]["ename"])
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return "".join(out)
    raise TimeoutError(code)


def live_descendants(proc: psutil.Process) -> list[psutil.Process]:
    alive = []
    for child in proc.children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                alive.append(child)
        except psutil.NoSuchProcess:
            pass
    return alive


def test_kernel_interrupt_stops_ranks_and_keeps_handlers():
    km = jupyter_client.KernelManager(kernel_name="python3", transport="ipc")
    km.start_kernel()
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        _execute(client, SETUP)
        kernel = psutil.Process(km.provisioner.process.pid)
        # an order, not a sleep: interrupt once the cell said it is about to wait (a fixed 1 s
        # sleep let the interrupt land before run.wait() on a busy machine)
        waiting = client.execute("print('WAITING', flush=True)\nrun.wait()", stop_on_error=False)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            msg = client.get_iopub_msg(timeout=120)
            if msg["parent_header"].get("msg_id") == waiting and msg["msg_type"] == "stream" \
                    and "WAITING" in msg["content"]["text"]:
                break
        time.sleep(0.2)   # from the print to inside wait(): microseconds
        km.interrupt_kernel()
        interrupted = time.monotonic()
        # what may stay under the kernel is multiprocessing's forkserver and resource tracker
        # polls for the ranks to be gone: 30 s is a ceiling for a busy machine, not a speed
        while len(live_descendants(kernel)) > 2 and time.monotonic() - interrupted < 30:
            time.sleep(0.05)
        remaining = live_descendants(kernel)
        assert len(remaining) <= 2, [p.cmdline() for p in remaining]
        out = _execute(client, CHECK)
        assert "STATUS stopped" in out, out
        assert "HANDLERS_SAME True" in out, out
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)


def _forkservers(kernel: psutil.Process) -> list[psutil.Process]:
    return [p for p in live_descendants(kernel) if "forkserver" in " ".join(p.cmdline())]


@pytest.mark.parametrize("warm", ["1", "0"])
def test_the_gpututor_kernel_starts_the_forkserver_before_any_cell(warm):
    """The lessons' kernel ("Python 3 (gpututor)", gpututor/runtime/kernel.py) has the ranks'
    forkserver running before the first cell, without importing torch itself; with
    GPUTUTOR_WARM_UP=0 it starts none. Either way a run then trains."""
    import os
    km = jupyter_client.KernelManager(kernel_name="gpututor", transport="ipc")
    km.start_kernel(env={**os.environ, "GPUTUTOR_WARM_UP": warm})
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        kernel = psutil.Process(km.provisioner.process.pid)
        out = _execute(client, "import sys\nprint('TORCH', 'torch' in sys.modules)")
        assert "TORCH False" in out, out
        assert len(_forkservers(kernel)) == (1 if warm == "1" else 0)
        out = _execute(client, "from gpututor import RunSpec, launch\n"
                               "run = launch(RunSpec(model_size='tiny', world_size=2, batch_size=8,"
                               " seq_len=32, steps=2))\nprint('STATUS', run.wait() and run.status)",
                       timeout=120)
        assert "STATUS finished" in out, out
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)


def test_the_installed_gpututor_kernelspec_is_the_shipped_one():
    """`make install` copies gpututor/runtime/kernelspec into this environment's share/jupyter
    (an editable install skips data-files): a stale copy would start another module."""
    import json
    from pathlib import Path

    from jupyter_client.kernelspec import KernelSpecManager
    shipped = json.loads((Path(__file__).parents[2] / "gpututor/runtime/kernelspec/kernel.json")
                         .read_text())
    installed = KernelSpecManager().get_kernel_spec("gpututor")
    assert installed.argv == shipped["argv"]
    assert installed.display_name == shipped["display_name"]
