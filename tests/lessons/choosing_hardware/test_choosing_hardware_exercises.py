"""Lesson 08's checkers: each accepts the lesson's published solution and rejects plausible wrong
answers, each named by the mistake it models; the code exercise's reference refuses while the
learner's formula runs."""
import math

import pytest

from gpututor.lessons.choosing_hardware.exercises import (check_bytes_per_param, check_days_at_hfu,
                                                 check_formula_error, check_implied_mfu,
                                                 check_smallest_count, check_state_bytes)
from gpututor.plan.memory import PRESETS, model_state_bytes
from gpututor.plan.recommend import estimate, recommend
from exercise_solutions import published as _published, rejected



def published(variable: str, **names):
    return _published("08_choosing_hardware", variable, **names)


def test_bytes_per_param_code_runs_on_every_stage_with_the_formula_refused(capsys):
    check_bytes_per_param(published("my_bytes_per_param"))
    assert "for ZeRO stages 0 to 3, in 8 cases" in capsys.readouterr().out
    wrong = {"nothing sharded: the whole 16": lambda stage, dp: 16,
             "as if every stage sharded the weights too": lambda stage, dp: 16 / dp if stage else 16,
             "ZeRO-1's at every stage": lambda stage, dp: 2 + 2 + 12 / dp if stage else 16,
             "forgot the weights": lambda stage, dp: (2 / (dp if stage >= 2 else 1)
                                                      + 12 / (dp if stage >= 1 else 1))}
    for mistake, answer in wrong.items():
        rejected(check_bytes_per_param, answer, match="is not the formula's")
    rejected(check_bytes_per_param,
             lambda stage, dp: model_state_bytes(1, zero_stage=stage, dp=dp)["total"],
             match="called the planner's model_state_bytes")
    check_bytes_per_param(...)
    assert "not answered yet" in capsys.readouterr().out


KEPT = {0: 16, 1: 4, 2: 2, 3: 0}   # bytes per parameter a stage keeps whole on every GPU


def _count(n, stage, gb, usable_share=0.9, round_up=math.ceil, kept=None):
    usable, whole = usable_share * gb * 1e9, (KEPT if kept is None else kept)[stage] * n
    if whole >= usable:
        return None
    return max(1, round_up((16 * n - whole) / (usable - whole)))


WRONG_COUNTS = {
    "without the 10 % reserve": lambda n, s, gb: _count(n, s, gb, usable_share=1.0),
    "rounded down": lambda n, s, gb: _count(n, s, gb, round_up=math.floor),
    "every stage divides all 16 bytes": lambda n, s, gb: _count(n, s, gb, kept=dict.fromkeys(KEPT, 0)),
    "stage 1 keeps only the weights": lambda n, s, gb: _count(n, s, gb, kept={**KEPT, 1: 2}),
    "1 where none fits": lambda n, s, gb: _count(n, s, gb) or 1,
    "the 70B's 9 pasted": lambda n, s, gb: 9,
}


def test_smallest_count_is_code_run_on_every_stage_and_drawn_models(capsys):
    model70 = PRESETS["70b"]
    check_smallest_count(published("my_smallest_count", math=math), model70)
    out = capsys.readouterr().out
    assert "in 11 cases (every stage, the catalogue's GPUs, 3 drawn at this check)" in out
    assert "For the 70b model on H200-141GB with ZeRO-3, your function gives 9." in out
    check_smallest_count(_count, model70)   # another right one, and its None where none fits
    for mistake, answer in WRONG_COUNTS.items():
        rejected(check_smallest_count, answer, model70, match=r"fewest GPUs for the states \[")
    rejected(check_smallest_count, 9, model70, match="pass your function my_smallest_count")
    rejected(check_smallest_count, lambda n, s, gb: next(
        k for k in range(1, 10**4) if model_state_bytes(n, zero_stage=s, dp=k)["total"]
        <= 0.9 * gb * 1e9), model70, match="called the planner's memory formulas")
    check_smallest_count(..., model70)
    assert "not answered yet" in capsys.readouterr().out


def test_the_smallest_count_search_and_the_drawn_cases():
    """The checker's search gives the count the formula's ceiling gives, None where a stage's
    whole states fill the usable memory (ZeRO-2 keeps all 140 GB of the 70B's 16-bit weights
    on every GPU: no T4 holds them); the drawn cases change from one check to the next."""
    import random
    from gpututor.lessons.choosing_hardware.exercises import (COUNT_CASES, drawn_count_cases,
                                                              smallest_count)
    from gpututor import catalog
    assert smallest_count(70e9, "H200-141GB", 3) == 9
    assert smallest_count(70e9, "T4-16GB", 2) is None
    rng = random.Random(3)
    cases = list(COUNT_CASES) + drawn_count_cases(40, rng)
    for n, stage, gpu in cases:
        assert smallest_count(n, gpu, stage) == _count(n, stage, catalog.get_gpu(gpu).memory_bytes
                                                       / 1e9), (n, stage, gpu)
    assert {smallest_count(n, gpu, stage) is None for n, stage, gpu in cases} == {True, False}
    assert drawn_count_cases(3) != drawn_count_cases(3)


