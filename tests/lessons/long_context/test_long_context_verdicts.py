"""Lesson 10's verdicts choose their words from the numbers they are given: one test per branch,
numbers fed by hand, nothing launched."""
from __future__ import annotations

import pytest

from gpututor.catalog import get_gpu, get_link
from gpututor.i18n import set_language, tr
from gpututor.plan.time import step_time
from gpututor.lessons.long_context.planning import (block_verdict, contiguous_imbalance,
                                                    layouts_table, layouts_verdict, plan_layouts,
                                                    split_cost_verdict)
from gpututor.lessons.long_context.verdicts import (growth_verdict, losses_verdict,
                                                    ring_check_verdict, runs_table, slowdown_rows,
                                                    slowdown_table, slowdown_verdict,
                                                    split_speed_verdict, step_spread,
                                                    torch_cp_outcome, tp_cp_table, tp_cp_verdict)
from gpututor.plan.memory import Transformer

LENGTHS = (64, 128, 256)


def by(one: tuple, cp: tuple) -> dict:
    return {**{("one process", T): b for T, b in zip(LENGTHS, one)},
            **{("cp=2, per rank", T): b for T, b in zip(LENGTHS, cp)}}


@pytest.mark.parametrize("one, cp, words, tone", [
    ((20e6, 43e6, 104e6), (9e6, 18.6e6, 37.3e6),
     ("x2.42, faster than the sequence", "x2.01, in step with the sequence"), "good"),
    ((20e6, 40e6, 80e6), (10e6, 20e6, 40e6),
     ("x2.00, in step with the sequence", "x2.00, in step with the sequence"), "mixed"),
    ((20e6, 40e6, 60e6), (10e6, 20e6, 30e6),
     ("x1.50, slower than the sequence", "x1.50, slower than the sequence"), "mixed"),
])
def test_the_growth_verdict_reads_each_layouts_pace(one, cp, words, tone):
    headline, details, got = growth_verdict(by(one, cp), LENGTHS)
    assert all(w in headline for w in words) and got == tone, headline
    assert "T = 256" in details and "x4 its square" in details


def test_the_ring_check_says_equal_or_how_far_apart():
    headline, details, tone = ring_check_verdict({2: 1.8e-15, 4: 2.7e-15})
    assert "On 2 and 4 ranks, every rank's output" in headline and "2.7e-15" in headline
    assert tone == "good" and "4 ranks: largest difference 2.7e-15" in details
    headline, _, tone = ring_check_verdict({2: 1e-15, 4: 3e-9})
    assert "differs from full attention by up to 3.0e-09" in headline and tone == "bad"


def test_the_slowdown_table_and_verdict_come_from_the_code():
    rows = slowdown_rows(256, (2, 4, 8))
    assert [r["contiguous_computed"] for r in rows] == pytest.approx([4 / 3, 1.6, 16 / 9])
    columns, cells = slowdown_table(rows)
    assert len(columns) == 5 and cells[0] == [2, "1.33", "1.00", "1.50", "1.00"]
    headline, _, tone = slowdown_verdict(rows)
    assert "zig-zag keeps this package's ring at the time of evenly shared work" in headline
    assert "x1.33 to x1.78" in headline and tone == "good"
    unbalanced = [dict(r, zigzag_computed=1.2) for r in rows]
    headline, _, tone = slowdown_verdict(unbalanced)
    assert "up to x1.20" in headline and tone == "mixed"


def summary(losses=(3.0, 2.9), step=0.150, sent=20e6, acts=37e6, params=3.3e6, tokens=1e4):
    return {"losses": list(losses), "final_loss": losses[-1], "tokens_per_s": tokens,
            "step_time_s": step, "comm_bytes_per_step": sent, "comm_wire_bytes_per_step": sent,
            "mem_by_category": {"activations": [acts, acts], "params": [params, params]}}


def test_the_losses_verdict_holds_runs_to_the_reference():
    same = {"one process": summary(), "cp=2": summary(losses=(3.0, 2.9 * (1 + 5e-5)))}
    headline, details, tone = losses_verdict(same, "one process")
    assert "Every run had one process's loss at every step" in headline and tone == "good"
    assert "largest relative difference 5e-05" in details
    apart = {"one process": summary(), "cp=2": summary(losses=(3.0, 2.95))}
    assert losses_verdict(apart, "one process")[2] == "bad"


