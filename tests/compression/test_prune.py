"""Magnitude pruning from scratch keeps the same weights as PyTorch's ``l1_unstructured``: the
mask itself is compared, entry for entry, not only the pruned weights."""
import pytest
import torch
from torch.nn.utils import prune

from conftest import tiny_spec
from gpututor import build_model
from gpututor.compression import prune as pruning


@pytest.mark.parametrize("sparsity", [0.0, 0.3, 0.5, 0.9])
def test_the_scratch_mask_is_torchs_l1_unstructured_mask(sparsity):
    model = build_model(tiny_spec(strategy="single", world_size=1)).eval()
    production = pruning.prune_magnitude(model, sparsity)        # l1_unstructured, mask kept
    scratch = pruning.prune_magnitude_scratch(model, sparsity)
    linears = pruning.prunable_linears(model)
    assert linears
    for (name, original), (_, theirs), (_, ours) in zip(linears,
                                                         pruning.prunable_linears(production),
                                                         pruning.prunable_linears(scratch)):
        mask = pruning.magnitude_mask(original.weight, sparsity)
        assert torch.equal(mask, theirs.weight_mask.bool()), name
        # the scratch copy is the original weight times that mask (no weight was 0 before)
        assert bool((original.weight != 0).all())
        torch.testing.assert_close(ours.weight, original.weight * mask, rtol=0, atol=0, msg=name)


def test_ties_are_broken_the_same_way():
    """Equal magnitudes (here 0.5, -0.5, 0.5 ...) at the cut: both keep the same entries."""
    linear = torch.nn.Linear(8, 4, bias=False)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor([0.5, -0.5, 1.0, 2.0] * 8).view(4, 8))
    mask = pruning.magnitude_mask(linear.weight, 0.25)            # 8 of the sixteen 0.5s go
    prune.l1_unstructured(linear, "weight", amount=0.25)
    assert torch.equal(mask, linear.weight_mask.bool())
    assert int((~mask).sum()) == 8


def test_compare_pruning_counts_what_each_way_zeroed_and_finds_a_planted_difference(monkeypatch):
    model = build_model(tiny_spec(strategy="single", world_size=1)).eval()
    counts = pruning.compare_pruning(model, 0.5)
    total = sum(m.weight.numel() for _, m in pruning.prunable_linears(model))
    assert counts["differ"] == 0
    assert counts["pruned_scratch"] == counts["pruned_torch"] == pytest.approx(total / 2, abs=4)
    # a scratch pruning that keeps one more weight than it should is seen
    real = pruning.magnitude_mask

    def one_kept(weight, sparsity):
        mask = real(weight, sparsity).clone()
        mask.view(-1)[int((~mask).view(-1).nonzero()[0])] = True
        return mask

    monkeypatch.setattr(pruning, "magnitude_mask", one_kept)
    assert pruning.compare_pruning(model, 0.5)["differ"] == len(pruning.prunable_linears(model))
