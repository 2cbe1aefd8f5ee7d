"""MFU and HFU named and computed apart; causal attention; the planner's assumptions named in
every estimate and changeable; every estimate says whether it fits; V100 and T4 plan fp16."""
import json

import pytest

from gpututor import formulas
from gpututor.plan import time as plan_time
from gpututor.plan.memory import PRESETS
from gpututor.plan.recommend import ASSUMPTIONS, Config, estimate, recommend
from gpututor.runtime.cli import main as cli_main

MODEL = PRESETS["7b"]


def test_causal_attention_computes_half_the_square():
    full = formulas.attention_flops_per_token(32, 4096, 4096)
    assert formulas.attention_flops_per_token(32, 4096, 4096, causal=True) == full / 2
    n = 6.74e9
    assert formulas.training_flops_per_token(n, 32, 4096, 4096, causal=True) == \
        pytest.approx(6 * n + 3 * full / 2)


def test_one_gpu_without_waits_reaches_its_hfu_and_recomputation_lowers_only_mfu():
    base = dict(model=MODEL, tokens_per_step=2 ** 20, n_gpus=1, peak_flops=1e15, hfu=0.4)
    plain = plan_time.step_time(**base)
    assert plain["hfu"] == pytest.approx(0.4) and plain["mfu"] == pytest.approx(0.4)
    full = plan_time.step_time(recompute="full", **base)
    assert full["hfu"] == pytest.approx(0.4)          # the GPU is as busy ...
    assert full["mfu"] == pytest.approx(0.4 * 3 / 4)  # ... on 4/3 the model's work
    selective = plan_time.step_time(recompute="selective", **base)
    assert full["mfu"] < selective["mfu"] < plain["mfu"]


def test_a_step_that_waits_on_links_has_an_mfu_below_its_assumed_hfu():
    e = estimate(PRESETS["70b"], 1.4e12, Config("H100-80GB", 512, "pcie5", zero_stage=1, tp=8))
    assert e.step["tp_comm_s"] > 0
    assert e.step["mfu"] == pytest.approx(e.step["model_flops_per_gpu"]
                                          / (e.step["step_s"] * 989.5e12))
    assert e.step["hfu"] < 0.4


def test_every_estimate_names_its_assumptions_and_each_changes_the_answer():
    config = Config("H100-80GB", 16, "nvlink4", zero_stage=1, tp=2)
    base = estimate(MODEL, 140e9, config)
    assert set(base.to_dict()["assumptions"]) == set(ASSUMPTIONS)
    assert any(r.startswith("assumed: 40% of peak") for r in base.reasons)
    changed = {"hfu": dict(hfu=0.3), "tokens_per_step": dict(tokens_per_step=2 ** 22),
               "comm_efficiency": dict(comm_efficiency=0.2), "overlap": dict(overlap=0.0),
               "causal_attention": dict(causal_attention=False)}
    for name, kwargs in changed.items():
        other = estimate(MODEL, 140e9, config, **kwargs)
        assert other.assumptions[name] == next(iter(kwargs.values()))
        assert other.total_s != base.total_s, name
    no_sp = estimate(MODEL, 140e9, config, sequence_parallel=False)
    assert no_sp.memory["activations"] > base.memory["activations"]


def test_an_estimate_says_whether_it_fits_in_its_first_words():
    fits = estimate(MODEL, 140e9, Config("H100-80GB", 8, zero_stage=3, recompute="full"))
    too_big = estimate(MODEL, 140e9, Config("H100-80GB", 1))
    assert fits.fits and fits.reasons[0].startswith("fits in memory")
    assert not too_big.fits and too_big.reasons[0].startswith("does not fit in memory")
    assert any("if it fitted" in r for r in too_big.reasons)


@pytest.mark.parametrize("gpu", ["V100-32GB", "T4-16GB"])
def test_cli_recommend_plans_fp16_on_gpus_without_bf16_and_every_estimate_says_it_fits(
        gpu, capsys):
    assert cli_main(["plan", "--params", "7e9", "--gpu", gpu, "--recommend"]) == 0
    text = capsys.readouterr().out
    assert f"{gpu} has no bf16: planned in fp16 with loss scaling" in text
    assert cli_main(["plan", "--params", "7e9", "--gpu", gpu, "--recommend", "--gpus", "64",
                     "--json", "-"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["ranked"] and all(e["fits"] is True and e["precision"] == "fp16"
                                     for e in payload["ranked"])
    assert payload["rejected"] and all(e["fits"] is False for e in payload["rejected"])


def test_recommend_table_has_a_fits_column_and_counts_what_it_left_out():
    rec = recommend(MODEL, 140e9, gpus=("A100-80GB",), links=("nvlink3",), max_gpus=16)
    lines = rec.table().splitlines()
    assert "fits" in lines[0].split() and all(" yes " in line for line in lines[1:-1])
    assert "left out" in lines[-1]


def test_t4_has_a_sourced_example_price_and_v100_is_not_priced_never_zero(capsys):
    from gpututor import catalog
    price, source = catalog.price_of(catalog.get_gpu("T4-16GB"))
    assert price == catalog.EXAMPLE_PRICES["T4-16GB"] and "computeprices.com" in source
    assert "2026" in source
    price, source = catalog.price_of(catalog.get_gpu("V100-32GB"))
    assert price is None and source.startswith("not priced")
    e = estimate(MODEL, 140e9, Config("V100-32GB", 16, "nvlink2", zero_stage=3, tp=2))
    assert e.cost is None and e.to_dict()["cost"]["amount"] is None
    assert any(r.startswith("cost: not priced") for r in e.reasons)
    assert "not priced" in recommend(MODEL, 140e9, gpus=("V100-32GB",), max_gpus=16).table()


def test_the_gpu_choice_figure_draws_priced_types_as_cost_against_days_and_unpriced_by_days():
    from gpututor.lessons.choosing_hardware.figures import gpu_choice_figure
    from gpututor.lessons.choosing_hardware.plan_report import published_table_text
    from gpututor.plan.published import published_table
    rec = recommend(MODEL, 140e9, gpus=("V100-32GB", "A100-80GB", "H100-80GB"), max_gpus=64,
                    deadline_days=30, budget=60_000)
    assert set(rec.best_per_gpu()) == {"V100-32GB", "A100-80GB", "H100-80GB"}
    fig = gpu_choice_figure(rec, deadline_days=30, budget=60_000)
    names = [t.name for t in fig.data]
    assert "A100-80GB: best layout per GPU count" in names
    assert "H100-80GB: the best" in names
    unpriced = [t for t in fig.data if t.name == "V100-32GB: not priced (days only)"]
    assert unpriced and all(t.x[0] == t.x[1] for t in unpriced)   # vertical: cost unknown
    a100 = next(t for t in fig.data if t.name == "A100-80GB: best layout per GPU count")
    assert all(y is not None and y > 0 for y in a100.y)
    text = published_table_text(published_table())
    assert "Llama 2 70B" in text.splitlines()[3] and "5,762" in text
    fits = {row["run"]: row["fits"] for row in published_table()}   # each row says whether it fits
    for line in text.splitlines()[1:]:
        run = next(name for name in fits if line.startswith(name))
        assert line.split()[-1] == {True: "yes", False: "no", None: "-"}[fits[run]], line
