"""Automatic restarts: ``launch(spec, max_restarts=N)``. When a rank dies, every rank of the
attempt is stopped and fresh ones resume from the last complete checkpoint this run wrote; the
run's losses are the uninterrupted run's, and its records and summary keep the failure."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from gpututor import RunFailed, RunSpec, launch
from gpututor.runtime.checkpoint import latest
from conftest import tiny_spec, wait_no_ranks

RTOL = 1e-5


def alive(pids) -> list[int]:
    return [p for p in pids if psutil.pid_exists(p) and
            psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def follow(run) -> list[set]:
    """Iterate ``run`` to its end; the pids of each attempt's ranks (the first attempt's are
    there when launch() returns; a later one's once its first record arrived)."""
    pids = [set(run.pids)]
    for record in run:
        if record["attempt"] > len(pids):
            pids.append(set(run.pids))
    return pids


@pytest.mark.parametrize("strategy", ["ddp", "zero2"])
def test_a_failed_rank_is_restarted_and_the_losses_are_the_uninterrupted_runs(strategy,
                                                                             tmp_path):
    spec = tiny_spec(strategy=strategy, steps=4, checkpoint_every=2,
                     checkpoint_dir=str(tmp_path))
    full = launch(spec).wait()   # also leaves step2 and step4 of an earlier run in the folder
    run = launch(spec.replace(inject_fault="1:3"), max_restarts=2)
    attempts = follow(run)
    summary = run.wait()
    # the earlier run's step4 is passed over: the run resumes from its own step2 (after step 1)
    assert summary["failures"] == [{"attempt": 1, "rank": 1, "step": 3, "resumed_from": 2,
                                    "error": "InjectedFault: injected fault: rank 1 raises at "
                                             "step 3"}]
    assert summary["attempts"] == 2 and run.attempt == 2   # the fault fired once
    assert summary["status"] == "finished" and summary["first_step"] == 0
    torch.testing.assert_close(torch.tensor(summary["losses"]), torch.tensor(full["losses"]),
                               rtol=RTOL, atol=0)
    # every record says its attempt: the first ran steps 0-2 (3 on rank 0, maybe), the second
    # re-ran 2-3; the summary counts each step once
    steps_of = lambda k: {r["step"] for r in run.records if r["attempt"] == k}
    assert {0, 1, 2} <= steps_of(1) <= {0, 1, 2, 3} and steps_of(2) == {2, 3}
    assert summary["steps"] == 4 and len(summary["losses"]) == 4
    # nothing of the first attempt is left: its processes, its rendezvous folder
    assert len(attempts) == 2 and not attempts[0] & attempts[1]
    assert not alive(attempts[0] | attempts[1]) and not wait_no_ranks()
    assert not os.path.exists(run._tmp)


def test_a_killed_rank_is_restarted(tmp_path):
    """A rank killed by SIGKILL (it says nothing) is named, and the run continues from the
    last complete checkpoint; a save it may have been writing is never read."""
    spec = tiny_spec(steps=10, checkpoint_every=2, checkpoint_dir=str(tmp_path / "full"))
    full = launch(spec).wait()
    run = launch(spec.replace(checkpoint_dir=str(tmp_path / "killed")), max_restarts=1)
    for record in run:
        if record["step"] >= 2 and run.attempt == 1:
            os.kill(run.pids[1], signal.SIGKILL)
            break
    summary = run.wait(timeout=120)
    failure, = summary["failures"]
    assert failure["rank"] == 1 and "exited with code -9" in failure["error"], failure
    assert failure["resumed_from"] in (2, 4, 6, 8) and failure["resumed_from"] <= failure["step"]
    torch.testing.assert_close(torch.tensor(summary["losses"]), torch.tensor(full["losses"]),
                               rtol=RTOL, atol=0)


def test_without_restarts_a_failure_ends_the_run_as_before(tmp_path):
    run = launch(tiny_spec(steps=6, checkpoint_every=2, checkpoint_dir=str(tmp_path),
                           inject_fault="1:3"))
    with pytest.raises(RunFailed, match="rank 1 failed at step 3") as err:
        run.wait(timeout=60)
    assert "InjectedFault" in err.value.rank_traceback
    assert run.summary["failures"] == [{"attempt": 1, "rank": 1, "step": 3, "resumed_from": None,
                                        "error": "InjectedFault: injected fault: rank 1 raises "
                                                 "at step 3"}]
    assert run.summary["attempts"] == 1 and not wait_no_ranks()


