"""Lesson 09's tables and verdicts read the runs' numbers and choose their words from them: each
branch is fed numbers that select it, without launching anything."""
from __future__ import annotations

import pytest

from gpututor.lessons.composing_parallelisms import plans, results
from gpututor.measure.capacity import DeviceOutOfMemory
from gpututor.parallel.mesh import RankGrid
from gpututor.runtime.failures import RunFailed

MB = 1e6


def run(world=4, peak=20e6, setup=4e6, params=5e6, sent=10e6, losses=(4.0, 3.0), device="cpu",
        activations=27e6):
    return {"world_size": world, "peak_mem_bytes": [peak] * world,
            "setup_peak_mem_bytes": [setup] * world, "losses": list(losses), "params": 2_737_152,
            "mem_by_category": {"params": [params] * world, "grads": [params] * world,
                                "optimizer": [2 * params] * world,
                                "activations": [activations] * world},
            "comm_wire_bytes_per_step": sent, "device": device}


SINGLE = run(world=1, peak=78e6, setup=12.5e6, params=10.95e6, sent=None)


def out_of_memory(rank=0):
    error = DeviceOutOfMemory(rank, 0, "forward", 50e6, 47e6, 47e6,
                              {"params": 10e6, "grads": 0, "optimizer": 0})
    return RunFailed(f"rank {rank} failed at step 0: DeviceOutOfMemory: {error}", rank, error=error)


def test_the_held_table_lists_each_category_and_the_peak():
    columns, rows = results.held_table(SINGLE)
    assert len(columns) == 2 and rows[0] == ["parameters (2,737,152 of them)", "10.95"]
    assert rows[-1] == ["peak during a step (everything alive)", "78.00"]


@pytest.mark.parametrize("outcomes,words,tone", [
    ({"zero3": run(peak=23e6), "fsdp": run(peak=25e6)}, "zero3 and fsdp fit: largest peak per rank 25.0 MB", "good"),
    ({"zero3": run(), "fsdp": out_of_memory()}, "zero3 fit and fsdp did not", "mixed"),
    ({"zero3": out_of_memory(), "fsdp": RunFailed("rank 0 exited", 0)}, "no layout fit", "bad"),
])
def test_the_capped_verdict_says_which_layouts_fit(outcomes, words, tone):
    headline, details, got = results.capped_verdict(outcomes, 47e6, world_size=4)
    assert words in headline and got == tone, headline
    if tone != "good":
        assert "floor that sharding cannot go below" in details and "DeviceOutOfMemory" in details


def test_the_capped_table_shows_a_failed_run_as_not_measured():
    _, rows = results.capped_table({"zero3": run(peak=23.5e6), "fsdp": out_of_memory(),
                                    "ddp": RunFailed("rank 0 exited", 0)}, 47e6)
    assert rows[0] == ["zero3", "finished", "23.50", "50%"]
    assert rows[1] == ["fsdp", "out of memory", "not measured", "not measured"]
    assert rows[2][1] == "failed"


@pytest.mark.parametrize("setup,words,tone", [
    (3.8e6, "No sharded rank ever held the whole model", "good"),
    (11e6, "A zero3 rank held 100% of the whole model's parameter bytes", "bad"),
])
def test_the_setup_verdict_compares_with_the_whole_models_bytes(setup, words, tone):
    headline, details, got = results.setup_verdict(SINGLE, {"zero3": run(setup=setup)})
    assert words in headline and got == tone, headline
    assert "One process" in details


def test_the_setup_verdict_without_a_sharded_run():
    headline, _, tone = results.setup_verdict(SINGLE, {})
    assert "No sharded run" in headline and tone == "mixed"
    _, rows = results.setup_table({"single": SINGLE, "zero3": run(setup=None)}, 10.95e6)
    assert rows[1] == ["zero3", "not measured", "not measured"]


def test_the_grid_and_rank_tables_come_from_the_grid():
    grid = RankGrid((("dp", 2), ("pp", 2), ("tp", 2)))
    columns, rows = results.grid_table(grid)
    assert rows[0] == ["dp", 2, "[0, 4]  [1, 5]  [2, 6]  [3, 7]"]
    assert rows[2] == ["tp", 2, "[0, 1]  [2, 3]  [4, 5]  [6, 7]"]
    columns, rows = results.rank_table(grid, run(world=8, params=2.95e6))
    assert columns[1:4] == ["dp", "pp", "tp"] and rows[6] == [6, 1, 1, 0, "2.95"]


