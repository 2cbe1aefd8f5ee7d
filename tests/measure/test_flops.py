"""Device peaks: one table (the planner's catalogue), matched by the exact CUDA name, and a peak
passed in for a device it does not name; MFU uses it."""
from __future__ import annotations

import pytest
import torch

from gpututor import RunSpec, launch
from gpututor.measure.flops import device_peak_flops
from gpututor.catalog import GPUS, gpu_for_cuda_name


@pytest.mark.parametrize("cuda_name,entry", [
    ("NVIDIA H100 80GB HBM3", "H100-80GB"), ("NVIDIA H100 PCIe", "H100-PCIe-80GB"),
    ("NVIDIA L40S", "L40S-48GB"), ("NVIDIA A10", "A10-24GB"), ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
])
def test_exact_cuda_names_pick_their_own_entry(cuda_name, entry):
    assert gpu_for_cuda_name(cuda_name).name == entry


def test_no_substring_matches():
    """An H100 PCIe must not get the SXM peak, and an unknown card gets none at all."""
    assert gpu_for_cuda_name("NVIDIA H100 PCIe").peak("bf16") < GPUS["H100-80GB"].peak("bf16")
    for name in ("NVIDIA A10G", "NVIDIA H100", "H100", "NVIDIA GeForce RTX 3090"):
        assert gpu_for_cuda_name(name) is None, name


def test_each_cuda_name_belongs_to_one_entry():
    names = [n for g in GPUS.values() for n in g.cuda_names]
    assert len(names) == len(set(names))


def test_device_peak_on_cuda_mocked(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA L40S")
    assert device_peak_flops(torch.device("cuda", 0), "bf16") == pytest.approx(362e12)
    assert device_peak_flops(torch.device("cpu"), "bf16") is None


def test_a_peak_passed_in_gives_mfu_where_the_catalogue_has_none():
    spec = RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1, steps=4,
                   batch_size=8, device="cpu")
    assert launch(spec).wait()["mfu"] is None             # CPU: no datasheet peak
    summary = launch(spec.replace(peak_flops=1e12)).wait()
    # MFU is the model's FLOP/s over the peak passed in: one rank, so the medians agree
    assert summary["mfu"] == pytest.approx(summary["achieved_flops"] / 1e12, rel=1e-9)
    assert 0 < summary["mfu"] < 1   # a CPU core reaches far less than 1 TFLOP/s
    with pytest.raises(ValueError, match=r"peak_flops=-1 is invalid: allowed is None or"):
        spec.replace(peak_flops=-1)


def test_a_mixture_of_experts_counts_the_experts_a_token_uses():
    from gpututor import RunSpec, build_model
    from gpututor.measure.flops import matmul_parameters
    from gpututor.moe import moe_layers

    model = build_model(RunSpec(model="moe", model_size="tiny", world_size=1))
    layers = moe_layers(model)
    one_expert = sum(m.weight.numel() for m in layers[0].experts["0"].modules()
                     if isinstance(m, torch.nn.Linear))
    everything = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    unused = sum((layer.n_expert - layer.top_k) * one_expert for layer in layers)
    assert matmul_parameters(model) == everything - unused
    del layers[0].experts["3"]          # an expert-parallel rank holds fewer: the same count
    assert matmul_parameters(model) == everything - unused
