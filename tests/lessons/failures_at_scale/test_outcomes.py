"""Lesson 12's tables and verdicts of its runs (gpututor/lessons/failures_at_scale/outcomes.py):
each verdict branch, fed the numbers that select it, says what those numbers show; no launch."""
import pytest

from gpututor.lessons.failures_at_scale.outcomes import (
    saves_measured_table, saves_measured_verdict, hang_outcome, largest_difference, restart_verdict,
    resumed_table, resumed_verdict, state_bytes, waiting_rank_line)
from gpututor.runtime.failures import RunFailed


def run(save_s, blocked_s, asynchronous=True, strategy="fsdp", size="small", per_rank=None,
        params=1_000_000, device="cpu", step=0.1):
    """A run summary with the fields the lesson reads."""
    return {"strategy": strategy, "model_size": size, "device": device, "params": params,
            "step_time_s": step, "spec": {"checkpoint_async": asynchronous, "checkpoint_every": 2},
            "checkpoint": {"bytes_per_rank": per_rank or [3e6] * 4, "save_s": save_s,
                           "blocked_s": blocked_s}}


def test_the_state_is_twelve_bytes_a_parameter():
    assert state_bytes(1_000_000) == 12_000_000 and state_bytes(None) is None


def test_the_checkpoint_table_shows_not_measured_never_zero():
    columns, rows = saves_measured_table({"ddp": run(0.2, 0.05, per_rank=[3e6, 3e6, None, 3e6]),
                                      "fsdp": run(0.3, None, params=None, step=None)})
    assert len(columns) == len(rows[0]) == 8 and "MB in all" in columns
    ddp, fsdp = rows
    assert ddp[1] == "3.00 / 3.00 / not measured / 3.00" and ddp[2] == "not measured"
    assert fsdp[2] == "12.0" and fsdp[3] == "not measured" and fsdp[4] == "not measured"
    assert fsdp[6] == "not measured" and fsdp[7] == "not measured"
    assert saves_measured_table({"x": run(0.2, 0.05)})[1][0][4] == "100.0%"   # 12 MB of a 12 MB state


@pytest.mark.parametrize("blocked,words,tone", [
    ((0.05, 0.1), "Training waited for 25% to 50% of each asynchronous save: the rest of the write ran in the background", "good"),
    ((0.15, 0.18), "Training waited for 75% to 90% of each asynchronous save: most of each save "
                   "was not hidden", "bad"),
    ((0.05, 0.15), "Training waited for 25% to 75% of an asynchronous save: some layouts hid", "mixed"),
    ((0.1, 0.1), "Training waited for 50% of each asynchronous save", "good"),
])
def test_the_checkpoint_verdict_follows_the_waited_share(blocked, words, tone):
    runs = {"ddp": run(0.2, blocked[0], strategy="ddp"), "fsdp": run(0.2, blocked[1]),
            "fsdp, synchronous": run(0.15, 0.15, asynchronous=False)}
    headline, details, got = saves_measured_verdict(runs, cores=2)
    assert headline.startswith(words) and got == tone, headline
    assert "share this machine's 2 usable CPU cores" in details
    # fsdp's asynchronous save against the synchronous one of the same strategy and model
    assert "fsdp: the asynchronous save took 0.20 s in all, longer than the synchronous one's 0.15 s" \
        in details


def test_the_checkpoint_verdict_without_a_measured_wait_and_on_gpus():
    runs = {"fsdp": run(0.2, None, device="cuda:0"),
            "fsdp, synchronous": run(0.3, 0.3, asynchronous=False, device="cuda:0")}
    headline, details, tone = saves_measured_verdict(runs, cores=None)
    assert "was not measured" in headline and tone == "mixed"
    assert "the ranks run on GPUs" in details and "no longer than the synchronous one's 0.30 s" in details


def test_largest_difference():
    assert largest_difference([1.0, 2.2], [1.0, 2.0]) == pytest.approx(0.1)
    assert largest_difference([], [1.0]) is None


def test_resumed_verdict_and_table():
    full = [4.0, 3.0, 2.0, 1.0]
    good = {"tp": {"first_step": 2, "losses": [2.0, 1.0]}, "one": {"first_step": 3, "losses": [1.0]}}
    headline, _, tone = resumed_verdict(full, good, 1e-5)
    assert headline.startswith("Each continued run matches") and tone == "good"
    bad = {**good, "one": {"first_step": 3, "losses": [1.1]}, "none": {"first_step": 3, "losses": []}}
    headline, _, tone = resumed_verdict(full, bad, 1e-5)
    assert headline.startswith("2 of 3 continued runs do not match") and "one; none" in headline
    assert tone == "bad"
    columns, rows = resumed_table(full, bad, 1e-5)
    assert columns[-1] == "within rtol 1e-5"
    assert rows[0] == ["tp", "2–3", "0.0e+00", "yes"] and rows[1][2:] == ["1.0e-01", "no"]
    assert rows[2][2:] == ["not measured", "not measured"]


