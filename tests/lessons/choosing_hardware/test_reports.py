"""Lesson 08's verdicts and tables: each verdict's wording for every outcome its code can choose,
fed numbers (nothing launched); the tables' headers carry their units and are not repeated."""
from types import SimpleNamespace

import pytest

from gpututor.catalog import GB
from gpututor.lessons.choosing_hardware.calibration_report import (calibration_verdict,
                                                                   device_line)
from gpututor.lessons.choosing_hardware.figures import days_text, log_ticks
from gpututor.lessons.choosing_hardware.plan_report import (
    gpu_choice_rows, gpu_choice_verdict, link_rows, link_verdict, published_verdict,
    recompute_memory, recompute_rows, recompute_verdict, torchtitan_memory_verdict,
    zero_stage_rows)
from gpututor.plan.memory import PRESETS
from gpututor.plan.recommend import recommend


def errors(peak, median=0.26, largest=0.65):
    return {"max_peak_error": peak, "median_step_error": median, "max_step_error": largest}


def test_the_calibration_verdict_says_whether_memory_met_its_target():
    headline, tone = calibration_verdict(errors(0.038), 14, 12)
    assert tone == "good" and headline.startswith("Peak memory predicted within 3.8% on all 14 "
                                                  "runs, inside the 10% target")
    assert "step time off by 26% at the median, 65% at most over 12 predicted runs" in headline
    headline, tone = calibration_verdict(errors(0.124), 14, 12)
    assert tone == "bad" and "errors up to 12.4% over 14 runs, outside the 10% target" in headline
    headline, tone = calibration_verdict(errors(None), 2, 0)
    assert tone == "mixed" and headline.startswith("Peak memory: not measured")
    headline, _ = calibration_verdict(errors(0.05, None, None), 2, 0)   # only the fitted runs
    assert "step time" not in headline


def test_the_calibration_says_how_its_collectives_ran_from_the_device():
    assert "gloo runs each collective blocking" in device_line("cpu", 2)
    assert "NCCL overlaps data parallel's buckets" in device_line("cuda:0", 2)


def test_the_calibration_table_names_each_column_once_with_its_unit():
    from gpututor.lessons.choosing_hardware.calibrate import calibration_rows
    row = {"run": "ddp", "world_size": 2, "measured_peak": 2e6, "predicted_peak": 2.1e6,
           "peak_error": 0.05, "formula_peak": 1.9e6, "formula_error": -0.05,
           "measured_step_s": 0.01, "predicted_step_s": 0.012, "step_error": 0.2, "fitted": True}
    columns, rows = calibration_rows(SimpleNamespace(rows=[row]))
    assert len(set(columns)) == len(columns)
    assert columns[2:] == ["measured peak MB", "predicted MB", "predicted error", "formula MB",
                           "formula error", "measured step ms", "predicted ms",
                           "step error (* fitted)"]
    assert rows[0][-1] == "+20.0%*"


def test_the_zero_table_has_the_papers_figures():
    columns, rows = zero_stage_rows(7.5e9, 64)
    assert columns[-1] == "total GB per GPU"
    assert [r[-1] for r in rows] == ["120.00", "31.41", "16.64", "1.88"]   # ZeRO paper, Fig. 1


def memory(**totals):
    """A recompute_memory-shaped dict whose plans have the given totals (GB)."""
    plans = {"none": ("none", "eager"), "selective": ("selective", "eager"),
             "full": ("full", "eager"), "fused": ("none", "fused")}
    out = {}
    for name, plan in plans.items():
        total = totals.get(name, 50) * GB
        out[plan] = {"params": 1 * GB, "grads": 1 * GB, "optimizer": 2 * GB,
                     "activations": total - 4 * GB, "total": total}
    return out


