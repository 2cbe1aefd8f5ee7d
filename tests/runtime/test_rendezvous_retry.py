"""Ranks whose loopback connections are refused while they form their process group are started
again, not reported as the run's failure (gloo's rendezvous on a busy machine:
pytorch/pytorch#53270); any other failure, and a refusal that keeps coming, still ends the run with
the rank's traceback."""
from __future__ import annotations

import io
import textwrap

import pytest

from conftest import tiny_spec, wait_no_ranks
from gpututor import RunFailed, launch
from gpututor.runtime.failures import RunFailed as Failure
from gpututor.runtime.restarts import RENDEZVOUS_TRIES, refused_rendezvous

# gloo's own words (third_party/gloo/gloo/transport/tcp/pair.cc) for the race a busy machine loses
GLOO = ("Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] "
        "no error; Connection closed by peer [127.0.0.1]:40213")


def refuse_rendezvous(tmp_path, monkeypatch, times: int, rank0_fails: bool = False) -> None:
    """Ranks started from now on (spawned: they read this environment) raise gloo's error in
    ``init_process_group`` for rank 1, the first ``times`` times any rank 1 starts; with
    ``rank0_fails`` rank 0 raises an error of its own half a second later (a peer that passed
    the rendezvous and failed at once: what closed rank 1's connection)."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import os
        import torch.distributed as dist
        _real = dist.init_process_group
        def init_process_group(backend=None, *args, rank=-1, **kwargs):
            if rank == 0 and {rank0_fails}:
                import time; time.sleep(0.5)
                raise ValueError("the learner's function failed on its first line")
            if rank == 1:
                for n in range({times}):
                    try:
                        os.close(os.open({str(tmp_path)!r} + f"/refused{{n}}",
                                         os.O_CREAT | os.O_EXCL))
                    except FileExistsError:
                        continue
                    raise RuntimeError({GLOO!r})
            return _real(backend, *args, rank=rank, **kwargs)
        dist.init_process_group = init_process_group
    """))
    monkeypatch.setenv("PYTHONPATH", str(folder))


def test_ranks_whose_rendezvous_was_refused_start_again_and_the_run_finishes(tmp_path,
                                                                             monkeypatch):
    refuse_rendezvous(tmp_path, monkeypatch, times=1)
    run = launch(tiny_spec(steps=2), start_method="spawn")
    run.echo = io.StringIO()
    summary = run.wait(timeout=120)
    assert summary["status"] == "finished" and run.failures == [] and run.attempt == 1
    assert run.rendezvous_tries == {1: 2}
    assert run.notices and "could not connect to each other" in run.notices[0], run.notices
    assert "[gpututor] the ranks could not connect" in run.echo.getvalue()
    assert {r["step"] for r in run.records} == {0, 1} and not wait_no_ranks()


def test_a_refusal_that_keeps_coming_ends_the_run_with_the_ranks_traceback(tmp_path,
                                                                           monkeypatch):
    refuse_rendezvous(tmp_path, monkeypatch, times=RENDEZVOUS_TRIES)
    run = launch(tiny_spec(steps=2), start_method="spawn")
    run.echo = io.StringIO()
    with pytest.raises(RunFailed, match="rank 1 failed at step 0") as failed:
        run.wait(timeout=180)
    assert "Connection closed by peer" in str(failed.value)
    assert "init_process_group" in failed.value.rank_traceback
    assert run.rendezvous_tries == {1: RENDEZVOUS_TRIES}
    assert len(run.notices) == RENDEZVOUS_TRIES - 1 and not wait_no_ranks()


def test_a_peers_own_error_is_reported_not_the_connection_it_closed(tmp_path, monkeypatch):
    refuse_rendezvous(tmp_path, monkeypatch, times=1, rank0_fails=True)
    run = launch(tiny_spec(steps=2), start_method="spawn")
    run.echo = io.StringIO()
    with pytest.raises(RunFailed, match="rank 0 failed at step 0: ValueError: the learner's"):
        run.wait(timeout=120)
    assert run.rendezvous_tries == {} and run.notices == [] and not wait_no_ranks()


class FakeRun:
    attempt = 2

    def __init__(self, records):
        self.records = records


def failure(message: str, traceback: str) -> Failure:
    return Failure(message, 1, traceback)


IN_RENDEZVOUS = ('  File "worker.py", line 76, in init_process_group\n'
                 '    dist.init_process_group(backend, rank=rank, ...)\n')


@pytest.mark.parametrize("message, traceback, records, retried", [
    (f"rank 1 failed at step 0: RuntimeError: {GLOO}", IN_RENDEZVOUS, [], True),
    # the same refusal once this attempt has recorded a step: a peer died mid-run
    (f"rank 1 failed at step 3: RuntimeError: {GLOO}", IN_RENDEZVOUS,
     [{"attempt": 2, "step": 2}], False),
    # an earlier attempt's records do not count
    (f"rank 1 failed at step 0: RuntimeError: {GLOO}", IN_RENDEZVOUS,
     [{"attempt": 1, "step": 2}], True),
    # another error in the rendezvous (a wrong device, a bad store): the user's to see
    ("rank 1 failed at step 0: ValueError: Invalid backend", IN_RENDEZVOUS, [], False),
    # a refused connection outside the rendezvous (a task's own socket)
    ("rank 1 failed at step 0: ConnectionRefusedError: Connection refused",
     '  File "task.py", line 3, in __call__\n', [], False),
])
def test_only_a_refused_rendezvous_before_any_step_is_retried(message, traceback, records,
                                                              retried):
    assert refused_rendezvous(FakeRun(records), failure(message, traceback)) is retried
