"""The checkpoint-interval formulas (gpututor/plan/interruptions.py) against values computed by hand
and against Daly 2006's own worked examples."""
import math

import pytest

from gpututor.plan.interruptions import (LLAMA3, daly_interval, interruptions_per_gpu_hour, job_mtbf_s,
                                    lost_fraction, lost_gpu_hours_per_day, young_interval)

MINUTE, HOUR = 60.0, 3600.0


def test_llama3s_rate_per_gpu_hour():
    # 419 unexpected interruptions, of every cause / (54 days x 24 h x 16,384 GPUs) = 419 / 21,233,664
    assert interruptions_per_gpu_hour() == pytest.approx(1.97328e-5, rel=1e-5)
    assert interruptions_per_gpu_hour(planned=True) == pytest.approx(466 / 21_233_664)
    assert (LLAMA3.days, LLAMA3.gpus, LLAMA3.interruptions, LLAMA3.unexpected) == \
        (54, 16_384, 466, 419)
    # one interruption per 5.8 GPU-years; the GPUs caused 58.7 % of them: one per 9.9 GPU-years
    assert 1 / interruptions_per_gpu_hour() / 24 / 365 == pytest.approx(5.785, abs=1e-3)
    assert LLAMA3.gpu_share == 0.587 and LLAMA3.source == "dubey2024-interruptions"


def test_job_mtbf_scales_down_with_the_gpus():
    rate = interruptions_per_gpu_hour()
    # on all 16,384 GPUs: 54 x 24 / 419 = 3.093 hours between failures
    assert job_mtbf_s(16_384, rate) / HOUR == pytest.approx(54 * 24 / 419)
    assert job_mtbf_s(512, rate) == pytest.approx(32 * job_mtbf_s(16_384, rate))
    assert job_mtbf_s(1, 0.5) == 7200.0
    with pytest.raises(ValueError, match="n_gpus"):
        job_mtbf_s(0, rate)


def test_young_by_hand():
    assert young_interval(5 * MINUTE, 24 * HOUR) == pytest.approx(120 * MINUTE)  # sqrt(2*5*1440) min
    assert young_interval(50, 10_000) == pytest.approx(1000.0)
    with pytest.raises(ValueError, match="save_s"):
        young_interval(0, 100)


@pytest.mark.parametrize("mtbf_min,expected_min", [(24 * 60, 117), (6 * 60, 57), (15, 9.1)])
def test_daly_matches_his_worked_examples(mtbf_min, expected_min):
    """Daly 2006, Figs. 3-5: δ = 5 min; the model predicts 117, 57 and 9.1 minutes."""
    got = daly_interval(5 * MINUTE, mtbf_min * MINUTE) / MINUTE
    assert got == pytest.approx(expected_min, abs=0.5 if expected_min > 10 else 0.05)


def test_daly_when_saving_takes_longer_than_two_mtbfs():
    assert daly_interval(300, 100) == 100


def test_the_lost_share_and_gpu_hours_by_hand():
    # τ = 1000 s, δ = 50 s, M = 10,000 s, R = 600 s: 50/1000 + (500 + 600)/10,000 = 0.16
    assert lost_fraction(1000, 50, 10_000, 600) == pytest.approx(0.16)
    # 0.16 of 8 GPUs x 24 h
    assert lost_gpu_hours_per_day(1000, 50, 10_000, 8, 600) == pytest.approx(0.16 * 8 * 24)


def test_the_young_interval_is_the_minimum_of_the_lost_share():
    save, mtbf, restart = 40.0, 20_000.0, 300.0
    best = young_interval(save, mtbf)
    here = lost_fraction(best, save, mtbf, restart)
    for factor in (0.5, 0.9, 1.1, 2.0):
        assert lost_fraction(best * factor, save, mtbf, restart) > here
    # at the optimum, saving and lost work cost the same: δ/τ = τ/(2M)
    assert save / best == pytest.approx(best / (2 * mtbf))
    assert math.isclose(here, 2 * save / best + restart / mtbf)


def test_an_asynchronous_write_adds_w_over_m_per_failure_and_must_fit_the_interval():
    # τ = 1000 s, δ = 50 s, W = 200 s, M = 10,000 s, R = 600 s: 0.16 + 200/10,000
    assert lost_fraction(1000, 50, 10_000, 600, write_s=200) == pytest.approx(0.18)
    assert lost_gpu_hours_per_day(1000, 50, 10_000, 8, 600, write_s=200) == \
        pytest.approx(0.18 * 8 * 24)
    # the optimum does not move: W/M is the same at every interval
    best = young_interval(50, 10_000)
    for factor in (0.8, 1.25):
        assert lost_fraction(best * factor, 50, 10_000, 600, write_s=200) > \
            lost_fraction(best, 50, 10_000, 600, write_s=200)
    with pytest.raises(ValueError, match="write_s=1200 is invalid for interval_s=1000 .saves would queue"):
        lost_fraction(1000, 50, 10_000, 600, write_s=1200)
