"""The roofline: FLOPs counted by hand agree with torch's FLOP counter, bytes are the least
traffic, the roof and ridge on hand-worked numbers, catalogue roofs, and the figure."""
from __future__ import annotations

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from gpututor import RunSpec, build_model
from gpututor.measure.roofline import (FLOPS_PER_ELEMENT, attainable, bound, catalog_roofs,
                                       intensity_in, memory_bandwidth, operator_costs,
                                       peak_matmul_flops, ridge)
from gpututor.catalog import GPUS
from gpututor.lessons.one_device_speed.roofline_figures import roofline_figure

SPEC = RunSpec(model="gpt", model_size="tiny", batch_size=2, seq_len=16, world_size=1,
               strategy="single")
B, T = SPEC.batch_size, SPEC.seq_len


@pytest.fixture(scope="module")
def rows():
    return {r["op"]: r for r in operator_costs(SPEC, threads=1, repeats=2, min_time_s=0.01)}


@pytest.fixture(scope="module")
def model():
    return build_model(SPEC)


def linears(model) -> dict:
    block = model.blocks[0]
    return {"linear: attention qkv": block.attn.qkv, "linear: attention out proj": block.attn.proj,
            "linear: MLP fc": block.mlp.fc, "linear: MLP proj": block.mlp.proj,
            "linear: LM head": model.head}


def counted_flops(call) -> int:
    with FlopCounterMode(display=False) as counter:
        call()
    return counter.get_total_flops()


def test_linear_flops_are_what_torchs_counter_counts(rows, model):
    for op, module in linears(model).items():
        x = torch.randn(rows[op]["shape"])
        assert rows[op]["flops"] == counted_flops(lambda: module(x)), op


