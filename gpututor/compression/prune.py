"""Pruning: remove the weights that matter least, then see what it saves and what it costs.

- **Unstructured (magnitude) pruning** zeroes the smallest ``|w|`` of each Linear weight. From
  scratch that is :func:`magnitude_mask`; the production API is
  ``torch.nn.utils.prune.l1_unstructured`` (:func:`prune_magnitude`), which keeps the mask as a
  hook so that a fine-tune cannot bring pruned weights back; ``prune.remove`` then makes the
  zeros permanent (:func:`make_permanent`); :func:`compare_pruning` counts where the two
  disagree (lesson 07 shows it). The matrices keep their shape: a dense kernel
  multiplies the zeros just the same, so the model is neither smaller nor faster.
- **Structured pruning** removes whole hidden neurons of each MLP block: row ``j`` of ``fc`` (and
  its bias) and column ``j`` of ``proj``. The neurons to drop are those whose ``proj`` column has
  the smallest L2 norm: the ones ``prune.ln_structured(proj, "weight", amount, n=2, dim=1)``
  zeroes. :func:`shrink_mlps` then slices them out, so the matrices really get smaller.

:func:`fine_tune` trains a pruned model a few steps in this process (masks stay applied).
"""
from __future__ import annotations

import copy
import time
import warnings
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import prune

from .. import checks
from ..models import MLP


def prunable_linears(model: nn.Module) -> list[tuple[str, nn.Linear]]:
    """The Linear layers to prune: all but one that shares its weight with an embedding (the
    GPT's LM head is the token embedding; pruning it would prune the embedding too)."""
    shared = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    return [(name, m) for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and id(getattr(m, "weight_orig", m.weight)) not in shared]


# ---- unstructured ------------------------------------------------------------------------------

def magnitude_mask(weight: torch.Tensor, sparsity: float) -> torch.Tensor:
    """Boolean mask keeping all but the ``round(sparsity · n)`` entries of smallest ``|w|``."""
    checks.fraction("sparsity", sparsity, allow_zero=True, allow_one=False)
    n_prune = round(sparsity * weight.numel())
    mask = torch.ones(weight.numel(), dtype=torch.bool, device=weight.device)
    if n_prune:
        smallest = torch.topk(weight.detach().abs().flatten(), n_prune, largest=False).indices
        mask[smallest] = False
    return mask.view_as(weight)


def prune_magnitude_scratch(model: nn.Module, sparsity: float) -> nn.Module:
    """A copy with each prunable weight multiplied by its :func:`magnitude_mask` (from scratch)."""
    model = copy.deepcopy(model)
    with torch.no_grad():
        for _, linear in prunable_linears(model):
            linear.weight.mul_(magnitude_mask(linear.weight, sparsity))
    return model


def prune_magnitude(model: nn.Module, sparsity: float) -> nn.Module:
    """A copy pruned with ``torch.nn.utils.prune.l1_unstructured`` (masks kept for fine-tuning)."""
    checks.fraction("sparsity", sparsity, allow_zero=True, allow_one=False)
    model = copy.deepcopy(model)
    for _, linear in prunable_linears(model):
        prune.l1_unstructured(linear, "weight", amount=sparsity)
    return model


def compare_pruning(model: nn.Module, sparsity: float) -> dict:
    """Choose the weights to prune both ways at ``sparsity`` and compare the choices:
    ``pruned_scratch`` (:func:`magnitude_mask`, what :func:`prune_magnitude_scratch` zeroes),
    ``pruned_torch`` (the ``weight_mask`` ``l1_unstructured`` leaves, :func:`prune_magnitude`),
    and ``differ``, the prunable weights one chose and the other did not."""
    theirs = prune_magnitude(model, sparsity)
    counts = {"pruned_scratch": 0, "pruned_torch": 0, "differ": 0}
    for (_, original), (_, pruned) in zip(prunable_linears(model), prunable_linears(theirs)):
        ours = ~magnitude_mask(original.weight, sparsity)
        torchs = pruned.weight_mask == 0
        counts["pruned_scratch"] += int(ours.sum())
        counts["pruned_torch"] += int(torchs.sum())
        counts["differ"] += int((ours != torchs).sum())
    return counts


def make_permanent(model: nn.Module) -> nn.Module:
    """Fold each pruning mask into its weight (``prune.remove``); returns ``model`` itself."""
    for module in model.modules():
        if prune.is_pruned(module) and hasattr(module, "weight_orig"):
            prune.remove(module, "weight")
    return model


