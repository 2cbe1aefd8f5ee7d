"""Lesson 12, section 4's tables and verdicts (gpututor/lessons/failures_at_scale/intervals.py):
each branch, fed the numbers that select it, says what they show; the interval figure's log axes
are ticked at units and powers of ten."""
import pytest

from gpututor.lessons.failures_at_scale.figures import INTERVAL_TICKS, decade_ticks, lost_work_figure
from gpututor.lessons.failures_at_scale.intervals import (
    async_at_scale, fit_sentence, interval_row, intervals_table, intervals_verdict, mtbf_table,
    rate_verdict, save_cost_fit, save_ways_table, save_ways_verdict, saves_table, slowdown_sentence)
from gpututor.plan.interruptions import LLAMA3, interruptions_per_gpu_hour

RATE = interruptions_per_gpu_hour(LLAMA3)
SIZES = (8, 512, 16_384)


def test_the_rate_verdict_and_the_mtbf_table():
    headline, details, tone = rate_verdict(LLAMA3, RATE, SIZES)
    assert headline == ("At Llama 3's rate, one interruption per 5.8 GPU-years, a job on 16,384 "
                        "GPUs is interrupted every 3.1 hours on average")
    assert "419 unexpected interruptions" in details and "58.7%" in details
    columns, rows = mtbf_table(RATE, SIZES)
    assert rows[-1] == ["16,384", "7.76", "3.1"] and rows[0][0] == "8"


def test_the_saves_table_and_the_fit_sentences():
    saves = {"tiny": {"bytes_per_rank": [1e6, None], "save_s": 0.3},
             "small": {"bytes_per_rank": [3e6, 3e6], "save_s": None}}
    columns, rows = saves_table(saves, 4e9, 400.2)
    assert rows == [["tiny", "1.00", "0.300"], ["small", "3.00", "not measured"],
                    ["4 GB per GPU, from the fit", "4,000", "400"]]
    per_byte = fit_sentence(save_cost_fit((1e6, 0.3), (3e6, 0.5)), 4e9, 400.2)
    assert "fixed part is 40% of the larger save: mostly cost per byte. 4 GB take 400 s" in per_byte
    fixed = fit_sentence(save_cost_fit((1e6, 0.3), (3e6, 0.35)), 4e9, 100.0)
    assert "fixed part is 79% of the larger save: mostly fixed cost" in fixed
    noise = fit_sentence(save_cost_fit((1e6, 0.3), (3e6, 0.25)), 4e9, 333.0)
    assert noise.startswith("the larger save was not slower") and "an upper bound: 333 s" in noise


def test_the_intervals_verdict_where_the_model_holds_everywhere():
    rows = [interval_row(n, RATE, 20.0, 600.0) for n in SIZES]
    headline, details, tone = intervals_verdict(rows, 20.0, "FIT")
    assert headline.startswith("With saves of 20 s, at Young's interval a job on 8 GPUs loses ") and tone == "mixed"
    assert "a job on 8 GPUs loses" in headline and "one on 16,384 GPUs" in headline
    assert details.splitlines()[0] == "FIT"
    assert "δ/M is below 0.01 at every size" in details


def test_the_intervals_verdict_where_d_over_m_is_not_small():
    rows = [interval_row(n, RATE, 189.0, 600.0) for n in SIZES]
    _, details, _ = intervals_verdict(rows, 189.0, "FIT")
    assert "16,384 GPUs: δ/M = 0.017, not small: Daly's interval is 6% shorter" in details
    assert "512 GPUs" not in details


def test_the_intervals_verdict_where_the_model_stops_holding():
    rows = [interval_row(n, RATE, 6000.0, 600.0) for n in SIZES]
    assert rows[0]["share"] < 1 <= rows[-1]["share"]
    headline, _, tone = intervals_verdict(rows, 6000.0, "FIT")
    assert "from 16,384 GPUs on, the first-order model does not hold" in headline and tone == "bad"
    table = intervals_table(rows)[1]
    assert table[-1][4] == table[-1][5] == "beyond the model" and table[0][4] != "beyond the model"
    rows = [interval_row(n, 1.0, 3000.0, 600.0) for n in SIZES]   # one interruption a GPU-hour
    headline, _, tone = intervals_verdict(rows, 3000.0, "FIT")
    assert "holds at none of these sizes" in headline and tone == "bad"