@pytest.mark.parametrize("differences,words,tone", [
    ({"ddp+tp": 3.8e-7, "fsdp+tp": 6.4e-7}, "Up to rounding, every layout trained like one process: "
                                            "largest relative loss difference 6.4e-07", "good"),
    ({"ddp+tp+pp": 3.2e-7}, "Up to rounding, ddp+tp+pp trained like one process", "good"),
    ({"ddp+tp": 3.8e-7, "ddp+pp": 2e-3}, "ddp+pp differed from one process by up to 2.0e-03", "bad"),
])
def test_the_equal_verdict_reads_rounding_from_a_difference(differences, words, tone):
    headline, details, got = results.equal_verdict(differences, "first line")
    assert words in headline and got == tone, headline
    assert details.startswith("first line\n") and "summation order" in details


def test_relative_difference_and_the_equal_table():
    a, b = run(losses=(4.0, 3.0)), run(losses=(4.0, 3.0003))
    assert results.relative_difference(b, a) == pytest.approx(1e-4)
    _, rows = results.equal_table({"ddp+tp": b}, {"ddp+tp": {"dp": 2, "tp": 2}}, a)
    assert rows == [["ddp+tp", "dp=2 × tp=2", "1.0e-04"]]


def test_the_bytes_verdict_and_table():
    runs = {"ddp+tp": run(params=5.62e6, sent=10.34e6), "fsdp+tp": run(params=2.81e6, sent=None),
            "ddp+pp": run(params=5.61e6, sent=0.27e6)}
    headline, details, tone = results.bytes_verdict(SINGLE, runs)
    assert headline.startswith("fsdp+tp holds the fewest parameter bytes per rank: at most 2.81 MB, 26%")
    assert "ddp+pp sends the fewest: 0.27 MB" in details and "not measured for fsdp+tp" in details
    columns, rows = results.bytes_table({"single": SINGLE, **runs})
    assert len(columns) == 6 and rows[0] == ["single", "10.95", "-", "-", "-", "0.00"]
    assert rows[2][-1] == "not measured"
    unmeasured = {"ddp+tp": run(sent=None)}
    unmeasured["ddp+tp"]["mem_by_category"]["params"] = [None] * 4
    headline, details, tone = results.bytes_verdict(SINGLE, unmeasured)
    assert "No layout measured" in headline and "ddp+pp" not in details


@pytest.mark.parametrize("device,cores,words", [
    ("cuda:0", 2, "ran on one GPU each"),
    ("cpu", 2, "sharing this machine's 2 cores"),
    ("cpu", 32, "were 8 CPU processes on this machine."),
])
def test_ran_on_reads_the_device_and_the_cores(device, cores, words):
    assert words in results.ran_on(run(world=8, device=device), cores)


@pytest.mark.parametrize("on,sent_on,formula_on,words,tone,more", [
    (24.4e6, 9.86e6, 21.5e6, "cut each rank's measured activations by 2.60 MB (10%)", "good",
     ["0.42 MB more", "moved the same way"]),
    (24.4e6, 9.0e6, 27e6, "cut each rank's measured activations", "good",
     ["0.44 MB less", "moved the other way"]),
    (27.5e6, None, 21.5e6, "did not lower the measured activations", "bad",
     ["Bytes sent: not measured", "moved the other way"]),
])
def test_the_sequence_parallel_verdict(on, sent_on, formula_on, words, tone, more):
    runs = {False: run(world=2, activations=27.0e6, sent=9.44e6),
            True: run(world=2, activations=on, sent=sent_on)}
    headline, details, got = results.sp_verdict(runs, {False: 26.25e6, True: formula_on})
    assert words in headline and got == tone, headline
    assert all(m in details for m in more), details
    _, rows = results.sp_table(runs, {False: 26.25e6, True: formula_on}, run(world=1))
    assert rows[0][:4] == ["tp=2", "27.00", "26.25", "9.44"]


