"""The from-scratch ring all-reduce equals dist.all_reduce; the checker catches wrong answers."""
import pytest
import torch.distributed as dist

from gpututor.parallel.ring import check_allreduce, ring_allreduce


@pytest.mark.parametrize("world_size", [2, 3])
def test_ring_allreduce_equals_dist_all_reduce(capsys, world_size):
    check_allreduce(ring_allreduce, world_size=world_size)
    assert "Correct" in capsys.readouterr().out


def test_checker_rejects_a_wrong_allreduce():
    def forgets_to_sum(tensor, rank, world):  # defined here: sent to the ranks by value
        return tensor

    with pytest.raises(AssertionError, match="differs from dist.all_reduce"):
        check_allreduce(forgets_to_sum, world_size=2)


def test_checker_accepts_a_learner_function_using_dist():
    def via_library(tensor, rank, world):
        dist.all_reduce(tensor)
        return tensor

    check_allreduce(via_library, world_size=2)
