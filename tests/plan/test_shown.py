"""What the planner shows in a notebook: an estimate's headline (fits or not and why; days and
cost) with its numbers as a table and the other reasons as details; a recommendation's headline
(the note that answers the question) with the rest of its notes as details. Each headline's
wording for every outcome that chooses it."""
import pytest

from gpututor.i18n.shown import NO_MATH
from gpututor.plan.memory import PRESETS
from gpututor.plan.reasons import breakdown, headline
from gpututor.plan.recommend import Config, estimate, recommend

MODEL7, MODEL70 = PRESETS["7b"], PRESETS["70b"]


@pytest.mark.parametrize("model, config, tone, start", [
    (MODEL7, Config("H100-80GB", 8, zero_stage=3, recompute="selective"), "good",
     "Fits: 35.8 GB per GPU of 72.0 GB usable; "),
    (MODEL7, Config("H100-80GB", 8, zero_stage=3), "bad",
     "Does not fit: 119.0 GB per GPU of 72.0 GB usable; the activations (104.7 GB) push it over"),
    (MODEL70, Config("H100-80GB", 1), "bad",
     "Does not fit: "),
    (MODEL70, Config("H100-80GB", 512, "pcie5", zero_stage=1, tp=8, recompute="selective"),
     "mixed", "Fits: "),
])
def test_an_estimates_headline_for_each_outcome(model, config, tone, start):
    est = estimate(model, 1.4e12, config)
    sentence, chosen = headline(est)
    assert chosen == tone and sentence.startswith(start)
    if not est.fits and est.memory["params"] + est.memory["grads"] + est.memory["optimizer"] > \
            est.usable_bytes:
        assert "the model states alone" in sentence
    if est.fits:
        assert f"{est.days:,.1f} days, $" in sentence
        assert ("link-bound" in sentence) == est.link_bound


def test_an_estimate_shows_its_headline_its_numbers_and_its_reasons_once(capsys):
    est = estimate(MODEL7, 140e9, Config("H100-80GB", 8, zero_stage=3))
    columns, rows = breakdown(est)
    assert columns[0] == "parameters GB" and columns[-1] == "step s"
    assert len(rows[0]) == len(columns)
    est.show()
    out = capsys.readouterr().out
    assert out.startswith("Does not fit: 119.0 GB per GPU")
    assert "assumed: 40% of peak" in out and "why it does not fit" in out
    assert "does not fit in memory: per GPU" not in out   # the table says it, not a sentence
    piped = estimate(MODEL70, 1.4e12, Config("H100-80GB", 512, zero_stage=1, pp=4, tp=8))
    assert "pipeline bubble s" in breakdown(piped)[0]


def test_a_recommendations_headline_is_the_note_that_answers_it():
    rec7 = recommend(MODEL7, 140e9, links=("nvlink4",), max_gpus=64, deadline_days=30,
                     budget=60_000)
    assert rec7.tone == "good" and rec7.headline.startswith(
        "the smallest cluster that meets the deadline and budget: 8x H100-80GB")
    late = recommend(MODEL7, 140e9, links=("nvlink4",), max_gpus=8, deadline_days=1)
    assert late.tone == "bad" and late.headline.startswith("no configuration meets the deadline:")
    deadline = recommend(MODEL7, 140e9, links=("nvlink4",), max_gpus=64, deadline_days=30)
    assert deadline.headline.startswith("the smallest cluster that meets the deadline: 8x")
    free = recommend(MODEL7, 140e9, links=("nvlink4",), max_gpus=8)
    assert free.headline.startswith("the smallest cluster that fits: 2x H100-80GB")
    none = recommend(MODEL70, 1.4e12, links=("nvlink4",), max_gpus=8)
    assert none.tone == "bad" and none.headline.startswith("nothing tried fits in memory")
    for rec in (rec7, late, deadline, free, none):
        assert rec.headline in rec.notes


def test_one_gpu_enough_is_the_headline_of_a_small_model():
    from gpututor.plan.memory import transformer_for_params
    rec = recommend(transformer_for_params(125e6, seq_len=1024), 2.5e9,
                    gpus=("A100-80GB", "H100-80GB"), max_gpus=8, budget=50, deadline_days=2)
    assert rec.one_gpu_enough and rec.tone == "good"
    assert rec.headline.startswith("one GPU is enough: 1x H100-80GB")


def test_a_recommendation_shows_its_headline_once_and_counts_what_it_left_out(capsys):
    rec = recommend(MODEL7, 140e9, links=("nvlink4",), max_gpus=64, deadline_days=30,
                    budget=60_000)
    rec.show(top=3)
    out = capsys.readouterr().out
    assert out.count("smallest cluster") == 1 and out.startswith("The smallest cluster")
    assert "1 GPU count and link where none fits is left out" in out   # one, said once
    rec.show(top=3, notes=False)                                         # lesson 00's call
    out = capsys.readouterr().out
    assert out.startswith("#  configuration") and "smallest cluster" not in out
    assert "(1 GPU count and link where no layout fits is left out" in rec.table()


def test_the_planner_widgets_html_keeps_its_dollars_from_mathjax():
    from gpututor.lessons.choosing_hardware.figures import PlannerWidget
    w = PlannerWidget(params=7e9, tokens=140e9, count=64, budget=60_000, deadline_days=30)
    html = w.static_html()
    assert "$" in html and html.startswith(f"<div class='{NO_MATH}'>")
    assert f"<div class='{NO_MATH}'><p><b>" in w.output.value
