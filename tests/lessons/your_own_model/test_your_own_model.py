"""Lesson 03b's figures when a wrapping fails in its ranks."""
import pytest


def test_a_wrapping_that_failed_in_every_rank_is_named_with_their_errors():
    """Seen on an H200 machine: a wrapping raised in both ranks and the lesson showed only
    StopIteration; the learner now reads which wrapping failed and each rank's error."""
    from gpututor.lessons.your_own_model.figures import parameter_gap
    failed = [{"rank": r, "wrapper": "ZeRO3", "error": "RuntimeError: boom"} for r in range(2)]
    with pytest.raises(RuntimeError, match=r"ZeRO3 did not train in its ranks: rank 0: "
                                           r"RuntimeError: boom; rank 1: RuntimeError: boom"):
        parameter_gap(failed, {"params": {}})
