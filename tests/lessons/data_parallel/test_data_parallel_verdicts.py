"""Lesson 02's verdicts (``gpututor.lessons.data_parallel.verdicts``): every branch, fed numbers,
says what the numbers that select it show; nothing is launched. Also the planner's expectation
and the figure that draws it beside the measured speedups."""
from types import SimpleNamespace

import pytest

from gpututor import RunSpec
from gpututor.lessons.data_parallel import verdicts
from gpututor.lessons.data_parallel.expected import planner_speedup
from gpututor.lessons.data_parallel.figures import ring_figure, scaling_figure
from gpututor.ui.style import COLOURS


def summary(tokens=1000.0, step=0.1, comm=0.01, **more):
    return {"world_size": 2, "final_loss": 3.3, "tokens_per_s": tokens, "step_time_s": step,
            "comm_s": comm, "losses": [3.5, 3.4, 3.3], "comm_bytes_per_step": 4e6, **more}


def test_the_run_table_says_not_measured_for_a_missing_throughput():
    columns, rows = verdicts.run_table({"single": {**summary(), "world_size": 1},
                                        "ddp": summary(tokens=None)})
    assert len(columns) == 4 and rows[0] == ["single", "1", "3.30000", "1,000"]
    assert rows[1][-1] == "not measured"


def test_same_training_names_the_largest_difference():
    headline, details, tone = verdicts.same_training_verdict({"dp-naive": 1e-6, "ddp": 2e-5})
    assert "All 2 data-parallel runs" in headline and "2.0e-05" in headline and tone == "good"
    assert "dp-naive: largest weight difference 1.0e-06" in details


def buckets(*leads):
    """Records of rank 0 over two steps: one bucket first, then one per lead (seconds)."""
    return [{"rank": 0, "step": 0, "ddp_buckets": [{"bytes": 3e6, "before_last_grad_s": 0.0}]},
            {"rank": 1, "step": 0, "ddp_buckets": [{"bytes": 3e6, "before_last_grad_s": 0.0}]},
            {"rank": 0, "step": 7, "ddp_buckets": [{"bytes": 1e6, "before_last_grad_s": lead}
                                                   for lead in leads]}]


@pytest.mark.parametrize("leads, words, tone", [
    ((0.0, 0.0), "none of its all-reduce could overlap", "bad"),
    ((0.05, 0.01), "all of its all-reduce could overlap", "good"),
    ((0.05, 0.0), "50% of the bytes were launched before", "mixed")])
def test_the_bucket_verdict_reads_the_last_steps_launches(leads, words, tone):
    headline, details, chosen = verdicts.bucket_verdict(buckets(*leads))
    assert words in headline and chosen == tone and details.startswith("step 0: 1 bucket")
    columns, rows = verdicts.bucket_table(buckets(*leads))
    assert [r[:3] for r in rows] == [["0", "1", "3.00"], ["7", "1", "1.00"], ["7", "2", "1.00"]]


def test_no_buckets_recorded_is_said_so():
    assert "no DDP buckets" in verdicts.bucket_verdict([{"rank": 0, "step": 0}])[0]
    assert verdicts.bucket_table([])[1] == []


@pytest.mark.parametrize("ddp_step, words, tone", [(0.08, "0.80× the naive one's: 20 ms a step "
                                                          "less", "good"),
                                                   (0.1, "about as long as the naive", "mixed"),
                                                   (0.12, "1.20× the naive one's: slower", "bad")])
def test_the_overlap_verdict_follows_the_step_ratio(ddp_step, words, tone):
    runs = {"dp-naive": summary(step=0.1, comm=0.04), "dp-bucketed": summary(comm=None),
            "ddp": summary(step=ddp_step)}
    headline, details, chosen = verdicts.overlap_verdict(runs, "gloo over loopback")
    assert words in headline and chosen == tone
    assert "dp-naive: waiting 40.0 ms of a 100.0 ms step (40%)" in details
    assert "dp-bucketed: waiting not measured" in details and details.endswith("loopback")


