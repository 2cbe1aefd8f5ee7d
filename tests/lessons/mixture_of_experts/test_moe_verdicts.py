"""Lesson 11's verdicts and tables choose their words from the numbers they are given: one test
per branch, numbers fed by hand, nothing launched."""
from __future__ import annotations

import pytest
import torch

from gpututor.catalog import get_gpu
from gpututor.i18n import set_language
from gpututor.lessons.mixture_of_experts.load import load_verdict
from gpututor.lessons.mixture_of_experts.verdicts import (busier_shares, capacity_factor_verdict,
                                                          capacity_table, capacity_verdict,
                                                          drift_verdict, ep_table, ep_verdict,
                                                          mixtral_table, mixtral_verdict,
                                                          routing_table)

EXPERTS = torch.tensor([[2, 3], [0, 1], [2, 0], [1, 0], [2, 1], [0, 1]])
GATES = torch.tensor([[0.55, 0.45], [0.54, 0.46], [0.73, 0.27], [0.67, 0.33], [0.68, 0.32],
                      [0.74, 0.26]])
PLACES = torch.tensor([[0, 0], [0, 0], [1, 1], [1, 2], [2, 2], [3, 3]])


def test_the_router_and_capacity_tables_have_a_row_per_token():
    columns, rows = routing_table(EXPERTS, GATES)
    assert columns == ["token", "experts", "gates"] and rows[2] == [2, "2, 0", "0.73, 0.27"]
    columns, rows = capacity_table(EXPERTS, PLACES, 3)
    assert len(columns) == 4 and rows[5] == [5, "0, 1", "3, 3", "DROPPED, DROPPED"]
    assert rows[0][3] == "kept, kept"


def test_the_capacity_verdict_names_the_dropped_slots_or_says_none():
    headline, details, tone = capacity_verdict(PLACES, 3)
    assert "2 of the 12 slots are dropped, their experts' queues being full: token 5" in headline
    assert tone == "mixed"
    two = capacity_verdict(torch.tensor([[0, 3], [1, 1], [3, 0]]), 3)[0]
    assert "2 of the 6 slots are dropped, their experts' queues being full: tokens 0, 2" in two
    assert "3 or more is dropped" in details
    headline, _, tone = capacity_verdict(PLACES, 4)
    assert "With 4 slots per expert, all 12 slots are kept" in headline and tone == "good"


def cf(factor, dropped, loss=3.53, speed=9000.0):
    return {"capacity_factor": factor, "dropped": dropped, "final_loss": loss,
            "tokens_per_s": speed}


@pytest.mark.parametrize("rows, words, tone", [
    ([cf(0.5, 0.699), cf(1.25, 0.255), cf(2.0, 0.0)], "from 69.9% to none", "good"),
    ([cf(2.0, 0.05), cf(0.5, 0.699)], "from 69.9% to 5.0%", "good"),
    ([cf(0.5, 0.1), cf(2.0, 0.1)], "did not lower the slots dropped", "bad"),
])
def test_the_capacity_factor_verdict_reads_the_drops(rows, words, tone):
    headline, details, got = capacity_factor_verdict(rows)
    assert words in headline and got == tone, headline
    assert "capacity factor 0.5:" in details and "final loss 3.5300" in details


def test_the_capacity_factor_details_say_not_measured():
    details = capacity_factor_verdict([cf(0.5, 0.5, speed=None), cf(2.0, 0.0)])[1]
    assert "not measured tokens/s" in details


@pytest.mark.parametrize("same, rel, words, tone", [
    ([True] * 10, [5e-8] * 10, "at all 10 steps; the losses agree within a relative 5e-08", "good"),
    ([True, True, True] + [False] * 7, [5e-8, 0, 3e-8, 1e-6, 3e-5, 1e-4, 1e-5, 8e-5, 1e-6, 4e-4],
     "for the first 3 of 10 steps; after that the relative loss difference grew from at most "
     "5e-08 to 4e-04", "mixed"),
    ([True, True, False], [5e-8, 4e-7, 1e-7], "for the first 2 of 3 steps; after that the losses "
     "still agreed within a relative 4e-07", "mixed"),
    ([False] * 3, [1e-3] * 3, "differently from one rank from the first step", "bad"),
])
def test_the_drift_verdict_counts_the_identical_steps(same, rel, words, tone):
    headline, details, got = drift_verdict(same, rel)
    assert words in headline and got == tone, headline
    assert details.startswith("relative loss difference per step: ")


