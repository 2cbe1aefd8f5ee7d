"""Lesson 12's checkers: each accepts the lesson's published solution and rejects plausible
wrong answers, each named by the mistake it models; the code exercise's reference refuses while
the learner's function runs."""
import math

import pytest

from gpututor.lessons.failures_at_scale.exercises import check_lost_gpu_hours, check_young_interval
from gpututor.plan.interruptions import daly_interval, interruptions_per_gpu_hour, job_mtbf_s
from exercise_solutions import published as _published, rejected


def published(variable: str, **names):
    return _published("12_failures_at_scale", variable, math=math, **names)


RATE = interruptions_per_gpu_hour()


def test_young_interval_for_the_exercises_job(capsys):
    check_young_interval(published("my_young", rate=RATE))
    # MTBF = 3600 / (2048 x 419 / 21,233,664) = 3600 x 10,368 / 419 = 89,080 s; sqrt(2 x 45 x 89,080)
    assert "(the formula gives 2,831)" in capsys.readouterr().out
    check_young_interval(daly_interval(45, job_mtbf_s(2048, RATE)))   # Daly's is within 2 %
    wrong = {"forgot the 2": math.sqrt(45 * 3600 / (2048 * RATE)),
             "all 466 interruptions, planned ones too": math.sqrt(
                 2 * 45 * 3600 / (2048 * interruptions_per_gpu_hour(planned=True))),
             "the 16,384-GPU job's MTBF": math.sqrt(2 * 45 * job_mtbf_s(16_384, RATE)),
             "the MTBF in hours": math.sqrt(2 * 45 / (2048 * RATE)),
             "in minutes": math.sqrt(2 * 45 * 3600 / (2048 * RATE)) / 60,
             "the whole async save (300 s), not the 45 s it blocks": math.sqrt(
                 2 * 300 * 3600 / (2048 * RATE))}
    for mistake, answer in wrong.items():
        rejected(check_young_interval, answer, match="is not what the formula gives")
    check_young_interval(...)
    assert "not answered yet" in capsys.readouterr().out


def test_lost_gpu_hours_code_exercise(capsys):
    check_lost_gpu_hours(published("my_lost_gpu_hours"))
    assert "Correct: your function gives the formula's GPU-hours lost per day on 4 jobs." \
        in capsys.readouterr().out

    def as_numpy(interval_s, save_s, mtbf_s, n_gpus, restart_s):   # right, in another shape
        import numpy as np
        return np.float64(n_gpus * 24 * (save_s / interval_s + (interval_s / 2 + restart_s) / mtbf_s))
    check_lost_gpu_hours(as_numpy)

    wrong = {
        "forgot the restarts":
            lambda t, d, m, n, r: (d / t + t / 2 / m) * n * 24,
        "a whole interval lost per failure, not half":
            lambda t, d, m, n, r: (d / t + (t + r) / m) * n * 24,
        "one GPU's hours, not the job's":
            lambda t, d, m, n, r: (d / t + (t / 2 + r) / m) * 24,
        "the share, not GPU-hours":
            lambda t, d, m, n, r: d / t + (t / 2 + r) / m,
        "per hour, not per day":
            lambda t, d, m, n, r: (d / t + (t / 2 + r) / m) * n,
    }
    for mistake, candidate in wrong.items():
        rejected(check_lost_gpu_hours, candidate, match="not the formula's value")
    # the message shows what the function returned, and its type: not the type as the value
    rejected(check_lost_gpu_hours, lambda *args: "12", match=r"returned '12' \(a str\), not a number")

    from gpututor.plan.interruptions import lost_gpu_hours_per_day

    def the_packages(*args):
        return lost_gpu_hours_per_day(*args)
    rejected(check_lost_gpu_hours, the_packages, match="called the package's formula")
    assert lost_gpu_hours_per_day(1000, 50, 10_000, 8, 600) == pytest.approx(0.16 * 8 * 24)
    check_lost_gpu_hours(...)
    assert "not answered yet" in capsys.readouterr().out


def test_the_checkers_speak_chinese(capsys):
    from gpututor.i18n import set_language
    set_language("zh")
    try:
        check_young_interval(published("my_young", rate=RATE))
        check_lost_gpu_hours(published("my_lost_gpu_hours"))
        check_lost_gpu_hours(...)
        out = capsys.readouterr().out
        for chinese in ("Young 间隔", "公式给出", "正确：你的函数在 4 个作业上", "尚未作答"):
            assert chinese in out, (chinese, out)
        with pytest.raises(AssertionError, match="不是公式给出的值"):
            check_lost_gpu_hours(lambda t, d, m, n, r: (d / t + t / 2 / m) * n * 24)
    finally:
        set_language("en")