def test_the_slowdown_sentences():
    slower = async_at_scale(100.0, 0.4, 0.1, 0.8, 0.3, 0.2)
    assert "the median step is 50.0% slower (a lower bound for the steps beside the write), 67 s more per save" in \
        slowdown_sentence(slower, 0.3, 0.2)
    same = async_at_scale(100.0, 0.4, 0.1, 0.8, 0.19, 0.2)
    assert "was not slower here" in slowdown_sentence(same, 0.19, 0.2)
    unknown = async_at_scale(100.0, 0.4, 0.1, 0.8, None, 0.2)
    assert unknown["slowdown"] is None and unknown["delta_s"] == pytest.approx(25.0)
    assert "asynchronous fsdp run not measured, synchronous 0.200 s" in slowdown_sentence(unknown, None, 0.2)
    assert "are not counted" in slowdown_sentence(unknown, None, 0.2)


def ways(sync_s, async_s, write_s):
    return (interval_row(16_384, RATE, sync_s, 600.0),
            interval_row(16_384, RATE, async_s, 600.0, write_s=write_s))


def test_the_asynchronous_save_loses_less():
    sync, asynchronous = ways(189.0, 108.0, 312.0)
    headline, details, tone = save_ways_verdict(sync, asynchronous, "SLOW")
    assert headline.startswith("Of the two saves measured here, the asynchronous one loses less at "
                               "16,384 GPUs") and tone == "good"
    assert details.splitlines()[0] == "SLOW" and "saves do not queue" in details
    assert "the blocked time it saves outweighs" in details


def test_the_synchronous_save_loses_less_and_writes_that_queue():
    sync, asynchronous = ways(100.0, 95.0, 3000.0)
    assert asynchronous["queues"] and asynchronous["lost"] > sync["lost"]
    headline, details, tone = save_ways_verdict(sync, asynchronous, "SLOW")
    assert "the synchronous one loses less" in headline and tone == "mixed"
    assert "saves would queue, so it saves every 3,000 s" in details
    columns, rows = save_ways_table({"sync": sync, "async": asynchronous})
    assert columns[0] == "16,384 GPUs, saves" and rows[1][4] == "50"   # every W = 3,000 s


def test_equal_saves_and_saves_the_model_cannot_price():
    sync, asynchronous = ways(100.0, 100.0, 0.0)
    headline, _, _ = save_ways_verdict(sync, asynchronous, "SLOW")
    assert headline.startswith("The two saves measured here lose the same")
    sync, asynchronous = ways(5000.0, 100.0, 200.0)
    assert sync["share"] >= 1
    headline, _, tone = save_ways_verdict(sync, asynchronous, "SLOW")
    assert "the model prices neither" in headline and tone == "mixed"
    assert save_ways_table({"sync": sync})[1][0][-1] == "beyond the model"


def test_the_interval_figure_is_ticked_at_units_and_powers_of_ten():
    fig = lost_work_figure(189.0, 600.0, RATE, SIZES)
    assert list(fig.layout.xaxis.ticktext) == [label for _, label in INTERVAL_TICKS]
    ys = [y for trace in fig.data for y in trace.y]
    ticks = list(fig.layout.yaxis.tickvals)
    assert ticks[0] <= min(ys) and ticks[-1] >= max(ys)
    assert all(b == pytest.approx(10 * a) for a, b in zip(ticks, ticks[1:]))
    assert decade_ticks([0.05, 300.0])["ticktext"] == ["0.01", "0.1", "1", "10", "100", "1,000"]
    assert decade_ticks([]) == {}
    # one colour per legend entry: a size's curve and its diamond share it, the sizes differ
    colours = {t.legendgroup: set() for t in fig.data}
    for t in fig.data:
        colours[t.legendgroup].add(t.line.color if t.mode == "lines" else t.marker.color)
    assert all(len(c) == 1 for c in colours.values()) and len({*map(frozenset, colours.values())}) == 3
