"""Lesson 00's comparison of DDP's step with two independent runs': the words are chosen from
the measured numbers, like for like (a DDP rank's compute against the independent runs')."""
import pytest

from gpututor.lessons.start_here.contention import explain_gap, gap_per_step, without_view_lines


def pair(*step_times):
    return {"summaries": [{"step_time_s": t} for t in step_times], "tokens_per_s": 1.0}


def ddp(step, compute, comm):
    return {"step_time_s": step, "compute_s": compute, "comm_s": comm}


def test_the_step_is_compared_like_for_like():
    g = gap_per_step(ddp(0.150, 0.120, 0.025), pair(0.100, 0.104))
    assert g["independent_step_s"] == pytest.approx(0.102)
    assert g["independent_spread_s"] == pytest.approx(0.004)
    assert g["extra_compute_s"] == pytest.approx(0.018)   # compute against compute, not the step
    text = explain_gap(ddp(0.150, 0.120, 0.025), pair(0.100, 0.104))
    assert "DDP 150 ms (its slowest rank)" in text and "computed 120 ms and waited 25 ms" in text
    assert "102 ms per step on average" in text and "differed from each other by 4 ms" in text
    assert "Most of DDP's extra time per step was the wait at the all-reduce (25 ms; a DDP rank " \
        "computed 18 ms more per step than an independent run)" in text
    # a DDP rank that computed less than the independent runs is said so, never "-4 ms beyond"
    less = explain_gap(ddp(0.141, 0.121, 0.018), pair(0.122, 0.128))
    assert "computed 4 ms less per step than an independent run" in less and "-4" not in less


def test_each_case_says_what_was_measured():
    slower_compute = explain_gap(ddp(0.150, 0.140, 0.008), pair(0.100, 0.101))
    assert "was compute beyond the independent runs' (+40 ms, against 8 ms of waiting)" in \
        slower_compute
    noise = explain_gap(ddp(0.110, 0.104, 0.005), pair(0.095, 0.110))
    assert "cannot be told apart from run-to-run variation" in noise
    # a straggler with no communication: the wait is reported as a wait, never as "communication
    # covers the gap"
    assert "includes waiting for the other rank" in explain_gap(ddp(0.11, 0.1, 0.005),
                                                                pair(0.1, 0.1))
    assert "not measured, so the step is not split" in explain_gap(ddp(0.12, None, None),
                                                                   pair(0.1, 0.1))
    assert "cannot be compared" in explain_gap(ddp(None, None, None), pair(0.1, 0.1))


def quiet(ddp_tps, one_tps, pair_tps):
    return {"ddp": {"tokens_per_s": ddp_tps, "world_size": 2}, "one": {"tokens_per_s": one_tps},
            "pair": {"tokens_per_s": pair_tps,
                     "summaries": [{"batch_size": 16, "steps_together": 26},
                                   {"batch_size": 16, "steps_together": 25}]}}


def test_the_runs_without_a_view_are_said_from_their_numbers():
    text = without_view_lines(quiet(150.0, 100.0, 200.0), panel_speedup=1.4)
    assert "speedup 1.50× (the panels above, each with its live view: 1.40×)" in text
    assert "two independent runs of 16 sequences, started together behind a barrier" in text
    assert "over the steady steps that ran while both trained (26 and 25)" in text
    assert "= 0.75 of that ceiling" in text
    assert "above 1.0" in without_view_lines(quiet(210.0, 100.0, 200.0), panel_speedup=None)
    assert "live view: not measured)" in without_view_lines(quiet(150.0, 100.0, 200.0), None)
    assert "nothing to compare" in without_view_lines(quiet(None, 100.0, 200.0), 1.4)


@pytest.mark.parametrize("rates,words", [((100.0, 80.0), "ran at 80% of the rate"),
                                         ((100.0, 120.0), "ran faster (120% of the rate)"),
                                         ((100.0, 97.0), "within 5 % of each other (97%)")])
def test_matmul_rate_line_picks_its_words_from_the_two_measured_rates(monkeypatch, rates, words):
    from gpututor.lessons.start_here import contention
    from gpututor import RunSpec
    measured = {1: rates[0] * 1e9, 2: rates[1] * 1e9}
    monkeypatch.setattr(contention, "measure_matmul_flops", lambda spec, dp: measured[dp])
    line = contention.matmul_rate_line(RunSpec(strategy="ddp", world_size=2, batch_size=32))
    assert words in line and f"{rates[1]:.1f} GFLOP/s" in line


def test_matmul_rate_line_times_real_matmuls():
    from gpututor.lessons.start_here.contention import matmul_rate_line
    from gpututor import RunSpec
    assert "GFLOP/s" in matmul_rate_line(RunSpec(strategy="ddp", world_size=2, batch_size=8, seq_len=16))


