"""Records travel on one pipe per rank (issue 40, item 3): a Run holds no named semaphore, a
finished Run holds nothing, and a rank killed in the middle of a message fails the run, naming
the rank, instead of hanging the collector."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

import psutil
import pytest

from conftest import tiny_spec, wait_no_ranks
from gpututor import RunFailed, RunSpec, launch


def open_semaphores() -> int:
    """The named POSIX semaphores (``/dev/shm/sem.*``) this process has open: each one is mapped
    (glibc maps the file it made before linking it to the name, so maps shows that file)."""
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if "/dev/shm/sem." in line)


def test_runs_kept_alive_hold_no_semaphore_pipe_process_or_thread():
    # A displayed panel keeps its Run alive: a lesson of many runs must not pile up semaphores
    # (the SimpleQueue each Run held made two: "leaked semaphore objects" at kernel exit).
    spec = tiny_spec(strategy="single", world_size=1, steps=1)
    launch(spec).wait()   # warm the forkserver, which lives on by design
    me = psutil.Process()
    semaphores, fds = open_semaphores(), me.num_fds()
    runs = []
    for _ in range(20):
        run = launch(spec)
        run.wait()
        runs.append(run)   # kept, as panels keep theirs
    assert all(r.status == "finished" for r in runs)
    assert open_semaphores() == semaphores
    assert me.num_fds() <= fds, "finished runs still hold pipes or process handles"
    assert not any(r._procs or r._readers or r._controls or r._collector.is_alive()
                   for r in runs)
    assert not wait_no_ranks()


BIG = 64_000_000   # bytes: a pipe holds 64 KiB, so this message takes many writes


def killed_while_sending(spec, rank, world, device, emit):
    """Rank 1 sends one long record and is killed (SIGKILL) once part of it is in the pipe."""
    if rank == 1:
        main = threading.main_thread().ident

        def kill_mid_message():
            while True:
                frame = sys._current_frames().get(main)
                # multiprocessing's Connection._send: the header went out, the body is going
                if frame is not None and frame.f_code.co_name == "_send" and \
                        frame.f_locals.get("remaining", 0) > 1_000_000:
                    os.kill(os.getpid(), signal.SIGKILL)
                time.sleep(0.0005)

        threading.Thread(target=kill_mid_message, daemon=True).start()
        emit({"step": 0, "blob": b"x" * BIG})
        time.sleep(600)   # never reached: killed above
    emit({"step": 0})


def test_a_rank_killed_while_writing_a_long_message_fails_the_run_naming_it():
    run = launch(RunSpec(world_size=2, device="cpu", timeout=20), task=killed_while_sending)
    try:
        # Detecting a hang is the point: the collector used to block for good on the rest of
        # the message. 120 s is far beyond what this takes (a few seconds) on a busy machine.
        with pytest.raises(RunFailed) as err:
            run.wait(timeout=120)
    finally:
        run.stop()
    assert str(err.value).startswith("rank 1 failed at step 0"), str(err.value)[:500]
    assert "rank 1 exited with code -9" in str(err.value)
    assert err.value.rank == 1 and run.status == "failed"
    assert not any(r.get("blob") for r in run.records)   # nothing half-read was taken as a record
    assert not wait_no_ranks()


def test_a_run_lets_go_of_its_handles_only_after_no_one_can_reach_them(monkeypatch):
    # CI once read a rank's pid from run._procs the moment the collector closed its handle
    # ("ValueError: process object is closed"): the run hands its lists over first, then closes
    # them, and its pids stay readable after the ranks are released.
    import gpututor.runtime.launcher as launcher_module
    seen, real_release = [], launcher_module.release_ranks

    def release(procs):
        seen.append((list(run._procs), list(run._readers), list(run._controls), len(procs)))
        real_release(procs)

    monkeypatch.setattr(launcher_module, "release_ranks", release)
    run = launch(tiny_spec(strategy="ddp", world_size=2, steps=1))
    run.wait()
    run._collector.join(30)
    assert seen == [([], [], [], 2)]
    assert len(run.pids) == 2 and all(isinstance(p, int) for p in run.pids)
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                   for p in run.pids)