def test_the_latency_verdict_tells_fixed_cost_from_a_case_it_cannot_decide():
    rows = [{"op": "all_reduce", "bytes": 1024, "time_s": 250e-6},
            {"op": "all_reduce", "bytes": 4 * 2**20, "time_s": 2.7e-3},
            {"op": "broadcast", "bytes": 1024, "time_s": 1e-6}]
    headline, details, _ = verdicts.latency_verdict(rows)
    assert "mostly fixed cost (latency)" in headline and "4,096x the bytes" in details
    rows[1]["time_s"] = 250e-6 * 4096 * 0.8      # the time grew almost with the bytes
    headline, _, _ = verdicts.latency_verdict(rows)
    assert "cannot tell" in headline and "up to 80%" in headline


def test_the_bandwidth_and_link_tables():
    comm = {"world_size": 2, "backend": "gloo", "rows": [
        {"op": "all_reduce", "bytes": 1e6, "time_s": 1e-3, "algbw": 1e9, "busbw": 1e9},
        {"op": "all_reduce", "bytes": 4e6, "time_s": 2e-3, "algbw": 2e9, "busbw": 2e9},
        {"op": "broadcast", "bytes": 4e6, "error": "skipped"}]}
    columns, rows = verdicts.bandwidth_table(comm)
    assert "2 ranks, gloo" in columns[0] and rows == [["all_reduce", "4.0", "2.000", "2.000"]]
    emulated = {"NVLink 3": SimpleNamespace(bandwidth=2.23e8, latency=6.7e-3)}
    columns, rows = verdicts.link_table({"NVLink 3": "nvlink3"}, emulated)
    assert rows == [["NVLink 3 (nvlink3)", "300", "5", "223", "6.7"]]


def link_runs(pcie, nvlink, *fixes):
    names = ["DDP + bf16 gradients, PCIe-like", "DDP + PowerSGD rank 1, PCIe-like"]
    runs = {"DDP, PCIe-like": summary(tokens=pcie * 100), "DDP, NVLink-like":
            summary(tokens=nvlink * 100, comm=None)}
    runs.update({name: summary(tokens=v * 100) for name, v in zip(names, fixes)})
    return runs, summary(tokens=100)


@pytest.mark.parametrize("speeds, words, tone", [
    ((0.8, 1.6, 1.1, 1.4), ("0.80× one rank on the PCIe-like link and 1.60×",
                            "the best of the fixes, DDP + PowerSGD rank 1, PCIe-like, "
                            "reached 1.40×"),
     "good"),
    ((0.8, 0.7, 1.1, 0.9), ("no faster on the NVLink-like link (0.70×) than on the PCIe-like "
                            "one (0.80×)", "DDP + bf16 gradients, PCIe-like, reached 1.10×"),
     "mixed"),
    ((0.8, 1.6, 0.7, 0.75), ("1.60×", "no fix beat plain DDP"), "mixed")])
def test_the_link_verdict(speeds, words, tone):
    headline, details, chosen = verdicts.link_verdict(*link_runs(*speeds))
    assert all(w in headline for w in words) and chosen == tone
    assert "DDP, NVLink-like: " in details and "waiting not measured" in details


def test_the_powersgd_verdict_with_and_without_steps_it_can_change():
    plain = summary(losses=[3.5, 3.4, 3.3, 3.2, 3.1])
    compressed = summary(losses=[3.5, 3.4, 3.3, 3.21, 3.1005], comm_bytes_per_step=8e4)
    headline, details, tone = verdicts.powersgd_verdict(plain, compressed, start=2)
    assert "50× fewer bytes" in headline and "from step 3 on" in headline
    assert "0.0100" in headline and tone == "good" and "steps 0 to 2" in details
    headline, _, tone = verdicts.powersgd_verdict(plain, {**compressed, "losses": [3.5, 3.4, 9.0]
                                                          + [9.0, 9.0]}, start=2)
    assert tone == "mixed"
    headline, _, tone = verdicts.powersgd_verdict(summary(losses=[3.5, 3.4]),
                                                  summary(losses=[3.5, 3.4],
                                                          comm_bytes_per_step=8e4), start=2)
    assert "ended before step 3" in headline and tone == "mixed"


@pytest.mark.parametrize("ratio, words, tone", [
    (1.95, "every rank kept its one-rank speed", "good"),
    (1.6, "1.60× one rank's tokens/s, 80% of the ideal 2×", "good"),
    (1.3, "1.30× one rank's tokens/s, 65% of the ideal 2×", "mixed"),
    (0.9, "only 0.90× one rank's tokens/s: about one rank's speed or less", "bad")])