def test_attention_matmul_flops_are_what_torchs_counter_counts(rows, model):
    cfg = model.cfg
    q = k = torch.randn(B, cfg.n_head, T, cfg.d_model // cfg.n_head)
    p = torch.randn(B, cfg.n_head, T, T)
    assert rows["matmul: attention scores q·kᵀ"]["flops"] == counted_flops(
        lambda: q @ k.transpose(-2, -1))
    assert rows["matmul: attention mix p·v"]["flops"] == counted_flops(lambda: p @ k)


def test_matmul_bytes_are_inputs_weights_and_output_once(rows, model):
    m = B * T
    for op, module in linears(model).items():
        k, n = module.in_features, module.out_features
        bias = n if module.bias is not None else 0
        assert rows[op]["bytes"] == (m * k + k * n + m * n + bias) * 4, op
    assert model.head.bias is None     # the tied LM head: no bias to read


def test_elementwise_rows_follow_the_stated_conventions(rows, model):
    cfg = model.cfg
    scores, hidden, tokens = B * cfg.n_head * T * T, B * T * 4 * cfg.d_model, B * T * cfg.d_model
    assert rows["softmax"]["flops"] == 5 * scores == FLOPS_PER_ELEMENT["softmax"] * scores
    assert rows["softmax"]["bytes"] == 2 * scores * 4
    assert rows["GELU"]["flops"] == FLOPS_PER_ELEMENT["GELU"] * hidden
    assert rows["GELU"]["bytes"] == 2 * hidden * 4
    assert rows["residual add"]["bytes"] == 3 * tokens * 4           # two read, one written
    assert rows["layer norm"]["bytes"] == (2 * tokens + 2 * cfg.d_model) * 4   # + γ and β


def test_rows_cover_the_main_operators_with_consistent_numbers(rows):
    assert set(linears(build_model(SPEC))) <= set(rows)
    assert {"layer norm", "GELU", "softmax", "residual add"} <= set(rows)
    for op, r in rows.items():
        assert r["intensity"] == r["flops"] / r["bytes"], op
        assert r["seconds"] > 0 and math.isfinite(r["seconds"]), op
        assert r["flops_per_s"] == pytest.approx(r["flops"] / r["seconds"]), op
    # the idea of the lesson: a matmul does many FLOPs per byte, an elementwise op few
    assert rows["linear: MLP fc"]["intensity"] > 10 * rows["GELU"]["intensity"]


def test_roof_and_ridge_on_hand_worked_numbers():
    peak, bandwidth = 100e9, 10e9                   # 100 GFLOP/s, 10 GB/s: ridge at 10
    assert ridge(peak, bandwidth) == 10
    assert attainable(2, peak, bandwidth) == 20e9   # left of the ridge: bandwidth × intensity
    assert attainable(50, peak, bandwidth) == 100e9  # right of it: the peak
    assert attainable(10, peak, bandwidth) == 100e9  # at it: both roofs meet
    assert bound(2, peak, bandwidth) == "memory-bound"
    assert bound(50, peak, bandwidth) == "compute-bound"
    assert bound(10, peak, bandwidth) == "compute-bound"
    assert bound(9.99, peak, bandwidth) == "memory-bound"


def test_measured_roofs_are_positive_and_threads_restored():
    threads = torch.get_num_threads()
    bandwidth = memory_bandwidth(threads=1, nbytes=4_000_000, min_time_s=0.03)
    peak = peak_matmul_flops(threads=1, size=128, min_time_s=0.03)
    assert 0 < bandwidth < math.inf and 0 < peak < math.inf
    assert torch.get_num_threads() == threads


def test_catalog_roofs_are_the_catalogues_numbers():
    a100, h100 = catalog_roofs()
    for roof, gpu in ((a100, GPUS["A100-80GB"]), (h100, GPUS["H100-80GB"])):
        assert roof["peak"] == gpu.peak("bf16") and roof["bandwidth"] == gpu.memory_bandwidth
        assert roof["ridge"] == gpu.peak("bf16") / gpu.memory_bandwidth
        assert roof["source"] == gpu.source
    assert a100["ridge"] == pytest.approx(312e12 / 2039e9)
    assert catalog_roofs(["A100-80GB"], precision="fp32")[0]["peak"] == 19.5e12
    with pytest.raises(ValueError, match=r"gpu='B9000' is invalid: allowed values are .*'A100-80GB'"):
        catalog_roofs(["A100-80GB", "B9000"])


@pytest.mark.parametrize("call,field", [
    (lambda: memory_bandwidth(threads=0), "threads=0"),
    (lambda: memory_bandwidth(nbytes=-1), "nbytes=-1"),
    (lambda: memory_bandwidth(min_time_s=0), "min_time_s=0"),
    (lambda: memory_bandwidth(device="tpu"), "device='tpu'"),
    (lambda: peak_matmul_flops(size=0), "size=0"),
    (lambda: peak_matmul_flops(dtype=torch.int32), "dtype=torch.int32"),
    (lambda: operator_costs(SPEC, repeats=0), "repeats=0"),
    (lambda: attainable(1, -1, 1), "peak=-1"),
    (lambda: ridge(1, 0), "bandwidth=0"),
    (lambda: bound(float("nan"), 1, 1), "intensity=nan"),
])
def test_bad_arguments_name_the_field(call, field):
    with pytest.raises(ValueError, match=rf"{field.replace('.', '[.]')} is invalid: allowed"):
        call()


def test_figure_has_the_roofs_the_points_and_the_ridge_in_its_title(rows):
    peak, bandwidth = 100e9, 10e9
    roofs = catalog_roofs()
    fig = roofline_figure(list(rows.values()), peak, bandwidth, roofs)
    names = [trace.name for trace in fig.data]
    assert names == ["this machine, measured", "A100-80GB, catalogue (not measured)",
                     "H100-80GB, catalogue (not measured)", "operators, measured here"]
    here, *catalogue, points = fig.data
    assert list(here.x)[1] == 10 and list(here.y)[1:] == [peak, peak]   # flat from the ridge on
    assert all(t.line.dash == "dash" for t in catalogue) and here.line.dash is None
    assert list(points.x) == [r["intensity"] for r in rows.values()]
    assert list(points.y) == [r["flops_per_s"] for r in rows.values()]
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "log"
    assert "ridge at 10 FLOP/byte here" in fig.layout.title.text
    assert "A100-80GB 153" in fig.layout.title.text


def test_timed_calls_wait_for_the_device_between_batches_not_after_every_call(monkeypatch):
    """On a GPU a synchronisation per call times its round trip, not the kernel: the timer syncs
    only between batches of calls that double, so n calls cost about log2(n) syncs."""
    from gpututor.measure import timing
    syncs, calls = [], []
    monkeypatch.setattr(timing, "synchronize", lambda device: syncs.append(device))
    mean = timing.seconds_per_call(lambda: calls.append(1), torch.device("cpu"), budget_s=0.02)
    assert len(calls) > 100 and mean > 0
    assert len(syncs) <= 2 + math.log2(len(calls) + 1), (len(syncs), len(calls))


def test_intensity_in_bf16_is_twice_the_fp32_rows(rows):
    """The GPU roofs are bf16 roofs: the same operator moves 2-byte elements there."""
    for r in rows.values():
        assert r["bytes"] == 4 * r["elements"]
        assert intensity_in(r, "fp32") == pytest.approx(r["intensity"])
        assert intensity_in(r, "bf16") == pytest.approx(2 * r["intensity"])
    with pytest.raises(ValueError, match="precision='int3' is invalid"):
        intensity_in(next(iter(rows.values())), "int3")
