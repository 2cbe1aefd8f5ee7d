"""Lesson 12's intervals at scale (gpututor/lessons/failures_at_scale/intervals.py): a measured
save scaled to a GPU's state, and one job's row, against values computed by hand."""
import math

import pytest

from gpututor.lessons.failures_at_scale.intervals import SMALL, at_scale, interval_row
from gpututor.plan.interruptions import daly_interval, young_interval


def test_a_save_is_scaled_at_the_rate_measured():
    # 2 MB in 0.5 s is 4 MB/s: 4 GB take 1,000 s
    assert at_scale(0.5, 2e6, 4e9) == pytest.approx(1000.0)


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
