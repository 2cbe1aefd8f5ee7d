"""The planner's context-parallel and expert-parallel terms, on hand-worked numbers."""
from __future__ import annotations

import pytest
from torch.testing import assert_close

from gpututor.catalog import get_link
from gpututor.plan.memory import (Transformer, activation_bytes, activation_bytes_per_layer,
                                  model_state_bytes, per_device_memory)
from gpututor.plan.time import all_to_all_seconds, ring_attention_seconds, step_time

MODEL = Transformer(4, 512, 8, 32000, 8192)


def test_context_parallel_divides_every_activation_term():
    for recompute in ("none", "selective", "full"):
        whole = activation_bytes_per_layer(8192, 1, 512, 8, recompute=recompute)
        assert_close(activation_bytes_per_layer(8192, 1, 512, 8, recompute=recompute, cp=4), whole / 4)
    assert_close(activation_bytes(MODEL, cp=2), activation_bytes(MODEL) / 2)
    with pytest.raises(ValueError, match="cp=0"):
        activation_bytes_per_layer(8192, 1, 512, 8, cp=0)


def test_experts_are_split_over_ep_and_sharded_over_the_rest_of_dp():
    # 100 parameters, 60 of them experts, 16 bytes each (bf16 + Adam): dense 40 whole,
    # experts 60 / ep=2 = 30 per device
    assert model_state_bytes(100, expert_params=60, ep=2, dp=2)["total"] == (40 + 30) * 16
    # ZeRO-1 over dp=4: the dense part's optimizer state over 4, the experts' over dp/ep = 2
    zero1 = model_state_bytes(100, expert_params=60, ep=2, dp=4, zero_stage=1)
    assert zero1["optimizer"] == 40 * 12 / 4 + 30 * 12 / 2
    with pytest.raises(ValueError, match="ep=3 is invalid with dp=4"):
        model_state_bytes(100, expert_params=60, ep=3, dp=4)
    with pytest.raises(ValueError, match="expert_params=100"):
        model_state_bytes(100, expert_params=100)


def test_context_parallel_ranks_join_the_zero_shards():
    plain = per_device_memory(MODEL, zero_stage=1, dp=2)
    with_cp = per_device_memory(MODEL, zero_stage=1, dp=2, cp=2)
    assert_close(with_cp["optimizer"], plain["optimizer"] / 2)
    assert_close(with_cp["activations"], plain["activations"] / 2)


def test_all_to_all_and_ring_attention_times():
    assert all_to_all_seconds(4e9, 4, 1e9) == pytest.approx(3.0)          # 3 rounds of 1 GB
    assert all_to_all_seconds(4e9, 1, 1e9) == 0.0
    # b=1, s=4096, h=1024, cp=4, 2-byte values: a K+V block is 2·1024·1024·2 = 4 MiB-ish
    block = 2 * 1 * 4096 / 4 * 1024 * 2
    # 3·4 - 2 = 10 messages: 3 K/V shifts forward, 3 backward, 4 of their gradients home
    assert ring_attention_seconds(1, 4096, 1024, 4, 1e9, 1e-5) == pytest.approx(10 * (1e-5 + block / 1e9))
    assert ring_attention_seconds(1, 4096, 1024, 1, 1e9) == 0.0


def test_step_time_reports_cp_and_ep_communication():
    link = get_link("nvlink4")
    base = dict(model=MODEL, tokens_per_step=8 * 8192, peak_flops=989e12, dp=2,
                dp_link=link, cp_link=link, ep_link=link)
    plain = step_time(n_gpus=2, **base)
    assert plain["cp_comm_s"] == plain["ep_comm_s"] == 0.0
    cp = step_time(n_gpus=4, cp=2, **base)
    assert cp["cp_comm_s"] > 0 and 0 <= cp["cp_exposed_s"] <= cp["cp_comm_s"]
    assert_close(cp["compute_s"], plain["compute_s"] / 2)
    ep = step_time(n_gpus=2, ep=2, **base)
    assert ep["ep_comm_s"] > 0 and ep["step_s"] == pytest.approx(plain["step_s"] + ep["ep_comm_s"])


def test_zero3_gathers_two_layers_whenever_it_shards_also_over_cp_alone():
    """ZeRO-3 over dp·cp ranks holds two unsharded layers (the one computing and the one
    prefetched), also with dp = 1 and cp = 2 (the planner left them out there)."""
    from gpututor.plan.memory import (PRESETS, bytes_per_param, model_state_bytes,
                                      per_device_memory)
    model = PRESETS["7b"]
    got = per_device_memory(model, zero_stage=3, dp=1, cp=2)["params"]
    sharded = model_state_bytes(model.n_params, zero_stage=3, dp=2)["params"]
    assert got == pytest.approx(sharded + 2 * model.layer_params * bytes_per_param().params)
    assert per_device_memory(model, zero_stage=3, dp=1, cp=1)["params"] == \
        pytest.approx(model_state_bytes(model.n_params, zero_stage=3, dp=1)["params"])


def test_each_recompute_lever_is_charged_the_layer_it_recomputes():
    """Selective recomputation holds one layer's recomputed scores in backward, as full
    recomputation holds one whole layer; with a fused attention kernel no layer holds scores, and
    full recomputation is then the smaller at 128k (lesson 10, section 5)."""
    model = Transformer(32, 4096, 32, 32000, 131072, 6.74e9)
    layer = {r: activation_bytes_per_layer(131072, 1, 4096, 32, tp=8, recompute=r)
             for r in ("none", "selective")}
    eager = {r: activation_bytes(model, tp=8, recompute=r) for r in ("none", "selective")}
    assert_close(eager["selective"] - activation_bytes(model, tp=8, recompute="selective",
                                                       attention="fused"),
                 layer["none"] - layer["selective"])
    fused = {r: activation_bytes(model, tp=8, recompute=r, attention="fused")
             for r in ("none", "selective", "full")}
    assert fused["none"] == fused["selective"] > 4 * fused["full"]
    with pytest.raises(ValueError):
        activation_bytes(model, attention="flash")