def restarted(resumed_from, losses=(4.0, 3.0, 2.0, 1.0, 0.5, 0.25), failures=True):
    failure = {"rank": 1, "step": 4, "error": "InjectedFault: injected fault", "attempt": 0,
               "resumed_from": resumed_from}
    return {"failures": [failure] if failures else [], "attempts": 2, "steps": 6,
            "losses": list(losses), "spec": {"checkpoint_every": 2}}


REFERENCE = [4.0, 3.0, 2.0, 1.0, 0.5, 0.25]


def test_a_restart_from_the_last_save_lost_no_step():
    headline, details, tone = restart_verdict(restarted(4), REFERENCE, 1e-5)
    assert headline == ("Rank 1 failed at step 4; the run restarted from step 4's checkpoint, lost "
                        "no step, and matched the uninterrupted run's losses from there")
    assert tone == "good" and "not yet committed" not in details and "2 attempts" in details


def test_a_restart_from_an_earlier_save_ran_steps_twice():
    headline, details, tone = restart_verdict(restarted(2), REFERENCE, 1e-5)
    assert "restarted from step 2's checkpoint, ran 2 steps twice, and matched" in headline
    assert tone == "good"
    assert "step 4's save had started before the failure but was not yet committed" in details
    # one step twice: the singular, from the catalog's plural forms
    assert "ran 1 step twice" in restart_verdict(
        {**restarted(2), "failures": [{**restarted(2)["failures"][0], "step": 3}]},
        REFERENCE, 1e-5)[0]


def test_a_restart_whose_losses_differ():
    headline, details, tone = restart_verdict(restarted(2, losses=[4, 3, 2.5, 1, 0.5, 0.25]),
                                              REFERENCE, 1e-5)
    assert "but its losses from there do not match" in headline and tone == "bad"
    assert "largest relative difference from step 2 on: 2.5e-01" in details


def test_no_restart_and_no_failure():
    headline, _, tone = restart_verdict(restarted(None), REFERENCE, 1e-5)
    assert headline == "Rank 1 failed at step 4, and the run did not restart" and tone == "bad"
    headline, _, tone = restart_verdict(restarted(2, failures=False), REFERENCE, 1e-5)
    assert headline.startswith("No rank failed") and tone == "bad"


REPORT = ("rank 1 stopped answering at step 2 (in worker.py, line 186 in inject_fault); rank 0 gave "
          "up waiting for it after timeout=3.0 s\nrank 0: RuntimeError: Timed out waiting 3000ms"
          "\n\n--- what rank 1 was doing (its main thread, innermost first) ---\n"
          'File "worker.py", line 186 in inject_fault')


def test_the_hang_report_names_the_rank_and_folds_its_stack():
    failure = RunFailed(REPORT, 0, "Traceback ...", step=2, failed_rank=1)
    headline, details, tone, report = hang_outcome(failure, 1, 3.4, 3.0, "cpu")
    assert headline == ("The report names rank 1, the rank that hung, at step 2; the run ended "
                        "3.4 s after it started (timeout 3 s)") and tone == "good"
    assert report.endswith("rank 0: RuntimeError: Timed out waiting 3000ms")
    assert "--- what rank 1 was doing" not in report and "Traceback" not in report
    assert "rank 0 ran on a CPU: its line is gloo's timeout" in details
    assert details.splitlines()[1].startswith("--- what rank 1 was doing")
    assert 'line 186 in inject_fault' in details


def test_the_hang_report_naming_another_rank_or_none():
    failure = RunFailed("rank 0 failed at step 2: boom", 0, "", step=2)
    headline, details, tone, report = hang_outcome(failure, 1, 5.0, 3.0, "cpu")
    assert headline.startswith("The report names rank 0, not rank 1, which was made to hang")
    assert tone == "bad" and report == "rank 0 failed at step 2: boom" and "---" not in details
    headline, details, tone, report = hang_outcome(None, 1, 5.0, 3.0, "cpu")
    assert headline == "The run finished: rank 1 did not hang (unexpected)" and report == ""


def test_the_waiting_ranks_line_by_device():
    assert "SIGABRT" in waiting_rank_line("rank 0 exited with code -6 (SIGABRT: ...)", 0, "cuda")
    assert "the error NCCL raised" in waiting_rank_line("rank 0: DistBackendError", 0, "cuda")
    assert "gloo's timeout" in waiting_rank_line("rank 0: RuntimeError", 0, "cpu")


def test_the_verdicts_speak_chinese():
    from gpututor.i18n import set_language
    set_language("zh")
    try:
        headline, details, _ = restart_verdict(restarted(2), REFERENCE, 1e-5)
        assert headline.startswith("进程 1 在第 4 步失败") and "有 2 步运行了两次" in headline
        assert "rtol 1e-5" in resumed_verdict([1.0], {"a": {"first_step": 0, "losses": [1.0]}}, 1e-5)[0]
        headline, details, _ = saves_measured_verdict({"fsdp": run(0.2, 0.05)}, cores=2)
        assert headline.startswith("每次异步保存中") and "2 个可用 CPU 核心" in details
    finally:
        set_language("en")
