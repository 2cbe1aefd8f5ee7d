"""Lesson 12's intervals at scale (gpututor/lessons/failures_at_scale/intervals.py): a measured
save scaled to a GPU's state, and one job's row, against values computed by hand."""
import math

import pytest

from gpututor.lessons.failures_at_scale.figures import lost_work_figure
from gpututor.lessons.failures_at_scale.intervals import (SMALL, async_at_scale, at_scale,
                                                          interval_row, mtbf_hours, save_cost_fit)
from gpututor.plan.interruptions import daly_interval, young_interval


def test_only_the_per_byte_part_of_a_save_is_scaled():
    # 1 MB in 0.3 s, 3 MB in 0.5 s: 0.1 s per MB, 0.2 s fixed (40 % of the larger save);
    # 4 GB (4,000 MB) take 0.2 + 400 s, not 4,000 × 0.5 / 3 = 667 s
    fit = save_cost_fit((3e6, 0.5), (1e6, 0.3))
    assert fit["per_byte_s"] == pytest.approx(1e-7) and fit["fixed_s"] == pytest.approx(0.2)
    assert fit["fixed_share"] == pytest.approx(0.4)
    assert at_scale(fit, 4e9) == pytest.approx(400.2)


def test_a_larger_save_that_was_not_slower_scales_at_its_whole_rate():
    fit = save_cost_fit((1e6, 0.3), (3e6, 0.25))
    assert fit["per_byte_s"] is None and fit["fixed_share"] is None
    assert at_scale(fit, 3e9) == pytest.approx(250.0)   # an upper bound
    with pytest.raises(ValueError):
        save_cost_fit((1e6, 0.3), (1e6, 0.4))


def test_an_asynchronous_save_keeps_its_ratios_and_pays_for_slower_steps():
    # sync 0.4 s here, 100 s at scale; async blocked 0.1 s, whole 0.8 s; steps beside 0.3 s vs 0.2 s
    scaled = async_at_scale(100.0, 0.4, 0.1, 0.8, 0.5)   # steps beside the write 1.5x as long
    assert scaled["blocked_s"] == pytest.approx(25.0) and scaled["write_s"] == pytest.approx(200.0)
    # W = 200 s of wall time at 1/1.5 of the speed: 200 − 200/1.5 = 66.7 s of work lost, not 0.5 × 200
    assert scaled["slowdown"] == pytest.approx(0.5) and scaled["slowed_s"] == pytest.approx(200 / 3)
    assert scaled["delta_s"] == pytest.approx(25.0 + 200 / 3)
    assert async_at_scale(100.0, 0.4, 0.1, 0.8, -0.05)["delta_s"] == pytest.approx(25.0)


def test_the_curves_stop_where_the_job_would_lose_more_than_it_has():
    rate = 419 / (54 * 24 * 16_384)
    fig = lost_work_figure(120.0, 600.0, rate, (8, 16_384))
    for trace, n in ((fig.data[0], 8), (fig.data[2], 16_384)):
        assert 0 < len(trace.y) < 81 and max(trace.y) < n * 24
    assert len(fig.data[1].x) == len(fig.data[3].x) == 1       # Young's diamonds, inside
    beyond = lost_work_figure(3e5, 600.0, rate, (16_384,))       # a save of 3e5 s: share above 1
    assert len(beyond.data[1].x) == 0
    assert mtbf_hours(10, 1 / 3600) == pytest.approx(360.0)


def test_a_synchronous_row_by_hand():
    # one interruption per 3,600 GPU-hours: 10 GPUs are interrupted every 360 h = 1,296,000 s
    row = interval_row(10, 1 / 3600, 1296.0, 600.0)
    assert row["mtbf_s"] == pytest.approx(1_296_000)
    assert row["save_over_mtbf"] == pytest.approx(0.001) and row["small"]
    assert row["young_s"] == pytest.approx(math.sqrt(2 * 1296 * 1_296_000))   # 57,960 s
    assert row["interval_s"] == row["young_s"] and not row["queues"]
    share = 1296 / row["young_s"] + (row["young_s"] / 2 + 600) / 1_296_000
    assert row["share"] == pytest.approx(share)
    assert row["lost"] == pytest.approx(share * 10 * 24)
    assert row["write_share"] == 0 and row["hourly"] is not None


def test_small_means_daly_within_five_percent_of_young():
    for ratio in (0.001, 0.005, 0.0099):
        mtbf = 100_000.0
        assert daly_interval(ratio * mtbf, mtbf) / young_interval(ratio * mtbf, mtbf) > 0.95
    assert SMALL == 0.01
    row = interval_row(16_384, 419 / (54 * 24 * 16_384), 1000.0, 600.0)   # δ/M = 0.09
    # 1 − (2/3)·√0.045 + 0.09/18 = 0.864
    assert not row["small"] and row["daly_s"] / row["young_s"] == pytest.approx(0.864, abs=1e-3)


def test_an_asynchronous_write_longer_than_youngs_interval_queues():
    # M = 10,000 s, δ = 5 s: Young's interval 316 s, shorter than a 400-s write
    row = interval_row(1, 0.36, 5.0, 0.0, write_s=400.0)
    assert row["young_s"] == pytest.approx(math.sqrt(2 * 5 * 10_000))
    assert row["queues"] and row["interval_s"] == 400.0
    assert row["write_share"] == pytest.approx(0.04)
    assert row["share"] == pytest.approx(5 / 400 + (200 + 400) / 10_000)
    assert interval_row(1, 0.36, 5.0, 0.0, write_s=4000.0)["hourly"] is None