def test_after_the_last_restart_the_run_fails_with_the_last_failure(tmp_path):
    """A failure that comes back in every attempt (a memory cap the model cannot fit) uses up
    the restarts, then ends the run with the last failure's rank and traceback. No checkpoint
    was written: each restart starts from step 0."""
    run = launch(tiny_spec(steps=4, checkpoint_every=2, checkpoint_dir=str(tmp_path),
                           device_memory="100KB"), max_restarts=2)
    with pytest.raises(RunFailed, match="out of memory") as err:
        run.wait(timeout=120)
    assert err.value.rank_traceback
    failures = run.summary["failures"]
    assert [f["attempt"] for f in failures] == [1, 2, 3]
    assert [f["resumed_from"] for f in failures] == [0, 0, None]
    assert all("out of memory" in f["error"] for f in failures)
    assert run.summary["attempts"] == 3 and not wait_no_ranks()


@pytest.mark.parametrize("value,message", [
    (-1, r"max_restarts=-1 is invalid: allowed is an integer in \[0, 100\]"),
    (1.5, r"max_restarts=1.5 is invalid: allowed is an integer in \[0, 100\]"),
    (True, r"max_restarts=True is invalid: allowed is an integer in \[0, 100\]"),
    (101, r"max_restarts=101 is invalid: allowed is an integer in \[0, 100\]"),
])
def test_bad_max_restarts_is_refused_before_anything_starts(value, message, monkeypatch):
    import gpututor.runtime.launcher as launcher

    def no_run(*args, **kwargs):   # before anything starts: no Run is even made
        raise AssertionError("a Run was started for a bad max_restarts")

    monkeypatch.setattr(launcher, "Run", no_run)
    with pytest.raises(ValueError, match=message):
        launch(tiny_spec(steps=4), max_restarts=value)
    with pytest.raises(ValueError, match=message):
        RunSpec(max_restarts=value, checkpoint_every=2, checkpoint_dir="ckpt")
    assert not wait_no_ranks(0.1)


def test_restarts_need_checkpoints_and_training():
    with pytest.raises(ValueError, match="max_restarts=1 is invalid with checkpoint_every=0: "
                                         "allowed is 0, or restarts with checkpoint_every > 0"):
        launch(tiny_spec(steps=4), max_restarts=1)
    with pytest.raises(ValueError, match="max_restarts=2 is invalid with checkpoint_every=0"):
        RunSpec(max_restarts=2)
    spec = tiny_spec(steps=4, checkpoint_every=2, checkpoint_dir="unused")
    with pytest.raises(ValueError, match="max_restarts=1 is invalid with a task: allowed is 0"):
        launch(spec, task=lambda *args: None, max_restarts=1)
    assert launch(spec.replace(checkpoint_every=0, checkpoint_dir=None),
                  task=lambda *args: None, max_restarts=0).wait() == []


def test_latest_passes_over_unfinished_saves_and_older_runs(tmp_path):
    def checkpoint(step: int, finished: bool, written: float) -> None:
        folder = tmp_path / f"step{step}"
        folder.mkdir()
        (folder / "gpututor.json").write_text("{}")
        if finished:
            (folder / ".metadata").write_bytes(b"")
            os.utime(folder / ".metadata", (written, written))

    now = time.time()
    checkpoint(8, finished=True, written=now - 60)    # an older run's
    checkpoint(2, finished=True, written=now)
    checkpoint(4, finished=False, written=now)        # being written when a rank died
    assert latest(tmp_path) == str(tmp_path / "step8")
    assert latest(tmp_path, since=now - 1) == str(tmp_path / "step2")
    assert latest(tmp_path, since=now + 60) is None


def test_the_panel_marks_the_failure_and_the_curve_goes_on():
    """The loss plot gets a dotted line at the failed step, named with what happened; the
    curve counts each step once (the re-run replaces the lost attempt's record)."""
    from gpututor.ui.live_figure import charts_of
    from gpututor.ui.panel import build_figure, fill_figure
    rec = lambda rank, step, loss, attempt: {"rank": rank, "step": step, "loss": loss,
                                             "attempt": attempt, "tokens_per_s": 1.0}
    records = [rec(r, s, 5.0 - s, 1) for s in range(4) for r in range(2)] + \
        [rec(r, s, 5.0 - s, 2) for s in range(2, 6) for r in range(2)]
    failures = [{"attempt": 1, "rank": 1, "step": 3, "error": "InjectedFault: x",
                 "resumed_from": 2}]
    fig = build_figure(2)
    fill_figure(fig, records, 2, failures, attempts=3)
    loss = charts_of(fig)[0]
    assert loss["series"][0]["x"] == [0, 1, 2, 3, 4, 5]
    mark = loss["series"][-1]
    assert mark["name"] == "rank 1 failed at step 3; restarted from step 2 (attempt 2 of 3)"
    assert mark["x"] == [3, 3] and mark["y"] == [0.0, 5.0] and mark["dash"] == "dot"
    fill_figure(fig, records, 2, failures, attempts=3)   # redrawn: still one line per failure
    assert len(charts_of(fig)[0]["series"]) == 2


