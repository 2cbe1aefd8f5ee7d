"""Lesson 12, section 4's tables and verdicts (gpututor/lessons/failures_at_scale/intervals.py):
each branch, fed the numbers that select it, says what they show; the interval figure's log axes
are ticked at units and powers of ten."""
import pytest

from gpututor.lessons.failures_at_scale.figures import INTERVAL_TICKS, decade_ticks, lost_work_figure
from gpututor.lessons.failures_at_scale.intervals import (
    async_at_scale, at_measured_rate, fit_sentence, interval_row, intervals_table, intervals_verdict, mtbf_table,
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


DISK = {"writers": 4, "bytes": 64e6, "seconds": 0.5, "bytes_per_s": 128e6}


def test_the_saves_table_and_the_fit_sentences():
    saves = {"tiny": {"bytes_per_rank": [1e6, None], "save_s": 0.3},
             "small": {"bytes_per_rank": [3e6, 3e6], "save_s": None}}
    columns, rows = saves_table(saves, DISK, 4e9, 31.4)
    assert rows == [["tiny", "1.00", "0.300"], ["small", "3.00", "not measured"],
                    ["4 files written at once, synced (measured)", "64", "0.500"],
                    ["4 GB per GPU: fixed part + the measured rate", "4,000", "31"]]
    fit = save_cost_fit((1e6, 0.3), (3e6, 0.5))
    save_s = at_measured_rate(fit, DISK, 4e9)
    assert save_s == pytest.approx(0.2 + 4e9 / 128e6)
    per_byte = fit_sentence(fit, 1e6, DISK, 4e9, save_s)
    # the fit's range, and its slope's extrapolation named as one (x1333 beyond 3 MB)
    assert "Fitted on saves of 1.00 and 3.00 MB per rank" in per_byte
    assert "the fixed part is 40% of the larger save" in per_byte
    assert "would put 4 GB at 400 s, an extrapolation 1,333× beyond the larger save" in per_byte
    # the measured write prices the bytes, and what is still assumed is said
    assert "4 files of 64 MB written at once to this disk and synced took 0.50 s, 128 MB/s " \
        "for each writer; 4 GB at that rate plus the fixed 0.200 s take 31 s" in per_byte
    assert "still 62× the file written: it assumes the disk keeps this rate up to 4 GB" in per_byte
    noise = fit_sentence(save_cost_fit((1e6, 0.3), (3e6, 0.25)), 1e6, DISK, 4e9, 30.0)
    assert "the larger save was not slower" in noise and "Measured instead" in noise
    assert at_measured_rate(save_cost_fit((1e6, 0.3), (3e6, 0.25)), DISK, 0) == 0.25


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


def beside(a, c, n_a=2, n_c=3, clean_q=(0.18, 0.22)):
    slowdown = None if a is None or c is None else a / c - 1
    return {"beside": list(range(n_a)), "clean": list(range(n_c)), "partial": [7],
            "beside_s": a, "clean_s": c, "beside_quartiles": None if a is None else (a, a),
            "clean_quartiles": None if c is None else clean_q, "slowdown": slowdown,
            "counted": None if slowdown is None else slowdown if a > clean_q[1] else 0.0}


def test_the_slowdown_sentences():
    slower = async_at_scale(100.0, 0.4, 0.1, 0.8, beside(0.3, 0.2)["counted"])
    text = slowdown_sentence(slower, beside(0.3, 0.2))
    assert ("beside a write 0.300 s (2 steps, middle half 0.300–0.300 s), with none 0.200 s "
            "(3 steps, middle half 0.180–0.220 s), in the same run (1 steps partly") in text
    assert "were 50.0% slower, above the middle half of the steps with none, 67 s more" in text
    # 10 % slower, but inside the spread of the steps with none: noise, counted as 0
    noisy = beside(0.22, 0.2, clean_q=(0.17, 0.25))
    same = async_at_scale(100.0, 0.4, 0.1, 0.8, noisy["counted"])
    text = slowdown_sentence(same, noisy)
    assert "the difference (+10.0%) is within the step-to-step variation" in text
    assert "not counted (0)" in text and same["slowed_s"] == 0.0
    faster = beside(0.19, 0.2)
    assert "(-5.0%) is within the step-to-step variation" in slowdown_sentence(
        async_at_scale(100.0, 0.4, 0.1, 0.8, faster["counted"]), faster)
    unknown = async_at_scale(100.0, 0.4, 0.1, 0.8, None)
    assert unknown["slowdown"] is None and unknown["delta_s"] == pytest.approx(25.0)
    text = slowdown_sentence(unknown, beside(0.3, None, n_c=0))
    assert "with none not measured (0 steps, middle half not measured)" in text
    assert "not measured and not counted" in text


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
