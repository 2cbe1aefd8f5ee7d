"""Lesson 03's verdicts (``gpututor.lessons.sharding.verdicts``): every branch, fed numbers, says
what the numbers that select it show; nothing is launched. Also the board's colours: the memory
categories in the palette's colours, the loss curves in others."""
import pytest

from gpututor import RunSpec
from gpututor.lessons.sharding import verdicts
from gpututor.lessons.sharding.figures import LOSSES, ShardingBoard
from gpututor.ui.style import COLOURS

SPEC = RunSpec(model="gpt", model_size="medium", strategy="ddp", world_size=2, batch_size=8,
               seq_len=32, steps=8)


def runs_with(losses: dict) -> dict:
    return {name: {"losses": values} for name, values in losses.items()}


@pytest.mark.parametrize("other, words, tone", [
    ([3.5, 3.2], "exactly ddp's loss at every step", "good"),
    ([3.5, 3.2000041], "to within float32 rounding (at most 4.1e-06)", "good"),
    ([3.5, 3.21], "zero2's loss differed from ddp's by up to 1.0e-02: more than", "bad")])
def test_same_training(other, words, tone):
    headline, details, chosen = verdicts.same_training_verdict(
        runs_with({"ddp": [3.5, 3.2], "zero1": [3.5, 3.2], "zero2": other}))
    assert words in headline and chosen == tone and "over 2 steps" in details


def test_the_formula_leaves_out_counters_and_padding_only():
    explained = verdicts.explained_gap(SPEC, 2)
    # the lesson's runs: ddp's gap was 304 bytes (76 parameter tensors' step counters)
    assert explained >= 304 and explained < 1000
    row = {"label": "ddp", "measured_state": 43.79e6, "formula_total": 43.79e6, "state_gap": 304}
    headline, details, tone = verdicts.state_verdict([row, {**row, "label": "zero1",
                                                            "state_gap": 28}], explained)
    assert "to within 304 bytes" in headline and tone == "good" and "+28 bytes" in details
    headline, _, tone = verdicts.state_verdict([{**row, "state_gap": 5_000_000}], explained)
    assert "ddp's measured model state is +5,000,000 bytes off" in headline and tone == "bad"


def rows_with(peaks: dict) -> list:
    return [{"label": k, "peak": v} for k, v in peaks.items()]


def test_the_peak_verdict():
    headline, details, _ = verdicts.peak_verdict(
        rows_with({"ddp": 56e6, "zero3": 31e6, "fsdp": 33.67e6}), 1.78e6, 0.27e6)
    assert "2.67 MB above zero3's: 1.5× one gathered block (1.78 MB)" in headline
    assert "zero3: peak 31.00 MB = 55% of ddp's" in details
    assert "not above zero3's here (-1.00 MB)" in verdicts.peak_verdict(
        rows_with({"ddp": 56e6, "zero3": 31e6, "fsdp": 30e6}), 1.78e6, 0.27e6)[0]
    headline, details, _ = verdicts.peak_verdict(
        rows_with({"ddp": 56e6, "zero3": 31e6, "fsdp": None}), 1.78e6, 0.27e6)
    assert "not measured" in headline and "fsdp: peak not measured\n" in details


def comm_rows(r1, r2, r3):
    row = {"wire_bytes": 1e7, "comm_s": 0.01, "step_time_s": 0.05}
    return [{**row, "label": "ddp", "vs_baseline": 1.0},
            {**row, "label": "zero1", "vs_baseline": r1}, {**row, "label": "zero2",
                                                           "vs_baseline": r2},
            {**row, "label": "zero3", "vs_baseline": r3},
            {**row, "label": "fsdp", "vs_baseline": None, "wire_bytes": None, "comm_s": None}]


def test_the_comm_verdict():
    headline, details, tone = verdicts.comm_verdict(comm_rows(1.0, 1.0, 1.5))
    assert "zero1 and zero2 sent 1.00× and 1.00× ddp's bytes, zero3 1.50×" in headline
    assert tone == "good" and "fsdp: sent per rank per step not measured" in details
    headline, _, tone = verdicts.comm_verdict(comm_rows(1.0, 1.6, 1.5))
    assert "no more than zero1 (1.00×) and zero2 (1.60×)" in headline and tone == "bad"
    assert "not measured" in verdicts.comm_verdict(comm_rows(None, 1.0, 1.5))[0]


def test_the_bucket_verdict():
    headline, details, tone = verdicts.bucket_verdict({"first": [9], "later": [1, 9]}, "words",
                                                      "gloo")
    assert "holds 90% of the bytes" in headline and "other 10%" in headline
    assert details == "words\ngloo"
    assert "one bucket" in verdicts.bucket_verdict({"first": [9], "later": [9]}, "w", "g")[0]


def test_the_variants_verdict():
    plain = {"final_loss": 3.2440}
    headline, details, tone = verdicts.variants_verdict(plain, {"final_loss": 3.2440},
                                                        {"final_loss": 3.2439})
    assert "exactly as it was; bf16 moved it by -1.0e-04" in headline and tone == "good"
    assert "fsdp bf16: final loss 3.2439" in details
    headline, _, tone = verdicts.variants_verdict(plain, {"final_loss": 3.2442},
                                                  {"final_loss": 3.2439})
    assert "moved plain fsdp's final loss by +2.0e-04, bf16 by -1.0e-04" in headline
    assert tone == "mixed"


def test_the_shard_and_fit_tables_and_verdicts():
    run = lambda n, state: {"world_size": n, "mem_by_category": {
        "params": [state / 4], "grads": [state / 4], "optimizer": [state / 2],
        "activations": [None]}}
    columns, rows = verdicts.shard_table([run(2, 21.9e6), run(4, 10.95e6)], [21.9e6, 10.95e6])
    assert rows == [["2", "21.90", "21.90", "not measured"], ["4", "10.95", "10.95",
                                                             "not measured"]]
    fits = [{"strategy": "ddp", "planned": 65e6, "planned_fits": False, "fits": False,
             "peak": None, "error": "boom", "oom": None},
            {"strategy": "zero1", "planned": 39e6, "planned_fits": True, "fits": False,
             "peak": None, "error": "boom", "oom": None},
            {"strategy": "zero2", "planned": 37e6, "planned_fits": True, "fits": True,
             "peak": 35e6, "error": None}]
    headline, _, tone = verdicts.fit_verdict(fits, 40e6)
    assert "The plan said zero1 would be the first to fit 40 MB per rank, the capped runs zero2" \
        in headline and tone == "mixed"
    assert verdicts.fit_table(fits)[1][2] == ["zero2", "37.00", "fits", "fits, peak 35.0 MB"]
    headline, _, tone = verdicts.fit_verdict(fits[:1] + fits[2:], 40e6)
    assert "zero2 is the first stage to fit 40 MB per rank, by the plan and by the capped runs" \
        in headline and tone == "good"
    headline, _, tone = verdicts.fit_verdict(fits[:2], 40e6)
    assert "No stage fit 40 MB per rank in the capped runs (the plan: zero1)" in headline
    assert tone == "bad"


def test_the_board_draws_memory_in_the_palette_and_losses_in_other_colours():
    board = ShardingBoard({name: SPEC.replace(strategy=name) for name in ("ddp", "zero3")})
    for fig in (board.fig, board.static_figure()):
        losses, bars = fig.data[:2], fig.data[2:6]
        assert [t.marker.color for t in bars] == [COLOURS[c] for c in
                                                  ("params", "grads", "optimizer", "activations")]
        assert [t.line.color for t in losses] == LOSSES[:2]
        assert not set(LOSSES) & {t.marker.color for t in bars}