# ---- the command line, on its own and under torchrun ------------------------------------------

CLI = ["--model", "gpt", "--model-size", "tiny", "--strategy", "ddp", "--steps", "4",
       "--batch-size", "8", "--seq-len", "32", "--seed", "1", "--quiet", "--checkpoint-every", "2",
       "--inject-fault", "1:3"]


@pytest.fixture(scope="module")
def uninterrupted():
    """The losses of the run the command lines below train, without a fault."""
    return launch(tiny_spec(steps=4, seed=1)).wait()["losses"]


def test_cli_max_restarts(tmp_path, uninterrupted, capsys):
    """The command line's --max-restarts, run in this process (python -m gpututor as a process
    of its own is test_cli's; one here re-imported torch and gpututor for the same code)."""
    from gpututor.runtime.cli import main
    out = tmp_path / "out.json"
    capsys.readouterr()
    code = main(["run", *CLI, "--world-size", "2", "--max-restarts", "1",
                 "--checkpoint-dir", str(tmp_path / "ckpt"), "--json", str(out)])
    stderr = capsys.readouterr().err
    assert code == 0, stderr[-3000:]
    assert "[gpututor] rank 1 failed at step 3; restarted from step 2 (attempt 2 of 2)" in stderr
    summary = json.loads(out.read_text())
    assert summary["attempts"] == 2 and summary["failures"][0]["resumed_from"] == 2
    torch.testing.assert_close(torch.tensor(summary["losses"]), torch.tensor(uninterrupted),
                               rtol=RTOL, atol=0)


def test_torchrun_restarts_and_each_rank_resumes_by_itself(tmp_path, uninterrupted):
    """torchrun --max-restarts 1 starts the worker group again after rank 1's fault; each rank
    sees TORCHELASTIC_RESTART_COUNT=1, resumes from step2 and skips the fault. Only the last
    attempt's records reach the summary (the first attempt's died with its ranks)."""
    torchrun = Path(sys.executable).with_name("torchrun")
    out = tmp_path / "out.json"
    result = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node", "2",
                             "--max-restarts", "1", "-m", "gpututor", "run", *CLI,
                             "--checkpoint-dir", str(tmp_path / "ckpt"), "--json", str(out)],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(out.read_text())
    assert summary["first_step"] == 2 and summary["attempts"] == 2
    assert summary["failures"] == [{"attempt": 1, "rank": None, "step": None, "error": None,
                                    "resumed_from": 2}]
    torch.testing.assert_close(torch.tensor(summary["losses"]), torch.tensor(uninterrupted[2:]),
                               rtol=RTOL, atol=0)


def test_under_torchrun_restarts_are_torchruns(monkeypatch, tmp_path, capsys):
    from gpututor.runtime import cli
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert cli.main(["run", *CLI, "--max-restarts", "1", "--checkpoint-dir",
                     str(tmp_path)]) == 2
    assert "max_restarts=1 is invalid under torchrun: allowed is 0; torchrun restarts the " \
        "ranks itself: pass `torchrun --max-restarts 1 ...`" in capsys.readouterr().err
    # on several nodes, torchrun's shared store cannot keep the attempts apart
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "2")
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    with pytest.raises(ValueError, match="torchrun --max-restarts=2 is invalid on several nodes "
                                         ".*allowed is TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"):
        cli.torchrun_attempt(tiny_spec(steps=4), 2)


def test_the_run_panel_shows_the_restart(tmp_path):
    from gpututor.ui.panel import RunPanel
    spec = tiny_spec(steps=4, checkpoint_every=2, checkpoint_dir=str(tmp_path),
                     inject_fault="1:3", max_restarts=1)
    panel = RunPanel(spec)
    run = panel.run(wait=True)
    note = "rank 1 failed at step 3; restarted from step 2 (attempt 2 of 2)"
    assert run.summary["attempts"] == 2 and panel.state == "finished"
    assert note in panel.status.value
    loss, mark = [t for t in panel.fig.data if t.xaxis in (None, "x")]
    assert list(loss.x) == [0, 1, 2, 3] and mark.name == note and list(mark.x) == [3, 3]