@pytest.mark.parametrize("totals, tone, words", [
    (dict(none=60, selective=30, full=20), "good", "Fits without recomputation: 60.0 GB"),
    (dict(none=119, selective=35.8, full=19.2), "mixed",
     "Without recomputation it does not fit: 119.0 GB per GPU, over the 72 GB usable on an "
     "H100-80GB; selective recomputation brings it to 35.8 GB"),
    (dict(none=119, selective=90, full=40), "mixed", "full recomputation brings it to 40.0 GB"),
    (dict(none=300, selective=200, full=100), "bad",
     "Does not fit even with full recomputation: 100.0 GB per GPU"),
])
def test_the_recompute_verdict_names_the_least_recomputation_that_fits(totals, tone, words):
    headline, details, chosen = recompute_verdict(memory(**totals), 72e9, "H100-80GB")
    assert chosen == tone and words in headline and "attention='fused'" in details


def test_the_recompute_table_of_the_lessons_7b_agrees_with_its_verdict():
    mem = recompute_memory(PRESETS["7b"], zero_stage=3, dp=8)
    columns, rows = recompute_rows(mem, 72e9)
    assert columns[-1] == "fits in 72 GB" and [r[-1] for r in rows][:1] == ["no"]
    headline, _, _ = recompute_verdict(mem, 72e9, "H100-80GB")
    assert headline.startswith("Without recomputation it does not fit")


def fake_estimate(gpu="H100-80GB", count=8, days=20.0, cost=1000.0, meets=True, step=1.0,
                  waits=0.2, bound=False, total=50 * GB):
    config = SimpleNamespace(gpu=gpu, count=count, shown=f"{count}x {gpu}")
    return SimpleNamespace(config=config, days=days, cost=cost, meets=meets, link_bound=bound,
                           fits=True, memory={"total": total},
                           step={"step_s": step, "compute_s": step - waits, "tp_comm_s": waits,
                                 "pp_comm_s": 0.0, "dp_exposed_s": 0.0})


def fake_recommendation(*ranked, headline="nothing tried fits in memory"):
    best = {}
    for e in ranked:
        best.setdefault(e.config.gpu, e)
    return SimpleNamespace(ranked=list(ranked), notes=["a note", headline], headline=headline,
                           best_per_gpu=lambda: best)


def test_the_gpu_choice_verdict_for_each_outcome():
    cheap = fake_estimate(cost=13_186.0)
    headline, details, tone = gpu_choice_verdict(fake_recommendation(cheap))
    assert tone == "good" and headline.startswith("Cheapest (then fastest) that meets the "
                                                  "deadline and budget: 8x H100-80GB (20.0 days, "
                                                  "$13,186)")
    assert "a note" in details
    unpriced = fake_estimate(gpu="V100-32GB", cost=None)
    headline, _, tone = gpu_choice_verdict(fake_recommendation(unpriced))
    assert tone == "good" and headline.startswith("The fastest that meets the deadline") \
        and "not priced" in headline
    late = fake_estimate(meets=False)
    headline, _, tone = gpu_choice_verdict(fake_recommendation(late))
    assert tone == "bad" and headline.startswith("No configuration meets the deadline and budget")
    headline, _, tone = gpu_choice_verdict(fake_recommendation())
    assert tone == "bad" and headline == "nothing tried fits in memory"


def test_the_gpu_choice_table_on_the_lessons_three_gpus():
    rec = recommend(PRESETS["7b"], 140e9, gpus=("V100-32GB", "A100-80GB", "H100-80GB"),
                    max_gpus=64, deadline_days=30, budget=60_000)
    columns, rows = gpu_choice_rows(rec)
    assert columns[4] == "cost $" and {r[0] for r in rows} == {"V100-32GB", "A100-80GB",
                                                               "H100-80GB"}
    v100 = next(r for r in rows if r[0] == "V100-32GB")
    assert v100[4] == "not priced" and v100[5] == "no"     # cannot meet a budget unpriced
    assert all(int(r[1]) >= 2 for r in rows)               # a 7B does not fit on one GPU
    headline, _, tone = gpu_choice_verdict(rec)
    assert tone == "good" and rec.ranked[0].config.shown in headline