def cost(kernel, browser, wall=5.0):
    return {"kernel_cpu_s": kernel, "browser_draw_s": browser, "wall_s": wall, "redraws": 5}


def test_the_two_speedups_are_set_beside_what_the_view_was_measured_to_use(monkeypatch):
    from gpututor.lessons.start_here.contention import view_gap_line
    runs = quiet(160.0, 100.0, 200.0)              # 1.60× without a view
    monkeypatch.setattr("gpututor.lessons.start_here.contention.usable_cpu_cores", lambda: 2)
    # 1.53×: 4.4 % lower; the view took (0.4 + 0.1) / (5 s × 2 ranks) = 5.0 % of the ranks' time
    within = view_gap_line(runs, 1.53, cost(0.4, 0.1))
    assert "4 % lower than the one without a view" in within
    assert "0.40 CPU-s in the kernel and 0.10 s of drawing" in within and "5.0% of 2 cores (one per rank) over the run's wall time" in within
    assert "can account for all of it" in within
    # 1.44×: 10 % lower, beyond the view's 5 %: the rest is not put on the view
    beyond = view_gap_line(runs, 1.44, cost(0.4, 0.1))
    assert "10 % lower" in beyond and "larger than the view's measured share" in beyond
    assert "account for" not in beyond
    # higher with the panels: the view is not blamed, and nothing claims it cost nothing
    higher = view_gap_line(runs, 1.70, cost(0.4, 0.1))
    assert "6 % higher" in higher and "nothing here says the view slowed DDP down" in higher
    same = view_gap_line(runs, 1.601, cost(0.4, None))
    assert "the same as the one without a view" in same
    assert "0.40 CPU-s in the kernel, 4.0% of 2 cores (one per rank) over the run's wall time" in same
    assert "drawing time was not reported (nothing has drawn the view, or, under Run All" in same
    for text in (within, beyond, higher, same):
        assert "Run this cell again" in text
    gpu = {**runs, "ddp": {**runs["ddp"], "device": "cuda:0"}}
    monkeypatch.setattr("gpututor.lessons.start_here.contention.usable_cpu_cores", lambda: 16)
    on_gpus = view_gap_line(gpu, 1.44, cost(0.4, 0.1))
    assert "not with the GPUs' compute" in on_gpus and "account for" not in on_gpus
    # GPU ranks are not one core each: the share is of the host's usable cores (0.5 / (5 × 16))
    assert "0.6% of this machine's 16 usable cores" in on_gpus and "2 cores" not in on_gpus
    # CPU ranks with a spare core: the view's thread need not have slowed them
    monkeypatch.setattr("gpututor.lessons.start_here.contention.usable_cpu_cores", lambda: 4)
    spare = view_gap_line(runs, 1.53, cost(0.4, 0.1))
    assert "can run on a spare one" in spare and "account for all of it" not in spare
    # 2 ranks on one usable core: the share is of that one core (0.5 / (5 × 1))
    monkeypatch.setattr("gpututor.lessons.start_here.contention.usable_cpu_cores", lambda: 1)
    assert "10.0% of this machine's 1 usable cores" in view_gap_line(runs, 1.53, cost(0.4, 0.1))
    assert "cannot be compared" in view_gap_line(runs, None, cost(0.4, 0.1))
    assert "cannot be compared" in view_gap_line(runs, 1.5, None)
    assert "cannot be compared" in view_gap_line(quiet(None, 100.0, 200.0), 1.5, cost(0.4, 0.1))


def test_half_batch_line_says_what_halving_the_batch_saved():
    from gpututor.lessons.start_here.contention import half_batch_line

    def runs(whole, *halves):
        return {"one": {"step_time_s": whole}, "pair": {"summaries": [{"step_time_s": h} for h in halves]}}
    fixed = half_batch_line(runs(0.010, 0.009, 0.009))        # a GPU-like step: launches dominate
    assert "10 ms" in fixed and "9 ms" in fixed and "only 1.11× shorter" in fixed
    assert "cap the speedup well below 2×" in fixed
    near = half_batch_line(runs(0.200, 0.104, 0.106))
    assert "1.90× shorter, close to 2×" in near and "communication" in near and "cap" not in near
    faster = half_batch_line(runs(0.200, 0.090, 0.090))
    assert "2.22× shorter, more than 2×" in faster and "faster per token" in faster
    assert "not measured" in half_batch_line(runs(None, 0.1, 0.1))
    assert "not measured" in half_batch_line(runs(0.2, 0.1, None))
