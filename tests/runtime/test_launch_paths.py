"""No launch path hangs or misleads; what ranks print is seen; bad input is refused before start;
many launches leave nothing behind (issue 15, items 4-7)."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import warnings

import psutil
import pytest

from conftest import rank_processes, tiny_spec, wait_no_ranks
from gpututor import RunFailed, RunSpec, launch
from gpututor.hardware import usable_cpu_cores

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CPU = dict(device="cpu", timeout=20)


class RaisingSummary:
    def __call__(self, spec, rank, world, device, emit):
        emit({"step": 0})

    def summarize(self, spec, records, status):
        raise ZeroDivisionError("a bug in the summary")


def test_a_summary_that_raises_ends_the_run_as_failed():
    run = launch(RunSpec(world_size=2, **CPU), task=RaisingSummary())
    with pytest.raises(RunFailed, match="summarizing the run failed: ZeroDivisionError"):
        run.wait(timeout=30)
    assert run.status == "failed" and not wait_no_ranks()


def test_interrupt_while_iterating_stops_the_ranks(interruptible):
    run = launch(tiny_spec(steps=10_000))
    threading.Timer(1.0, lambda: signal.pthread_kill(threading.main_thread().ident,
                                                     signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        for _ in run:
            pass
    assert run.status == "stopped" and not wait_no_ranks()


def busy_first_step(spec, rank, world, device, emit):
    end = time.monotonic() + 3.0   # twice the watchdog's window below (1.5 s), using CPU all along
    while time.monotonic() < end:
        sum(i * i for i in range(1000))
    emit({"step": 0})


def test_a_long_first_step_that_computes_is_not_a_hang(monkeypatch):
    import gpututor.runtime.launcher as launcher
    monkeypatch.setattr(launcher, "STARTUP_GRACE_S", 0.5)
    records = launch(RunSpec(world_size=1, device="cpu", timeout=1.0), task=busy_first_step).wait(timeout=30)
    assert [r["step"] for r in records] == [0]


def test_a_hang_names_the_rank_that_stopped_its_step_and_what_it_was_doing():
    run = launch(tiny_spec(steps=20, inject_fault="1:2:hang", timeout=4.0))
    with pytest.raises(RunFailed) as err:
        run.wait(timeout=60)
    first, *rest = str(err.value).splitlines()
    assert first.startswith("rank 1 stopped answering at step 2 (in ") and "worker.py" in first
    assert "rank 0 gave up waiting for it after timeout=4.0 s" in first
    assert any(line.startswith("rank 0: ") for line in rest)         # the other rank's fate
    assert "what rank 1 was doing" in str(err.value) and "wait" in str(err.value)


def _script(tmp_path, body: str) -> subprocess.CompletedProcess:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(body))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)


def test_a_script_without_the_main_guard_is_told_how_to_fix_it(tmp_path):
    spec = 'RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1, steps=1, batch_size=2)'
    bad = _script(tmp_path, f"""
        from gpututor import RunSpec, launch
        print(launch({spec}).wait()["steps"])
        """)
    assert bad.returncode != 0
    assert 'outside `if __name__ == "__main__":`' in bad.stderr and "script.py (line 3)" in bad.stderr
    good = _script(tmp_path, f"""
        from gpututor import RunSpec, launch
        if __name__ == "__main__":
            print(launch({spec}).wait()["steps"])
        """)
    assert good.returncode == 0 and good.stdout.strip() == "1", good.stderr[-2000:]


def test_a_failed_start_removes_its_temp_folder(monkeypatch):
    import gpututor.runtime.launcher as launcher

    class Broken:
        def __init__(self, real):
            self.real = real

        def __getattr__(self, name):
            return getattr(self.real, name)

        def Process(self, *args, **kwargs):
            raise OSError("cannot start a process")

    real_context = launcher._context
    monkeypatch.setattr(launcher, "_context", lambda method: Broken(real_context(method)))
    before = set(os.listdir(tempfile.gettempdir()))
    with pytest.raises(OSError, match="cannot start"):
        launch(tiny_spec())
    made = {d for d in set(os.listdir(tempfile.gettempdir())) - before if d.startswith("gpututor-")}
    assert not made


def chatty(spec, rank, world, device, emit):
    print(f"hello from rank {rank}")
    warnings.warn(f"a warning on rank {rank}")
    if rank == 1:
        for _ in range(50_000):   # 5 MB: throttled, never blocking the rank
            print("x" * 100)
    emit({"step": 0})


def test_what_ranks_print_reaches_the_caller_prefixed_and_a_flood_is_throttled():
    run = launch(RunSpec(world_size=2, **CPU), task=chatty)
    run.echo = echoed = io.StringIO()
    # a rank blocked by its own flood would not finish: wait() raises TimeoutError after 180 s,
    # a ceiling for a busy machine (the run takes a second or two on a quiet one)
    run.wait(timeout=180)
    text = echoed.getvalue()
    assert "[rank 0] hello from rank 0" in text and "[rank 1] hello from rank 1" in text
    assert "UserWarning: a warning on rank 1" in text
    assert "output dropped" in text
    assert sum(1 for r, _, line in run.output if r == 1 and line.startswith("x")) < 5_000


def test_the_panel_shows_what_ranks_print_in_its_log_area():
    from gpututor.ui.panel import RunPanel
    panel = RunPanel(tiny_spec(steps=3))
    panel.run(wait=True)
    assert panel.log.value == ""      # these training ranks printed nothing: nothing shown
    run = launch(RunSpec(world_size=2, **CPU), task=chatty)
    run.echo = None
    run.wait(timeout=60)
    panel.show_log(run)
    assert "[rank 1] xxx" in panel.log.value and "output dropped" in panel.log.value   # the last lines


@pytest.mark.parametrize("argv,message", [
    (["--world-size", "0"], "world_size=0 is invalid"),
    (["--json", "/nonexistent-folder/out.json"], "json='/nonexistent-folder/out.json' is invalid"),
])
def test_cli_refuses_bad_input_before_anything_starts(argv, message, capsys, monkeypatch):
    import gpututor.runtime.cli as cli
    import gpututor.runtime.launcher as launcher
    started = []
    monkeypatch.setattr(launcher, "launch", lambda *a, **k: started.append(a))
    assert cli.main(["run", "--model-size", "tiny", "--steps", "1", *argv]) == 2
    assert message in capsys.readouterr().err
    assert not started and not rank_processes()   # refused before any rank started


def test_more_ranks_than_cores_is_said_before_it_runs():
    spec = RunSpec(world_size=usable_cpu_cores() + 1, **CPU)
    with pytest.warns(UserWarning, match=r"ranks will share cores"):
        launch(spec, task=lambda spec, rank, world, device, emit: emit({"step": 0})).wait(timeout=60)


def test_many_launches_leave_no_process_thread_fd_socket_or_growing_memory():
    launch(tiny_spec(steps=1)).wait()   # warm the forkserver, which lives on by design
    me = psutil.Process()
    fds, threads, rss = me.num_fds(), me.num_threads(), me.memory_info().rss
    sockets = len(me.net_connections(kind="inet"))
    for _ in range(25):   # benchmarks/bench_launch.py runs 50
        launch(tiny_spec(steps=1, world_size=2)).wait()
    assert not wait_no_ranks()
    assert me.num_fds() <= fds and len(me.net_connections(kind="inet")) <= sockets
    deadline = time.monotonic() + 5
    while me.num_threads() > threads and time.monotonic() < deadline:
        time.sleep(0.1)
    assert me.num_threads() <= threads
    grown = me.memory_info().rss - rss
    assert grown < 30e6, f"RSS grew by {grown / 1e6:.1f} MB over 25 launches"


def test_two_processes_launching_at_the_same_moment_both_succeed(tmp_path):
    script = tmp_path / "both.py"
    # both start their launch at the same moment: each, once imported, says so with a file and
    # waits (polling every millisecond) until the other has too (a fixed wall-clock moment 8 s
    # ahead waited whatever the imports took; 120 s is a ceiling for a busy machine)
    script.write_text(textwrap.dedent("""
        import os, sys, time
        from gpututor import RunSpec, launch
        if __name__ == "__main__":
            folder, me = sys.argv[1], sys.argv[2]
            open(os.path.join(folder, f"ready-{me}"), "w").close()
            deadline = time.monotonic() + 120
            while sum(n.startswith("ready-") for n in os.listdir(folder)) < 2:
                assert time.monotonic() < deadline, "the other process never got ready"
                time.sleep(0.001)
            s = launch(RunSpec(model="gpt", model_size="tiny", strategy="ddp", world_size=2,
                               steps=2, batch_size=4)).wait()
            print(s["status"], s["steps"])
        """))
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path), str(i)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
             for i in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and out.strip() == "finished 2", err[-2000:]


def interfaces(spec, rank, world, device, emit):
    emit({"step": 0, "gloo": os.environ.get("GLOO_SOCKET_IFNAME"),
          "nccl": os.environ.get("NCCL_SOCKET_IFNAME")})


def test_local_ranks_talk_over_loopback_only_with_gloo_and_nccl(monkeypatch):
    """NCCL's default skips lo and would listen on a real interface for its bootstrap: a rank
    that launch() or %ranks starts names lo for both backends, whatever the kernel had set."""
    import gpututor
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    records = launch(RunSpec(world_size=2, **CPU), task=interfaces).wait(timeout=180)
    assert {(r["gloo"], r["nccl"]) for r in records} == {("lo", "lo")}
    with gpututor.ranks(2) as group:
        shown = group.run("import os\n(os.environ['GLOO_SOCKET_IFNAME'], "
                          "os.environ['NCCL_SOCKET_IFNAME'])")
    assert [o.value for o in shown.outcomes] == ["('lo', 'lo')"] * 2