def test_the_weak_scaling_verdict(ratio, words, tone):
    weak = {"world_size": 2, "throughput_ratio": ratio, "efficiency": ratio / 2}
    headline, details, chosen = verdicts.weak_verdict(weak, summary(comm=None))
    assert words in headline and chosen == tone and "not measured" in details
    assert "no measured throughput" in verdicts.weak_verdict(
        {"world_size": 2, "throughput_ratio": None, "efficiency": None}, summary())[0]


EXPECTED = {"gpu": "H100-80GB", "link_name": "NVLink 4", "world_size": 2, "speedup": 1.97,
            "step_one_s": 2e-3, "step_many_s": 1.02e-3, "comm_s": 5e-5, "exposed_s": 1e-5,
            "hfu": 0.4, "comm_efficiency": 0.8, "precision": "fp32"}


@pytest.mark.parametrize("speedup, words, tone", [
    (2.1, "ran 2.10× as fast as one here, at or above the ideal 2×", "good"),
    (1.9, "ran 1.90× as fast as one here, near the ideal 2×", "good"),
    (1.5, "ran 1.50× as fast as one here, 75% of the ideal 2×", "mixed"),
    (1.0, "about as fast as one here (1.00×)", "bad"),
    (0.7, "slower than one here (0.70×)", "bad"),
    (None, "No speedup on 2 ranks was measured here", "mixed")])
def test_the_strong_scaling_verdict_sets_the_planner_beside_the_run(speedup, words, tone):
    rows = [{"world_size": 1, "speedup": 1.0}, {"world_size": 2, "speedup": speedup}]
    headline, details, chosen = verdicts.strong_verdict(rows, EXPECTED, "cpu", notes=["2 cores"])
    assert words in headline and chosen == tone
    assert "the planner expects 1.97× on 2× H100-80GB with NVLink 4 (not measured)" in headline
    assert details.startswith("2 cores") and "40% of the GPU's fp32 peak" in details
    assert "one-thread CPU process" in details
    on_gpus = verdicts.strong_verdict(rows, EXPECTED, "cuda:0")[1]
    assert "CPU process" not in on_gpus


def test_the_replica_verdict_and_memory_table():
    held = lambda p: {"mem_by_category": {"params": [p], "grads": [p], "optimizer": [2 * p]},
                      "world_size": 2}
    headline, _, _ = verdicts.replica_verdict(held(1e6), held(1e6))
    assert "held 4.00 MB of model state, as much as one process: a whole copy" in headline
    assert "0.50× the model state" in verdicts.replica_verdict(held(2e6), held(1e6))[0]
    columns, rows = verdicts.memory_table({"single": held(1e6), "ddp": held(1e6)})
    assert rows[1] == ["ddp", "1.00", "1.00", "2.00"] and len(columns) == 4


def test_the_planner_expects_at_most_the_ideal_and_the_figure_says_it_is_not_measured():
    spec = RunSpec(model="gpt", model_size="small", batch_size=64, seq_len=64, steps=8)
    expected = planner_speedup(spec)
    assert 1.0 < expected["speedup"] <= 2.0 and expected["step_many_s"] < expected["step_one_s"]
    assert expected["exposed_s"] <= expected["comm_s"]
    rows = [{"world_size": 1, "speedup": 1.0}, {"world_size": 2, "speedup": 0.89},
            {"world_size": 4, "speedup": None}]
    fig = scaling_figure(rows, expected)
    measured, planned, ideal, one = fig.data
    assert list(measured.y) == [0.89] and planned.name == "expected, planner — not measured"
    assert "(planner, not measured)" in planned.x[0] and planned.marker.pattern.shape == "/"
    assert planned.marker.color == COLOURS["not measured"] != measured.marker.color
    assert list(ideal.y) == [2, 2] and list(one.y) == [1, 1]


def test_the_ring_figure_says_what_it_draws():
    fig = ring_figure(4)
    assert "sends" in fig.layout.title.text
    assert "receives the chunk the rank above it sends (rank 0: rank 3's)" in \
        fig.layout.annotations[0].text
