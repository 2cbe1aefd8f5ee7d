"""Lesson 12's checkers: each accepts the lesson's published solution and rejects plausible
wrong answers, each named by the mistake it models; the code exercise's reference refuses while
the learner's function runs."""
import math

import pytest

from gpututor.lessons.failures_at_scale.exercises import check_lost_gpu_hours, check_young_interval
from gpututor.plan.interruptions import (daly_interval, interruptions_per_gpu_hour, job_mtbf_s,
                                         young_interval)
from exercise_solutions import published as _published, rejected


def published(variable: str, **names):
    return _published("12_failures_at_scale", variable, math=math, **names)


RATE = interruptions_per_gpu_hour()


def test_young_interval_code_exercise(capsys):
    solution = published("my_young")
    check_young_interval(solution)
    assert "Correct: your function gives Young's interval on 4 jobs." in capsys.readouterr().out
    # the question's job: MTBF = 3600 / (2048 x 419 / 21,233,664) = 89,080 s; sqrt(2 x 45 x 89,080)
    assert round(solution(2048, RATE, 45, 300)) == 2831
    wrong = {"forgot the 2": lambda n, r, b, s: math.sqrt(b * 3600 / (n * r)),
             "the whole save, not what it blocks": lambda n, r, b, s: math.sqrt(2 * s * 3600 / (n * r)),
             "one GPU's MTBF": lambda n, r, b, s: math.sqrt(2 * b * 3600 / r),
             "the MTBF in hours": lambda n, r, b, s: math.sqrt(2 * b / (n * r)),
             "in minutes": lambda n, r, b, s: math.sqrt(2 * b * 3600 / (n * r)) / 60,
             "Daly's interval (not Young's)": lambda n, r, b, s: daly_interval(b, 3600 / (n * r)),
             "the question's number for every job": lambda n, r, b, s: 2831.0}
    for mistake, candidate in wrong.items():
        rejected(check_young_interval, candidate, match="not the formula's|called the package's")
    rejected(check_young_interval, lambda n, r, b, s: young_interval(b, job_mtbf_s(n, r)),
             match="called the package's")
    rejected(check_young_interval, 2831.0, match="pass your function")
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
        check_young_interval(published("my_young"))
        check_lost_gpu_hours(published("my_lost_gpu_hours"))
        check_lost_gpu_hours(...)
        out = capsys.readouterr().out
        for chinese in ("给出了 Young 间隔", "正确：你的函数在 4 个作业上", "尚未作答"):
            assert chinese in out, (chinese, out)
        with pytest.raises(AssertionError, match="Young 间隔：.*不是公式给出的值"):
            check_young_interval(lambda n, r, b, s: math.sqrt(b * 3600 / (n * r)))
        with pytest.raises(AssertionError, match="不是公式给出的值"):
            check_lost_gpu_hours(lambda t, d, m, n, r: (d / t + t / 2 / m) * n * 24)
    finally:
        set_language("en")
