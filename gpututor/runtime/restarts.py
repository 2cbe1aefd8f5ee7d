"""A run's restarts (``launch(spec, max_restarts=N)``): after a failure, every rank of the attempt
is stopped and fresh ones resume from the last complete checkpoint the run wrote."""
from __future__ import annotations

import traceback as tb

from .checkpoint_files import next_step
from .checkpoint_owner import resume_point, stops_restarts
from .failures import RunFailed


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