@pytest.fixture(scope="module")
def rec7():
    return recommend(PRESETS["7b"], 140e9, gpus=("H100-80GB",), links=("nvlink4",), max_gpus=64,
                     deadline_days=30, budget=60_000)


def test_days_code_runs_on_the_smallest_cluster_and_on_layouts_with_exposed_communication(
        capsys, rec7):
    model7 = PRESETS["7b"]
    my_days = published("my_days")
    check_days_at_hfu(my_days, rec7, model7)
    assert "for 3 layouts, the smallest cluster among them" in capsys.readouterr().out
    assert my_days(rec7.smallest, 0.30) > 30   # the exercise's point: it misses the deadline
    wrong = {"the whole step scaled by 0.40 / hfu":
                 lambda est, hfu: est.days * est.assumptions["hfu"] / hfu,
             "upside down": lambda est, hfu: est.days * hfu / est.assumptions["hfu"],
             "as if HFU did not matter": lambda est, hfu: est.days,
             "the sync as exposed as before": lambda est, hfu: est.steps * (
                 est.step["step_s"] + est.step["compute_s"] * (est.assumptions["hfu"] / hfu - 1)
             ) / 86400}
    for mistake, answer in wrong.items():
        rejected(check_days_at_hfu, answer, rec7, model7, match="yours are not the planner's")
    rejected(check_days_at_hfu,
             lambda est, hfu: estimate(model7, 140e9, est.config, hfu=hfu).days, rec7, model7,
             match="called the planner's estimate")
    check_days_at_hfu(..., rec7, model7)
    assert "not answered yet" in capsys.readouterr().out


class FakeCalibration:   # what the checker reads: the rows section 1 measured
    rows = [{"strategy": "single", "run": "1 rank", "measured_peak": 90.0, "formula_peak": 99.0,
             "formula_error": 0.1},
            {"strategy": "ddp", "run": "ddp 2 ranks", "measured_peak": 120.0, "formula_peak": 102.0,
             "formula_error": (102.0 - 120.0) / 120.0}]


def test_formula_error_code_runs_on_every_measured_row_without_the_recorded_errors(capsys):
    check_formula_error(published("my_formula_error"), FakeCalibration())
    assert "for 2 measured runs and 2 made-up ones" in capsys.readouterr().out
    wrong = {"divided by the prediction":
                 lambda row: (row["formula_peak"] - row["measured_peak"]) / row["formula_peak"],
             "the sign turned round":
                 lambda row: (row["measured_peak"] - row["formula_peak"]) / row["measured_peak"],
             "the recorded field, which the checker takes out": lambda row: row["formula_error"],
             "the ddp row's recorded error pasted": lambda row: (102.0 - 120.0) / 120.0}
    for mistake, answer in wrong.items():
        rejected(check_formula_error, answer, FakeCalibration(), match="formula error")

    class NotRun:
        rows = []
    rejected(check_formula_error, published("my_formula_error"), NotRun(),
             match="has not measured it yet")
    check_formula_error(..., FakeCalibration())
    assert "not answered yet" in capsys.readouterr().out


def test_state_bytes_code_exercise_runs_the_formula_against_the_planner(capsys):
    check_state_bytes(published("my_state_bytes"))
    assert "Correct: your bytes per GPU equal the planner's" in capsys.readouterr().out

    def every_stage_shards_all(n, b, stage, dp):
        return n * (b.params + b.grads + b.optimizer) / (dp if stage else 1)

    def stages_off_by_one(n, b, stage, dp):   # stage 1 taken to shard the gradients as well
        return n * (b.params / (dp if stage >= 2 else 1) + b.grads / (dp if stage >= 1 else 1)
                    + b.optimizer / (dp if stage >= 1 else 1))

    def always_16_bytes(n, b, stage, dp):     # the ZeRO paper's 2 + 2 + 12 whatever the convention
        return n * (2 / (dp if stage >= 3 else 1) + 2 / (dp if stage >= 2 else 1)
                    + 12 / (dp if stage >= 1 else 1))

    def forgot_the_weights(n, b, stage, dp):
        return n * (b.grads / (dp if stage >= 2 else 1) + b.optimizer / (dp if stage >= 1 else 1))

    for candidate in (every_stage_shards_all, stages_off_by_one, always_16_bytes,
                      forgot_the_weights):
        rejected(check_state_bytes, candidate, match="are not the formula's. Which of weights")
    rejected(check_state_bytes, lambda n, b, stage, dp: None, match="not a number of bytes")

    from gpututor.plan.memory import per_device_memory as imported_before

    def calls_the_planner(n, b, stage, dp):   # the formula it is asked to write
        return model_state_bytes(n, zero_stage=stage, dp=dp)["total"]

    def calls_it_another_way(n, b, stage, dp):
        return imported_before(PRESETS["7b"], zero_stage=stage, dp=dp)["params"]

    for candidate in (calls_the_planner, calls_it_another_way):
        rejected(check_state_bytes, candidate, match="called the planner's model_state_bytes")
    assert math.isclose(model_state_bytes(7.5e9, zero_stage=2, dp=64)["total"] / 1e9, 16.64,
                        rel_tol=1e-3)   # the reference works again afterwards (paper: 16.6 GB)
    check_state_bytes(...)
    assert "not answered yet" in capsys.readouterr().out


