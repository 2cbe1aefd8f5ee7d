"""A run's restarts (``launch(spec, max_restarts=N)``): after a failure, every rank of the attempt
is stopped and fresh ones resume from the last complete checkpoint the run wrote.

Before that, one failure is not a failure of the run: ranks whose loopback connections to each
other were refused or closed while they formed their process group, before any step. gloo's
rendezvous can lose that race on a busy machine (``Gloo connectFullMesh failed ... Connection
closed by peer``; pytorch/pytorch#53270, #57469); those ranks are started again, with a fresh
store, up to ``RENDEZVOUS_TRIES`` times, without counting as a restart."""
from __future__ import annotations

import re
import time
import traceback as tb
from multiprocessing import connection

from .checkpoint_files import next_step
from .checkpoint_owner import resume_point, stops_restarts
from ..i18n import tr
from .failures import RunFailed
from .processes import receive

RENDEZVOUS_TRIES = 3   # starts of one attempt's ranks whose connections were refused
# what gloo says when a peer's loopback connection was refused or dropped during rendezvous
_REFUSED = re.compile(r"connectFullMesh|Connection closed by peer|Connection reset by peer|"
                      r"Connection refused", re.IGNORECASE)


def peer_cause(run, open_pipes: dict, rank: int, body: dict, grace_s: float) -> tuple[int, dict]:
    """The error to report when ``rank`` reported ``body``. A connection refused or closed is a
    symptom: a peer that passed the rendezvous first and failed at once (a learner's function
    raising in its first line) closes it while this rank still connects. For up to ``grace_s``
    the other ranks' pipes are read (their lines and records kept as usual); the first error
    that is not a lost connection is the one reported, else ``body``."""
    if not _REFUSED.search(body["message"]):
        return rank, body
    deadline = time.monotonic() + grace_s
    others = {r: reader for r, reader in open_pipes.items() if r != rank}
    while others and time.monotonic() < deadline:
        for reader in connection.wait(list(others.values()), deadline - time.monotonic()):
            peer = next(r for r, p in others.items() if p is reader)
            message = receive(reader, peer)
            if message is None:
                del others[peer]
                continue
            kind, peer, peer_body = message
            if kind == "output":
                with run._cond:
                    run.output.append((peer, peer_body["stream"], peer_body["text"]))
            elif kind == "record":
                run._add({**peer_body, "attempt": run.attempt})
            elif kind == "error" and not _REFUSED.search(peer_body["message"]):
                return peer, peer_body
    return rank, body


def refused_rendezvous(run, failure: RunFailed) -> bool:
    """Whether ``failure`` is a rank's connection refused or dropped while forming the process
    group (``init_process_group`` in its traceback), before this attempt recorded any step."""
    text = f"{failure}"   # the message and the rank's traceback
    return ("init_process_group" in text and _REFUSED.search(text) is not None
            and not any(r.get("attempt") == run.attempt for r in run.records))


def retry_rendezvous(run, failure: RunFailed) -> bool:
    """If ``failure`` is a refused rendezvous (:func:`refused_rendezvous`) and tries are left,
    stop this attempt's ranks, say so in the run's output, start them again, and return True.
    Returns False where the failure is the run's to handle (a restart, or the end)."""
    tries = run.rendezvous_tries.get(run.attempt, 1)
    if tries >= RENDEZVOUS_TRIES or not refused_rendezvous(run, failure):
        return False
    with run._end_lock:
        if run.done:
            return True
        run._release_attempt()
        run.rendezvous_tries[run.attempt] = tries + 1
        with run._cond:
            run.notices.append(tr(
                "the ranks could not connect to each other ({cause}); starting them again "
                "(try {now} of {tries})", cause=failure.cause, now=tries + 1,
                tries=RENDEZVOUS_TRIES))
            run._cond.notify_all()
        try:
            run._start_ranks(run.attempt_spec)
            return True
        except Exception as exc:  # noqa: BLE001 - the run must end, and say why
            error = RunFailed(f"starting the ranks again after their connections were refused "
                              f"failed ({type(exc).__name__}: {exc}): {failure.cause}",
                              failure.rank, tb.format_exc())
    run._end("failed", error)
    return True


def restart(run, failure: RunFailed) -> "RunFailed | None":
    """For ``run`` (a :class:`~gpututor.runtime.launcher.Run`): note ``failure``; if restarts
    are left, stop every rank of this attempt and start fresh ones from the last complete
    checkpoint this run wrote (else from where the run began: ``spec.resume`` or step 0),
    without the injected fault. Returns the failure that ends the run (none left, or the
    restart itself failed), or None."""
    spec = run.spec
    note = {"attempt": run.attempt, "rank": failure.failed_rank, "step": failure.step,
            "error": failure.cause, "resumed_from": None}
    with run._end_lock:
        if run.done:        # stopped meanwhile: nothing to restart
            return None
        if run.attempt > spec.max_restarts or stops_restarts(failure):   # (a full disk)
            with run._cond:
                run.failures.append(note)
            return failure
        run._release_attempt()   # every rank of the attempt is gone before new ones start
        resume = resume_point(spec, run.run_id)
        note["resumed_from"] = next_step(resume)
        with run._cond:
            run.failures.append(note)
            run.attempt += 1
            run.status = "restarting"
            run._cond.notify_all()
        try:
            run._start_ranks(spec.replace(inject_fault=None, resume=resume))
        except Exception as exc:  # noqa: BLE001 - the run must end, and say why
            return RunFailed(f"restarting the ranks after this failure failed "
                             f"({type(exc).__name__}: {exc}): {note['error']}",
                             failure.rank, tb.format_exc())
    return None