def weight_sparsity(model: nn.Module) -> float:
    """Fraction of exact zeros in the prunable Linear weights."""
    weights = [m.weight for _, m in prunable_linears(model)]
    return sum(int((w == 0).sum()) for w in weights) / sum(w.numel() for w in weights)


# ---- structured --------------------------------------------------------------------------------

def neuron_norms(mlp: MLP) -> torch.Tensor:
    """L2 norm of each hidden neuron's outgoing weights (a column of ``proj``)."""
    return mlp.proj.weight.detach().norm(dim=0)


def mask_neurons(model: nn.Module, sparsity: float) -> nn.Module:
    """A copy where ``prune.ln_structured`` zeroes the weakest neurons' ``proj`` columns.

    The production API's answer: same function as :func:`shrink_mlps`, but the matrices keep
    their shape (and their cost).
    """
    checks.fraction("sparsity", sparsity, allow_zero=True, allow_one=False)
    model = copy.deepcopy(model)
    for mlp in (m for m in model.modules() if isinstance(m, MLP)):
        prune.ln_structured(mlp.proj, "weight", amount=sparsity, n=2, dim=1)
    return model


def shrink_mlps(model: nn.Module, sparsity: float) -> nn.Module:
    """A copy whose MLPs keep only their strongest ``1 - sparsity`` hidden neurons (smaller
    matrices): the neurons :func:`mask_neurons` keeps, sliced out of ``fc`` and ``proj``."""
    checks.fraction("sparsity", sparsity, allow_zero=True, allow_one=False)
    model = copy.deepcopy(model)
    for mlp in (m for m in model.modules() if isinstance(m, MLP)):
        hidden = mlp.fc.out_features
        n_keep = hidden - round(sparsity * hidden)
        keep = neuron_norms(mlp).topk(n_keep).indices.sort().values
        fc, proj = nn.Linear(mlp.fc.in_features, n_keep), nn.Linear(n_keep, mlp.proj.out_features)
        with torch.no_grad():
            fc.weight.copy_(mlp.fc.weight[keep])
            fc.bias.copy_(mlp.fc.bias[keep])
            proj.weight.copy_(mlp.proj.weight[:, keep])
            proj.bias.copy_(mlp.proj.bias)
        mlp.fc, mlp.proj = fc, proj
    return model


# ---- fine-tuning -------------------------------------------------------------------------------

@dataclass
class FineTune:
    losses: list      # training loss of each step
    seconds: float    # wall time of all steps


def fine_tune(model: nn.Module, spec, steps: int, lr: float | None = None) -> FineTune:
    """Train ``model`` in place for ``steps`` AdamW steps on fresh batches of ``spec``'s data.

    Runs in this process on ``spec.threads_per_rank`` threads, on batches drawn with another
    seed than training used (``spec.seed + 1``). Pruning masks stay applied while it trains.
    """
    from ..data import batches

    checks.where("steps", steps, checks.int_in(1), "an integer >= 1")
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr or spec.lr, weight_decay=0.0)
    saved = torch.get_num_threads()
    torch.set_num_threads(spec.threads_per_rank)
    model.train()
    losses, start = [], time.perf_counter()
    try:
        for inputs, targets in batches(spec.replace(seed=spec.seed + 1, steps=steps)):
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    finally:
        torch.set_num_threads(saved)
        model.eval()
    return FineTune(losses, time.perf_counter() - start)


def matmul_seconds(weight: torch.Tensor, inputs: torch.Tensor, repeats: int = 20,
                   threads: int = 1) -> dict[str, float]:
    """Time of ``inputs @ weightᵀ`` (fastest of ``repeats``) with ``weight`` dense, and as sparse CSR.

    A dense kernel multiplies every entry, zeros included; a sparse format skips the zeros but
    pays for indices and irregular memory access. Both measured here, on ``threads`` threads.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Sparse CSR tensor support is in beta"
        sparse = weight.detach().to_sparse_csr()
    x_t = inputs.detach().t().contiguous()
    variants = {"dense": lambda: inputs @ weight.t(), "sparse_csr": lambda: sparse @ x_t}
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            times = {name: [] for name in variants}
            for fn in variants.values():
                fn()  # warm-up
            for _ in range(repeats):
                for name, fn in variants.items():
                    start = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - start)
        return {name: min(t) for name, t in times.items()}  # others can only slow a run down
    finally:
        torch.set_num_threads(saved)