def test_formula_error_tolerance_is_the_one_the_lesson_states():
    import nbformat
    from gpututor.lessons.choosing_hardware import exercises as hardware_exercises
    from test_exercises import ROOT
    nb = nbformat.read(ROOT / "notebooks" / "08_choosing_hardware.ipynb", as_version=4)
    text = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert hardware_exercises.FORMULA_ERROR_TOLERANCE == 1e-6 and "10⁻⁶" in text
    rounded = lambda row: round((row["formula_peak"] - row["measured_peak"])   # noqa: E731
                                / row["measured_peak"], 3)   # the table's rounding
    rejected(check_formula_error, rounded, FakeCalibration(), match="formula error")


def test_every_message_of_the_checkers_has_its_chinese_line(capsys):
    import ast
    import inspect

    from gpututor.i18n import ZH, set_language
    from gpututor.lessons.choosing_hardware import exercises as hardware_exercises
    tree = ast.parse(inspect.getsource(hardware_exercises))
    literals = {node.args[0].value for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "tr" and isinstance(node.args[0], ast.Constant)}
    assert len(literals) >= 7 and sorted(literals - set(ZH)) == []
    set_language("zh")
    try:   # the questions' words, made from the checkers' defaults
        check_bytes_per_param(...)
        check_smallest_count(..., PRESETS["70b"])
        check_state_bytes(...)
        out = capsys.readouterr().out
        for chinese in ("每参数字节数：尚未作答",
                        "放下模型状态的最少 GPU 数：尚未作答", "模型状态字节数：尚未作答"):
            assert chinese in out, (chinese, out)
        with pytest.raises(AssertionError, match="8 张 GPU 上的 ZeRO-1"):
            check_bytes_per_param(lambda stage, dp: 16 / dp if stage else 16)
        with pytest.raises(AssertionError, match="ZeRO 阶段 1，64 张 GPU"):
            check_state_bytes(lambda n, b, stage, dp: n * 16 / (dp if stage else 1))
    finally:
        set_language("en")


def test_implied_mfu_code_accepts_the_solution_and_refuses_the_package_and_named_mistakes(capsys):
    check_implied_mfu(published("my_implied_mfu"))
    assert "for 5 runs, the published ones of section 5 among them" in capsys.readouterr().out

    def as_percent(n, layers, seq, width, tokens, seconds, peak):    # a right answer, in %
        return 100 * (6 * n + 6 * layers * seq * width) * tokens / (seconds * peak)
    check_implied_mfu(as_percent)
    capsys.readouterr()

    def full_square(n, layers, seq, width, tokens, seconds, peak):   # PaLM's count, not causal
        return (6 * n + 12 * layers * seq * width) * tokens / (seconds * peak)

    def weights_only(n, layers, seq, width, tokens, seconds, peak):  # forgot attention
        return 6 * n * tokens / (seconds * peak)

    def with_recomputation(n, layers, seq, width, tokens, seconds, peak):   # HFU of full recompute
        return (8 * n + 8 * layers * seq * width) * tokens / (seconds * peak)

    def in_hours(n, layers, seq, width, tokens, seconds, peak):      # GPU-hours, not seconds
        return (6 * n + 6 * layers * seq * width) * tokens / (seconds / 3600 * peak)
    for mistake in (full_square, weights_only, with_recomputation, in_hours):
        rejected(check_implied_mfu, mistake, match="is not the formula's")

    def calls_the_package(n, layers, seq, width, tokens, seconds, peak):
        from gpututor import formulas
        return formulas.training_flops_per_token(n, layers, seq, width, causal=True) * tokens / (
            seconds * peak)
    rejected(check_implied_mfu, calls_the_package, match="called the package")
    check_implied_mfu(...)
    assert "not answered yet" in capsys.readouterr().out