def test_a_peer_killed_a_moment_after_its_partner_reports_the_lost_connection_is_named():
    """The partner's "connection reset" can arrive before the killed rank can be reaped: the
    launcher waits a moment (PEER_EXIT_GRACE_S) for it, only for errors naming a connection."""
    import multiprocessing as mp
    import time as clock
    from gpututor.runtime.failures import killed_peers
    ctx = mp.get_context("spawn")
    # several times: a victim reaped between two looks once left killed_peers waiting on
    # nothing for its whole grace (1 try in about 8 here; CI met it)
    for _ in range(6):
        reporter, victim = ctx.Process(target=clock.sleep, args=(30,)), \
            ctx.Process(target=clock.sleep, args=(30,))
        reporter.start(); victim.start()
        try:
            threading_kill = __import__("threading").Timer(0.3, os.kill, (victim.pid, signal.SIGKILL))
            threading_kill.start()
            lost = {"message": "Connection reset by peer", "traceback": ""}
            started, grace = clock.monotonic(), 120.0
            assert killed_peers([reporter, victim], 0, lost, set(), grace_s=grace) == [1]
            # returned on the victim's exit (0.3 s in), not at the end of its grace: an order,
            # with a grace long enough that no busy machine reaches it (5 s did, under load)
            assert clock.monotonic() - started < grace
            other = {"message": "ValueError: a bug in rank 0", "traceback": ""}
            assert killed_peers([reporter, victim], 1, other, set(), grace_s=5.0) == []
        finally:
            for p in (reporter, victim):
                p.kill(); p.join()


def test_an_async_save_in_flight_when_a_rank_raises_is_finished_before_the_rank_reports(tmp_path):
    """Rank 1 raises at the start of step 2, a moment after the asynchronous save of step 1
    (``step2``) began writing: the failing rank waits (a bounded time) for that save before it
    reports, so the save is whole and a restart resumes from it, not from the save before."""
    spec = tiny_spec(strategy="ddp", steps=4, checkpoint_every=1, checkpoint_async=True,
                     checkpoint_dir=str(tmp_path), inject_fault="1:2")
    with pytest.raises(RunFailed, match="injected fault"):
        launch(spec).wait()
    assert latest(tmp_path) == str(tmp_path / "step2")
    assert not wait_no_ranks()


def _pending_save(tmp_path, rank: int):
    """A Checkpointer on ``rank`` whose asynchronous save of step 1 (``step2``) has finished
    its own part: what a failing rank holds when it settles."""
    import threading
    from concurrent.futures import Future
    from types import SimpleNamespace

    from gpututor.runtime.checkpoint import Checkpointer
    saver = object.__new__(Checkpointer)
    saver.spec, saver.run, saver.rank = SimpleNamespace(checkpoint_dir=str(tmp_path)), "r1", rank
    future, ended = Future(), threading.Event()
    future.set_result(None)
    ended.set()
    saver.pending = (future, {"step": 1}, tmp_path / ".step2.tmp-r1", ended)
    return saver


def _commit_later(tmp_path, seconds: float):
    """Rank 0's commit, ``seconds`` from now: the folder appears whole, with its owner."""
    import threading
    staging = tmp_path / ".step2.tmp-r1"
    staging.mkdir()
    (staging / "gpututor.json").write_text(json.dumps({"run": "r1", "step": 1}))
    (staging / ".metadata").write_bytes(b"x")
    timer = threading.Timer(seconds, lambda: staging.rename(tmp_path / "step2"))
    timer.start()
    return timer


def test_a_settling_rank_waits_for_rank_0s_commit_not_only_its_own_part(tmp_path):
    """The CI failure of stop 54: rank 1's part of the save was done, rank 0 had not yet
    renamed the folder into place, and rank 1 reported (so rank 0 was stopped) before it did.
    settle now returns once the committed folder is there, and not before."""
    saver = _pending_save(tmp_path, rank=1)
    _commit_later(tmp_path, 0.5)
    began = time.monotonic()
    saver.settle(10.0)
    assert latest(tmp_path) == str(tmp_path / "step2")
    assert time.monotonic() - began < 9.0     # it returned on the commit, not at the deadline


def test_settling_ends_at_its_deadline_when_rank_0_never_commits(tmp_path):
    saver = _pending_save(tmp_path, rank=1)
    timer = _commit_later(tmp_path, 60.0)
    began = time.monotonic()
    saver.settle(0.3)
    timer.cancel()
    assert 0.3 <= time.monotonic() - began < 5.0
    assert latest(tmp_path) is None