def test_out_of_memory_words_and_failure_words():
    assert results.failure_words(RunFailed("rank 0 exited with code 9\nmore", 0)) == \
        "rank 0 exited with code 9"
    assert results.failure_words(out_of_memory()).startswith("rank 0 failed at step 0")


ROWS = [{"layout": "ddp", "mesh": {"dp": 4}, "total": 53.5e6, "fits": False},
        {"layout": "fsdp", "mesh": {"dp": 4}, "total": 25.0e6, "fits": True},
        {"layout": "ddp+tp", "mesh": {"dp": 2, "tp": 2}, "total": 34.5e6, "fits": True}]


@pytest.mark.parametrize("fsdp,tp,words,tone", [
    (24.7e6, 34.9e6, "predicted every measured peak within 10%: the largest miss, fsdp, -1%", "good"),
    (24.7e6, 41e6, "largest miss was ddp+tp's peak, +19%; none was over by more than the 25%", "mixed"),
    (15e6, 34.9e6, "largest miss was fsdp's peak, -40%", "mixed"),
    (24.7e6, 45e6, "ddp+tp's measured peak was +30% over its prediction", "bad"),
])
def test_the_prediction_verdict(fsdp, tp, words, tone):
    measured = {"fsdp": run(peak=fsdp), "ddp+tp": run(peak=tp), "ddp+pp": None}
    headline, details, got = plans.prediction_verdict(ROWS, measured)
    assert words in headline and got == tone, headline
    assert "Above the prediction (ddp+tp)" in details and "80%" in details


def test_the_prediction_verdict_with_nothing_run():
    assert "nothing to compare" in plans.prediction_verdict(ROWS, {"fsdp": None})[0]


@pytest.mark.parametrize("outcome,words,tone", [
    (run(peak=25.5e6), "picked fsdp on dp=4, and the run fit: largest peak per rank 25.5 MB of 47.0", "good"),
    (out_of_memory(), "picked fsdp on dp=4, and the run did not fit", "bad"),
    ({**run(), "peak_mem_bytes": [None] * 4}, "the run finished, its peak not measured", "mixed"),
])
def test_the_pick_verdict(outcome, words, tone):
    headline, details, got = plans.pick_verdict(ROWS[1], outcome, 47e6, world_size=4)
    assert words in headline and got == tone, headline
    assert "predicted 25.0 MB per rank; the planner's limit 37.6 MB" in details


def test_the_pick_verdict_without_a_pick():
    headline, _, tone = plans.pick_verdict(None, None, 47e6, world_size=4)
    assert "finds no layout on 4 ranks" in headline and tone == "bad"


def step(step_s, tp, dp, hidden=0.0):
    return {"step_s": step_s, "compute_s": 76.7, "tp_comm_s": tp, "dp_comm_s": dp,
            "dp_exposed_s": hidden}


@pytest.mark.parametrize("across,words,tone", [
    (step(202.6, 126.0, 5.5), "across nodes makes the step 2.2× as long: 203 s against 93 s", "good"),
    (step(80.0, 3.0, 5.5), "finds tensor parallel across nodes faster", "bad"),
    (step(94.0, 17.0, 5.5), "about the same step either way", "mixed"),
])
def test_the_placement_verdict(across, words, tone):
    headline, details, got = plans.placement_verdict(step(92.9, 16.2, 49.4), across)
    assert words in headline and got == tone, headline
    assert "16.2 s a step inside a node" in details and "lower bounds" in details
    _, rows = plans.placement_table({"inside a node (NVLink 4)": step(92.9, 16.2, 49.4)})
    assert rows == [["inside a node (NVLink 4)", "92.9", "76.7", "16.2", "49.4", "0.0"]]


def test_the_memory_table_says_what_fits():
    columns, rows = plans.memory_table({"no ZeRO, no recomputation": 229e9,
                                        "ZeRO-2, selective recomputation": 68e9}, 72e9)
    assert columns[2] == "fits in 72 GB"
    assert rows == [["no ZeRO, no recomputation", "229", "no"],
                    ["ZeRO-2, selective recomputation", "68", "yes"]]
