"""Lesson 04's exercise checkers (``gpututor/lessons/tensor_parallel/exercises.py``): each
accepts the lesson's published solution and rejects plausible wrong answers, each named by the
mistake it models, for the reason its message gives. The row-parallel forward runs in real ranks
(2 and 3), where the package's own ``RowParallelLinear`` refuses.

The published solutions are read from the lesson's "Solutions" cell, as
``tests/test_exercises.py`` reads them.
"""

import pytest
import torch
import torch.nn.functional as F

from gpututor.i18n import set_language
from gpututor.lessons.tensor_parallel.exercises import (TP_BYTES_CASES, check_row_parallel,
                                                       check_tp_bytes)
from gpututor.parallel.tensor_parallel.megatron import (RowParallelLinear,
                                                        reduce_from_tensor_parallel_region)
from conftest import tiny_spec
from exercise_solutions import published as _published, rejected


def published(variable: str, **names):
    return _published("04_tensor_parallel", variable, torch=torch, F=F, reduce_from_tensor_parallel_region=reduce_from_tensor_parallel_region, **names)


# ---- exercise 1: a row-parallel forward, in real ranks -----------------------------------------

def test_row_parallel_checker_accepts_the_published_layer(capsys):
    check_row_parallel(published("my_row_forward"))     # on 2 and on 3 ranks
    assert "Correct: on 2 & 3 ranks the output and the input, weight and bias gradients" \
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

    def a_share_of_the_bias_on_every_rank(x_local, weight_local, bias, tp):   # an examiner's:
        # the right output, but each rank's bias gradient is 1/world of the dense layer's
        return reduce_from_tensor_parallel_region(F.linear(x_local, weight_local, bias / tp.size), tp)

    def returns_the_partial_product(x_local, weight_local, bias, tp):
        return None

    return {"forgets the sum": (forgets_the_sum, r"rank \d: the output differs"),
            "the bias on every rank": (bias_on_every_rank, r"rank \d: the output differs"),
            "a sum whose backward sums again": (backward_sums_too,
                                                r"rank \d: the input gradient differs"),
            "a sum cut off from autograd": (detached_sum, r"rank \d: the input gradient differs"),
            "a share of the bias on every rank": (a_share_of_the_bias_on_every_rank,
                                                  r"rank \d: the bias gradient differs"),
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


# ---- exercise 2: tp_bytes(batch, seq_len, d_model, n_layer), against runs the checker launches -------

# the lesson's base (its model and steps); the checker's cases (TP_BYTES_CASES) set the model
# size, degree, batch and sequence length themselves, and their runs are launched once per
# test process and kept
BASE = tiny_spec(model_size="small", strategy="single", world_size=1, batch_size=16)


def test_tp_bytes_accepts_the_published_function(capsys):
    check_tp_bytes(published("my_tp_bytes"), BASE)
    assert "Correct: your count equals the bytes the runs counted, exactly, for 2 tp runs" \
        in capsys.readouterr().out


def test_tp_bytes_cases_are_runs_no_cell_makes():
    """Lesson 04 runs tp at batch 16 and base's sequence length; the checker's cases do not,
    and they include degrees 2 and 4."""
    assert {c[1] for c in TP_BYTES_CASES} == {2, 4}
    assert all(batch != 16 and seq_len != BASE.seq_len for *_, batch, seq_len in TP_BYTES_CASES)


@pytest.mark.parametrize("mistake, answer", [
    ("forward only", lambda b, t, d, n: 2 * n * b * t * d * 4),
    ("divided by degree 4, as if each rank summed a quarter", lambda b, t, d, n: n * b * t * d * 4),
    ("what each rank sends, 2(N-1)/N = 1.5 of it on 4 ranks",
     lambda b, t, d, n: 1.5 * 4 * n * b * t * d * 4),
    ("bf16's 2 bytes", lambda b, t, d, n: 4 * n * b * t * d * 2),
])
def test_tp_bytes_rejects_the_classic_mistakes(mistake, answer):
    rejected(check_tp_bytes, answer, BASE, match="yours is not what the run counted")


def test_tp_bytes_rejects_a_pasted_recorded_value():
    """Section 5's degree-2 run at batch 16, halved to batch 8: the value the old exercise
    accepted; a constant cannot match runs of other shapes."""
    recorded = 4 * 4 * 16 * BASE.seq_len * 128 * 4 / 2
    rejected(check_tp_bytes, lambda *shape: recorded, BASE, match="yours is not what the run counted")


def test_tp_bytes_cannot_read_what_the_checker_counted():
    """The check reading's two ways round it: the counts kept where a function could read
    them (a module dict, then a closure reader), and the checker's counting helper, which
    answers from that cache without launching."""
    from gpututor.lessons.tensor_parallel import exercises as ex
    check_tp_bytes(published("my_tp_bytes"), BASE)   # the counts are cached now

    def from_the_helper(batch, seq_len, d_model, n_layer):
        case = next(c for c in ex.TP_BYTES_CASES if c[2] == batch)
        return ex.counted_tp_bytes(BASE, *case)

    def from_the_cache(batch, seq_len, d_model, n_layer):
        size, degree, _, _ = next(c for c in ex.TP_BYTES_CASES if c[2] == batch)
        return ex._count_run(BASE.replace(strategy="tp", model_size=size, world_size=degree,
                                          batch_size=batch, seq_len=seq_len, steps=4))
    assert not hasattr(ex, "_COUNTED")
    for cheat in (from_the_helper, from_the_cache):
        rejected(check_tp_bytes, cheat, BASE, match="launched a run or called the lesson's counting")


def test_tp_bytes_refuses_launching_the_run():
    from gpututor import launch

    def launches(batch, seq_len, d_model, n_layer):
        return launch(BASE.replace(strategy="tp", world_size=2, batch_size=batch,
                                   seq_len=seq_len)).wait()["comm_bytes_per_step"]
    rejected(check_tp_bytes, launches, BASE, match="launched a run or called the lesson's counting")


def test_the_checkers_speak_chinese(capsys):
    set_language("zh")
    try:
        check_row_parallel(...)
        check_tp_bytes(..., BASE)
        out = capsys.readouterr().out
        for chinese in ("行并行前向：尚未作答", "tp 字节数：尚未作答"):
            assert chinese in out, (chinese, out)
    finally:
        set_language("en")
