"""Lesson 00's independent pair starts both runs behind one barrier, and times only the steady
steps that ran while both trained: neither run trains alone for part of its time."""
import threading
import time

import pytest

from conftest import tiny_spec
from gpututor.lessons.start_here.pair import run_pair, wait_at_barrier, while_both_trained
from gpututor.runtime.launcher import launch


def test_neither_passes_the_barrier_before_the_other_is_ready(tmp_path):
    names, passed = ("0", "1"), {}
    early = threading.Thread(target=lambda: passed.update(
        early=wait_at_barrier(str(tmp_path), "0", names, timeout_s=5)))
    early.start()
    time.sleep(0.3)                      # the second one is late
    passed["late"] = wait_at_barrier(str(tmp_path), "1", names, timeout_s=5)
    early.join()
    assert passed["early"]["passed_at"] >= passed["late"]["ready_at"]
    assert passed["early"]["passed_at"] - passed["early"]["ready_at"] >= 0.3
    with pytest.raises(TimeoutError, match="not ready: 2"):
        wait_at_barrier(str(tmp_path), "0", ("0", "2"), timeout_s=0.1)


def summary(*ends, step=0.1, began=None):
    return {"batch_size": 4, "seq_len": 10, "tokens_per_s": 123.0,
            "began_at": ends[0] - step if began is None else began, "ended_at": ends[-1],
            "steady": [{"step": k, "ended_at": e, "step_time_s": step} for k, e in enumerate(ends)]}


def test_only_the_steps_that_ran_while_both_trained_count():
    first, second = while_both_trained([summary(1.0, 2.0, 3.0, began=0.5),
                                        summary(1.5, 2.5, 3.5, 4.5, step=0.2, began=0.8)])
    # the first's step ending at 1.0 began (0.9) after the second's first step (0.8): it counts
    assert first["steps_together"] == 3 and first["tokens_per_s"] == pytest.approx(400.0)
    # the second's steps that ended after the first had ended (3.0) ran alone: left out
    assert second["steps_together"] == 2 and second["tokens_per_s"] == pytest.approx(200.0)
    assert second["step_time_s"] == pytest.approx(0.2)
    # a step that began before the other run's first step had begun ran alone too
    late = while_both_trained([summary(1.0, 2.0, 3.0, began=0.5), summary(2.5, 3.0, began=1.5)])
    assert late[0]["steps_together"] == 2 and late[1]["steps_together"] == 2   # not the one at 1.0
    alone = while_both_trained([summary(1.0), summary(2.0)])[1]
    assert alone["steps_together"] == 0 and alone["tokens_per_s"] is None
    assert alone["step_time_s"] is None
    none = while_both_trained([summary(1.0), {**summary(2.0), "began_at": None}])
    assert [s["tokens_per_s"] for s in none] == [None, None]


def test_a_late_run_holds_the_first_one_back():
    """Two real 1-rank runs, the second launched a second later: the first trains only once the
    second is ready, and every step timed started after both had passed the barrier."""
    half = tiny_spec(strategy="single", world_size=1, batch_size=4, steps=60)

    def late_second(spec, task):
        if task.name == "1":
            time.sleep(1.0)
        return launch(spec, task=task)

    first, second = run_pair([half, half.replace(seed=1)], late_second)
    assert first["passed_at"] >= second["ready_at"] >= first["ready_at"] + 0.9
    for run in (first, second):
        assert run["steady"] and run["status"] == "finished"
        assert min(s["ended_at"] - s["step_time_s"] for s in run["steady"]) >= \
            max(first["passed_at"], second["passed_at"]) - 0.01
    together = while_both_trained([first, second])
    assert all(s["tokens_per_s"] and 0 < s["steps_together"] <= len(s["steady"])
               for s in together)