def test_the_link_verdict_for_each_outcome():
    fast, slow = fake_estimate(step=2.0, waits=0.5), fake_estimate(step=4.0, waits=2.5, bound=True)
    headline, details, tone = link_verdict({"nvlink4": fast, "pcie5": slow})
    assert tone == "mixed" and headline == ("Over pcie5 the link is the limit: communication is "
                                            "62% of the step, which takes 2.00x as long as over "
                                            "nvlink4")
    assert "link-bound" in details
    quiet = fake_estimate(step=3.0, waits=1.0)
    headline, _, tone = link_verdict({"nvlink4": fast, "pcie5": quiet})
    assert tone == "good" and headline.startswith("Communication stays under half the step on "
                                                  "every link") and "1.50x" in headline
    both = {"nvlink4": fake_estimate(step=2.0, waits=1.2, bound=True), "pcie5": slow}
    headline, _, tone = link_verdict(both)
    assert tone == "bad" and headline.startswith("Every link here is the limit")
    columns, rows = link_rows({"nvlink4": fast, "pcie5": slow})
    assert columns[0] == "link in a node" and rows[1][4] == "2.50"


def published(ratio, measure="GPU-hours", run="Llama 2 7B"):
    return {"run": run, "measure": measure, "ratio": ratio}


def test_the_published_verdict_for_each_outcome():
    rows = [published(1.08), published(1.02, run="Llama 2 13B"),
            published(1.6, "tokens/s/GPU", "torchtitan Llama 3.1 8B")]
    headline, details, tone = published_verdict(rows, 0.8, 1.25)
    assert tone == "good" and headline.startswith("All 2 GPU-hours predictions are within")
    assert "torchtitan Llama 3.1 8B: predicted / published tokens/s/GPU = 1.60" in details
    rows[1] = published(1.31, run="Llama 2 13B")
    headline, _, tone = published_verdict(rows, 0.8, 1.25)
    assert tone == "bad" and headline.startswith("1 of the 2 GPU-hours predictions fall outside")
    assert headline.endswith("Llama 2 13B 1.31")
    rows[0] = published(None)
    headline, _, _ = published_verdict(rows, 0.8, 1.25)
    assert "Llama 2 7B none fits" in headline


@pytest.mark.parametrize("predicted, published, tone, words", [
    (60, 55, "good", "both fit the 72 GB usable of an H100-80GB"),
    (99, 70, "bad", "the published fits the 72 GB usable of an H100-80GB, the prediction does not"),
    (70, 88, "mixed", "the prediction fits the 72 GB usable of an H100-80GB, the published does "
                      "not: torchtitan's GPUs had 96 GB"),
    (99, 88, "mixed", "neither fits the 72 GB usable of an H100-80GB: torchtitan's GPUs had 96 GB"),
])
def test_the_torchtitan_memory_verdict_for_each_outcome(predicted, published, tone, words):
    headline, chosen = torchtitan_memory_verdict(predicted, published, 72, "H100-80GB")
    assert chosen == tone and headline.endswith(words)
    assert headline.startswith(f"Predicted {predicted} GB per GPU against {published} GB "
                               "published (")


def test_log_ticks_sit_on_plotted_values_apart_from_each_other():
    days = [2.86, 5.7, 11.4, 22.7, 45.3, 9.07, 18.1, 36.3, 92.4, 185, 506]
    ticks = log_ticks(days, keep=[30, 2.86, 9.07])
    assert set(ticks) <= set(days) | {30} and {30, 2.86, 9.07} <= set(ticks)
    import math
    gap = math.log10(506 / 2.86) / 8
    assert all(math.log10(b / a) >= gap for a, b in zip(ticks, ticks[1:]))
    assert log_ticks([]) == [] and log_ticks([5.0]) == [5.0]
    assert [days_text(d) for d in (0.125, 2.86, 22.7, 1234.5)] == ["0.12", "2.9", "23", "1,234"]