def test_a_run_table_says_not_measured_for_none():
    columns, rows = runs_table({"one process": summary(sent=None, tokens=None)})
    assert rows[0][2] == tr("not measured") and rows[0][3] == tr("not measured")
    assert columns[3] == "sent per step (MB)"


EXPECTED = {"ratio": 1.07, "attention_share": 0.22, "attention_ratio": 1.33}


FASTER, SLOWER, SAME = ("Zig-zag's steps were faster", "good"), \
    ("Zig-zag's steps were slower", "bad"), ("about the same time here", "mixed")


@pytest.mark.parametrize("zigzag, contiguous, times_z, times_c, outcome", [
    # 146 against 158 ms, middle halves 5 ms wide: 12 ms apart, outside the noise
    (0.146, 0.158, [0.140, 0.146, 0.150], [0.150, 0.158, 0.160], FASTER),
    # 348 against 155 ms: slower, well outside the noise
    (0.348, 0.155, [0.340, 0.348, 0.350], [0.150, 0.155, 0.160], SLOWER),
    # 157 against 127 ms, but the middle half of one run's steps spreads over 50 ms
    (0.157, 0.127, [0.100, 0.130, 0.157, 0.180, 0.210], [0.122, 0.127, 0.138], SAME),
    # one step slowed by the machine does not widen the band: 146 against 158 ms is faster
    (0.146, 0.158, [0.146] * 6 + [0.500], [0.158] * 7, FASTER),
    # steady machine, 2 % apart: within the 5 % floor
    (0.100, 0.102, [0.100, 0.100, 0.100], [0.102, 0.102, 0.102], SAME),
])
def test_the_split_verdict_weighs_the_difference_against_the_noise(zigzag, contiguous, times_z,
                                                                   times_c, outcome):
    words, tone = outcome
    headline, details, got = split_speed_verdict(summary(step=zigzag), summary(step=contiguous),
                                                 times_z, times_c, EXPECTED)
    assert words in headline and got == tone, headline
    assert "FLOPs predict x1.07" in headline
    assert "the two cp runs sent the same bytes per step" in details


def test_the_spread_is_the_middle_half_of_the_steps():
    assert step_spread([0.1, 0.2, 0.3, 0.4, 0.5]) == pytest.approx(0.2)
    assert step_spread([0.1] * 6 + [9.0]) == 0 and step_spread([0.1]) == 0


def test_the_split_verdict_without_steady_steps_compares_nothing():
    headline, details, tone = split_speed_verdict(summary(step=None), summary(), [], [0.1],
                                                  EXPECTED)
    assert "no steady step" in headline and tone == "mixed"
    different = split_speed_verdict(summary(sent=20e6), summary(sent=21e6), [0.15], [0.15],
                                    EXPECTED)[1]
    assert "sent different bytes per step" in different


@pytest.mark.parametrize("cp_acts, words, tone", [
    (37e6, "cp=2 kept fewer activations than tp=2", "good"),
    (80e6, "cp=2 kept more activations than tp=2", "bad"),
    (61e6, "cp=2 and tp=2 kept about as many activations", "mixed"),
])
def test_the_tp_cp_verdict_compares_rank_zeros_activations(cp_acts, words, tone):
    tp, cp = summary(acts=62e6, params=1.77e6), summary(acts=cp_acts, params=3.35e6)
    headline, details, got = tp_cp_verdict(tp, cp)
    assert words in headline and got == tone, headline
    assert "3.35 MB against 1.77 MB" in details and "a cp rank holds every weight whole" in details
    assert tp_cp_table({"tp=2": tp, "cp=2": cp})[1][1][1] == "3.35"


def test_the_tp_cp_verdict_without_activations():
    assert "did not measure" in tp_cp_verdict(summary(acts=None), summary())[0]


CPU_OP = "aten._scaled_dot_product_flash_attention_for_cpu.default"
RING = ["aten._scaled_dot_product_flash_attention.default",
        "aten._scaled_dot_product_efficient_attention.default"]


def cp_record(**fields):
    return {"ran": False, "error": f"NotImplementedError: Operator {CPU_OP} does not have a "
            "sharding strategy registered.", "sdpa_ops": [CPU_OP], "ring_ops": RING,
            "rotate_method": "ALL_GATHER", "device": "cpu", "max_difference": None, **fields}