def summary(step=0.1, world=1, sent=0.0, params=(9.68e6,)):
    return {"step_time_s": step, "world_size": world, "comm_wire_bytes_per_step": sent,
            "mem_by_category": {"params": list(params)}}


SINGLE = summary(step=0.129)


@pytest.mark.parametrize("ep_step, times_one, times_ep, cores, words, tone", [
    (0.089, [0.125, 0.129, 0.131], [0.085, 0.089, 0.092], 2,
     "ep=2's median step was faster than the one rank's, 0.69x its time; ep=2 had 2 cores to "
     "compute on, the one rank one: per core, 1.38x the one rank's time", "good"),
    (0.180, [0.125, 0.129, 0.131], [0.175, 0.180, 0.182], 1,
     "ep=2's median step was slower than the one rank's, 1.40x its time; both ranks shared this "
     "machine's one usable core", "bad"),
    (0.115, [0.100, 0.129, 0.150], [0.110, 0.115, 0.120], 2,
     "ep=2's median step took about as long as the one rank's (0.89x, within these runs' noise "
     "of 25 ms)", "mixed"),
])
def test_the_ep_verdict_weighs_the_ratio_against_the_noise(ep_step, times_one, times_ep, cores,
                                                           words, tone):
    ep = summary(step=ep_step, world=2, sent=4.07e6, params=(5.47e6, 5.47e6))
    headline, details, got = ep_verdict(SINGLE, ep, times_one, times_ep, cores, [0.56, 0.65])
    assert words in headline and got == tone, headline
    assert "56%, 65%" in details and "not made side by side" in details


def test_the_ep_verdict_without_steady_steps():
    headline, _, tone = ep_verdict(summary(step=None), summary(world=2), [], [0.1], 2, [0.5])
    assert "no steady step" in headline and tone == "mixed"


def test_the_ep_table_marks_a_rank_a_run_does_not_have():
    ep = summary(step=0.115, world=2, sent=4.07e6, params=(5.47e6, None))
    columns, rows = ep_table({"one rank": SINGLE, "ep=2": ep})
    assert columns[-1] == "parameters, rank 1 (MB)"
    assert rows[0] == ["one rank", "129", "0.00", "9.68", "-"]
    assert rows[1] == ["ep=2", "115", "4.07", "5.47", "not measured"]


def test_the_busier_rank_share_counts_each_ranks_experts_over_all_layers():
    records = [{"expert_tokens": [[30, 30, 20, 20], [10, 10, 10, 10]]}]
    assert busier_shares(records, 4, 2) == [pytest.approx(80 / 140)]


H100 = get_gpu("H100-80GB")


@pytest.mark.parametrize("totals, words, tone", [
    ((256.9e9, 166.7e9, 99.0e9, 64.0e9), "16 with ep=8, 64.0 GB each, 16 GB left", "good"),
    ((256.9e9, 70e9, 60e9, 64.0e9), "8 with ep=2, 70.0 GB each, 10 GB left", "good"),
    ((256.9e9, 166.7e9, 99.0e9, 90e9), "None of these layouts fits", "bad"),
])
def test_the_mixtral_verdict_names_the_fewest_gpus_that_fit(totals, words, tone):
    rows = [{"gpus": g, "ep": e, "total": t}
            for (g, e), t in zip(((8, 1), (8, 2), (8, 8), (16, 8)), totals)]
    headline, _, got = mixtral_verdict(rows, H100)
    assert words in headline and got == tone, headline
    columns, cells = mixtral_table(rows, H100)
    assert len(columns) == 5 and cells[0][3] == "no" and cells[0][4] == "-"


def test_the_load_verdict_says_when_the_busiest_expert_hit_the_ceiling():
    first = {"step": 0, "expert_tokens": [[30, 25, 25, 20]], "expert_dropped": [[0] * 4]}
    full = {"step": 9, "expert_tokens": [[50, 30, 10, 10]], "expert_dropped": [[0] * 4]}
    details = load_verdict(first, full, top_k=2)[1]   # 50 of 50 tokens: x2.00 = 4 experts / 2
    assert "x2.00 is the most an expert can take with top-2 of 4 experts" in details
    below = {"step": 9, "expert_tokens": [[45, 35, 10, 10]], "expert_dropped": [[0] * 4]}
    assert "the most an expert can take" not in load_verdict(first, below, top_k=2)[1]


def test_the_verdicts_speak_chinese():
    set_language("zh")
    try:
        headline = drift_verdict([True] * 3, [1e-8] * 3)[0]
        columns, _ = routing_table(EXPERTS, GATES)
    finally:
        set_language("en")
    assert "专家并行" in headline and columns[1] != "experts"
