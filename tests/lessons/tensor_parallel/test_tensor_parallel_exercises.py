"""Lesson 04's exercise checkers (``gpututor/lessons/tensor_parallel/exercises.py``): each
accepts the lesson's published solution and rejects plausible wrong answers, each named by the
mistake it models, for the reason its message gives. The row-parallel forward runs in real ranks
(2 and 3), where the package's own ``RowParallelLinear`` refuses.

The published solutions are read from the lesson's "Solutions" cell, as
``tests/test_exercises.py`` reads them.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gpututor.i18n import set_language
from gpututor.lessons.tensor_parallel.exercises import (EXERCISE_RUN, check_row_parallel,
                                                       check_tp_bytes)
from gpututor.parallel.tensor_parallel.megatron import (RowParallelLinear,
                                                        reduce_from_tensor_parallel_region)
from conftest import tiny_spec
from exercise_solutions import published as _published, rejected
from gpututor import build_model


def published(variable: str, **names):
    return _published("04_tensor_parallel", variable, torch=torch, F=F, reduce_from_tensor_parallel_region=reduce_from_tensor_parallel_region, **names)


# ---- exercise 1: a row-parallel forward, in real ranks -----------------------------------------

def test_row_parallel_checker_accepts_the_published_layer(capsys):
    check_row_parallel(published("my_row_forward"))     # on 2 and on 3 ranks
    assert "Correct: on 2 & 3 ranks the output and the input and weight gradients" \
        in capsys.readouterr().out


def _wrong_layers() -> dict:
    """Defined inside a function: they travel to the ranks by value (cloudpickle)."""
    def forgets_the_sum(x_local, weight_local, bias, tp):
        return x_local @ weight_local.T + bias

    def bias_on_every_rank(x_local, weight_local, bias, tp):   # the sum adds it world times
        return reduce_from_tensor_parallel_region(F.linear(x_local, weight_local, bias), tp)

    def backward_sums_too(x_local, weight_local, bias, tp):    # right output, gradients x world
        import torch.distributed.nn.functional as dist_nn
        return dist_nn.all_reduce(F.linear(x_local, weight_local)) + bias

    def detached_sum(x_local, weight_local, bias, tp):         # right output, no gradient back
        import torch.distributed as dist
        out = F.linear(x_local, weight_local).detach()
        dist.all_reduce(out)
        return out + bias

    def returns_the_partial_product(x_local, weight_local, bias, tp):
        return None

    return {"forgets the sum": (forgets_the_sum, r"rank \d: the output differs"),
            "the bias on every rank": (bias_on_every_rank, r"rank \d: the output differs"),
            "a sum whose backward sums again": (backward_sums_too,
                                                r"rank \d: the input gradient differs"),
            "a sum cut off from autograd": (detached_sum, r"rank \d: the input gradient differs"),
            "returns nothing": (returns_the_partial_product, r"returned NoneType, not the layer")}


@pytest.mark.parametrize("mistake", list(_wrong_layers()))
def test_row_parallel_checker_rejects_the_classic_mistakes(mistake):
    candidate, message = _wrong_layers()[mistake]
    rejected(check_row_parallel, candidate, world_sizes=(2,), match=message)


def test_row_parallel_checker_refuses_the_packages_own_layer():
    def the_packages_layer(x_local, weight_local, bias, tp):
        return RowParallelLinear(weight_local, bias, tp)(x_local)

    rejected(check_row_parallel, the_packages_layer, world_sizes=(2,),
             match="ran the package's RowParallelLinear")
    assert RowParallelLinear.forward.__code__.co_name == "forward"    # restored here too


# ---- exercise 2: bytes all-reduced per step by a tp run the checker launches ---------------------

# the lesson's base, with a shorter sequence: the small GPT (4 heads: the tiny one's 2 do not
# split over 4 ranks); the checker runs it as exercise 2 says (tp, degree 4, batch 8), launched
# once per test process and kept
BASE = tiny_spec(model_size="small", strategy="single", world_size=1, batch_size=16)
CFG = build_model(BASE).cfg
N_LAYER, B, T, D = CFG.n_layer, EXERCISE_RUN["batch_size"], BASE.seq_len, CFG.d_model


def test_tp_bytes_accepts_the_published_answer_in_any_shape(capsys):
    answer = published("my_tp_bytes", n_layer=N_LAYER, base=BASE, build_model=build_model)
    for shape in (answer, np.int64(answer), torch.tensor(answer)):
        check_tp_bytes(shape, BASE)
    assert "Correct. bytes all-reduced per step by the exercise's tp run" in capsys.readouterr().out


@pytest.mark.parametrize("mistake, answer", [
    ("forward only", 2 * N_LAYER * B * T * D * 4),
    ("divided by the lesson's degree 4, as if each rank summed a quarter", N_LAYER * B * T * D * 4),
    ("section 5's batch of 16", 4 * N_LAYER * 16 * T * D * 4),
    ("what each rank sends, 2(N-1)/N = 1.5 of it on 4 ranks", 1.5 * 4 * N_LAYER * B * T * D * 4),
])
def test_tp_bytes_rejects_the_classic_mistakes(mistake, answer):
    rejected(check_tp_bytes, answer, BASE, match="is not what this notebook measured")


def test_the_exercise_run_is_fixed_by_the_checker_not_by_the_call(monkeypatch):
    """Whatever spec the call passes, the run counted is tensor parallel of degree 4 on batch 8:
    the call cannot be pointed at a run whose figure a cell printed."""
    from gpututor.lessons.tensor_parallel import exercises as ex
    launched = []

    class Counted:
        def __init__(self, spec):
            launched.append(spec)

        def wait(self):
            return {"comm_bytes_per_step": 123}

    monkeypatch.setattr(ex, "launch", Counted)
    monkeypatch.setattr(ex, "_COUNTED", {})
    ex.check_tp_bytes(123, BASE.replace(strategy="ddp", world_size=2, batch_size=16))
    (spec,) = launched
    assert (spec.strategy, spec.world_size, spec.batch_size) == ("tp", 4, 8)


def test_the_checkers_speak_chinese(capsys):
    set_language("zh")
    try:
        check_row_parallel(...)
        check_tp_bytes(..., BASE)
        out = capsys.readouterr().out
        for chinese in ("行并行前向：尚未作答", "练习中那次 tp 运行每步全归约的字节数"):
            assert chinese in out, (chinese, out)
    finally:
        set_language("en")