def test_torch_cp_that_has_no_rule_for_this_devices_operator_is_a_note():
    note = torch_cp_outcome(cp_record())
    assert isinstance(note, str)
    assert note.startswith("torch's context_parallel is not available on these CPU ranks")
    assert "_scaled_dot_product_flash_attention_for_cpu here" in note and "aten." not in note
    assert "handles only _scaled_dot_product_flash_attention, " in note
    assert "(it raised NotImplementedError)" in note and "runs on any device" in note


def test_torch_cp_that_failed_otherwise_names_the_error():
    note = torch_cp_outcome(cp_record(ring_ops=None, error="RuntimeError: something else",
                                      rotate_method=None))
    assert "did not run on these CPU ranks: RuntimeError: something else" in note
    assert "not known" in note


@pytest.mark.parametrize("difference, words, tone", [
    (1e-7, "ran on these GPU ranks and equals full attention within 1.0e-07", "good"),
    (1e-2, "ran on these GPU ranks but differs from full attention by 1.0e-02", "bad"),
])
def test_torch_cp_that_ran_is_a_verdict(difference, words, tone):
    record = cp_record(ran=True, error="", device="cuda", max_difference=difference,
                       sdpa_ops=RING[:1])
    headline, details, got = torch_cp_outcome(record)
    assert words in headline and got == tone
    assert "SDPA ran _scaled_dot_product_flash_attention;" in details


LLAMA = Transformer(32, 4096, 32, 32000, 131072, 6.74e9, "7B at 128k")
H100, NVLINK = get_gpu("H100-80GB"), get_link("nvlink4")


def plan(name, fits, full_fits, step=13.7, full_step=14.6):
    return {"layout": name,
            "selective": {"total": 90e9, "activations": 75e9, "step_s": step, "comm_s": 0.7,
                          "fits": fits},
            "full": {"total": 23e9, "activations": 8e9, "step_s": full_step, "comm_s": 0.7,
                     "fits": full_fits}}


def test_the_planner_rows_are_the_formulas():
    rows = plan_layouts(LLAMA, {"tp=8": dict(tp=8), "cp=8": dict(cp=8, zero_stage=3)}, 8, H100,
                        NVLINK)
    assert [r["selective"]["fits"] for r in rows] == [False, False]
    assert all(r["full"]["fits"] for r in rows)
    columns, cells = layouts_table(rows)
    assert len(cells[0]) == len(columns) and cells[0][5] == "no" and cells[0][6] != "-"
    # the table prices causal attention, as block_verdict does: its rows are step_time's with
    # causal=True (half the s×s square: a shorter step, and less attention to hide the ring)
    def priced(model, causal, **degrees):
        return step_time(model, model.seq_len, 8, H100.peak("bf16"), recompute="selective",
                         tp_link=NVLINK, cp_link=NVLINK, dp_link=NVLINK, causal=causal, **degrees)
    causal, full_square = (priced(LLAMA, c, cp=8, zero_stage=3) for c in (True, False))
    assert rows[1]["selective"]["step_s"] == pytest.approx(causal["step_s"])
    assert causal["step_s"] < 0.6 * full_square["step_s"]
    assert rows[0]["selective"]["step_s"] == pytest.approx(priced(LLAMA, True, tp=8)["step_s"])
    # at 16k tokens a cp=8 block (2,048) is below the causal bound: the ring shows, where
    # non-causal pricing would have hidden it all
    short = Transformer(32, 4096, 32, 32000, 16384, 6.74e9, "7B at 16k")
    row = plan_layouts(short, {"cp=8": dict(cp=8, zero_stage=3)}, 8, H100, NVLINK)[0]
    causal, full_square = (priced(short, c, cp=8, zero_stage=3) for c in (True, False))
    assert causal["cp_exposed_s"] > 0
    assert row["selective"]["comm_s"] == pytest.approx(causal["cp_exposed_s"])
    assert full_square["cp_exposed_s"] == 0


@pytest.mark.parametrize("rows, words, tone", [
    ([plan("a", True, True, 10), plan("b", True, True, 9)], "Every layout fits in 72 GB per GPU "
     "with selective recomputation; the fastest is b, 9.00 s", "good"),
    ([plan("a", False, True, full_step=14.6), plan("b", False, True, full_step=13.6)],
     "No layout fits in 72 GB per GPU with selective recomputation; with full recomputation the "
     "fastest that fits is b, 13.60 s", "mixed"),
    ([plan("a", True, True, 15), plan("b", False, True, full_step=13.6)],
     "1 of 2 layouts fit in 72 GB per GPU with selective recomputation; the fastest plan that "
     "fits is b with full recomputation, 13.60 s", "good"),
    ([plan("a", False, False), plan("b", False, False)], "No layout fits in 72 GB per GPU, even "
     "with full recomputation", "bad"),
])
def test_the_layouts_verdict_names_the_fastest_plan_that_fits(rows, words, tone):
    headline, details, got = layouts_verdict(rows, H100)
    assert words in headline and got == tone, headline
    assert "90%" in details


def test_the_block_verdict_sets_the_block_against_f_over_b():
    """F and B are the table's: 40 % of the H100's peak, 80 % of NVLink's bandwidth, so F/B is
    half of what it is at peak and full bandwidth (2,199 tokens, given in the details)."""
    headline, details, tone = block_verdict(131072, 8, H100, NVLINK)
    assert "block of 16,384 tokens is long enough" in headline and "2,199" in headline
    assert tone == "good" and "1,099 tokens (2,199 at peak and full bandwidth)" in details
    assert "40% of the GPU's peak, 80% of the link's bandwidth" in details
    headline, _, tone = block_verdict(16384, 8, H100, NVLINK)
    assert "block of 2,048 tokens is too short" in headline and tone == "bad"


@pytest.mark.parametrize("seq_len", [16384, 24576, 32768, 131072])
def test_the_block_verdict_agrees_with_the_tables_exposed_ring(seq_len):
    """Where the bound says a cp=8 block is too short, the table's step exposes part of the
    ring; where it says long enough, none (the examiner's 24k and 32k tokens among them)."""
    model = Transformer(32, 4096, 32, 32000, seq_len, 6.74e9, "7B")
    row = plan_layouts(model, {"cp=8": dict(cp=8, zero_stage=3)}, 8, H100, NVLINK)[0]
    tone = block_verdict(seq_len, 8, H100, NVLINK)[2]
    assert (row["selective"]["comm_s"] > 0) == (tone == "bad")


def test_a_contiguous_split_costs_the_last_rank_2_minus_1_over_cp():
    for cp in (2, 4, 8):
        assert contiguous_imbalance(2048, cp) == pytest.approx(2 - 1 / cp, rel=1e-3)
    layouts = {"tp=8": dict(tp=8), "tp=8 + sequence parallel": dict(tp=8, sequence_parallel=True),
               "cp=8, ZeRO-3 over the cp ranks": dict(cp=8, zero_stage=3)}
    rows = plan_layouts(LLAMA, layouts, 8, H100, NVLINK)
    assert all(r["cp"] == (8 if r["layout"].startswith("cp") else 1) for r in rows)
    cp_full = rows[2]["full"]
    # the zig-zag table: cp=8 with full recomputation is the fastest plan that fits
    assert "the fastest that fits is cp=8" in layouts_verdict(rows, H100)[0]
    headline, details, tone = split_cost_verdict(rows, LLAMA)
    contiguous = cp_full["step_s"] + (contiguous_imbalance(LLAMA.seq_len, 8) - 1) \
        * cp_full["attention_s"]
    assert contiguous > rows[0]["full"]["step_s"] > cp_full["step_s"]
    assert (f"cp=8, ZeRO-3 over the cp ranks would take about {contiguous:.2f} s a step instead "
            f"of {cp_full['step_s']:.2f} s") in headline
    assert "the fastest plan that fits would then be tp=8" in headline and tone == "bad"
    assert "1.875 times the mean rank's" in details and "full recomputation" in details
    # without a cp layout there is nothing to price; where the fastest stays, it says so
    assert split_cost_verdict(rows[:2], LLAMA)[0] == "No layout here splits the sequence over ranks"
    fast = [{**r, "full": {**r["full"], "step_s": 99.0}} if r["cp"] == 1 else r for r in rows]
    headline, _, tone = split_cost_verdict(fast, LLAMA)
    assert "would then be" not in headline and tone == "mixed"


def test_the_verdicts_speak_chinese():
    set_language("zh")
    try:
        note = torch_cp_outcome(cp_record())
        headline = split_speed_verdict(summary(step=0.1), summary(step=0.102), [0.1], [0.102],
                                       EXPECTED)[0]
    finally:
        set_language("en")
    assert "torch" in note and "CPU" in note and "可" in note
    assert not headline.startswith("Zig")
