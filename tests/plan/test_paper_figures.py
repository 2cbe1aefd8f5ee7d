"""The planner's formulas reproduce published figures, one test per figure with its source:
the ZeRO paper's model states, Korthikanti et al.'s activations, Megatron-LM's training time,
GPT-3's compute, PaLM's FLOPs per token against the model's own count."""
import pytest
import torch

from gpututor import RunSpec, build_model, catalog, formulas
from gpututor.measure.flops import model_flops_per_token
from gpututor.plan import time as plan_time
from gpututor.plan.memory import (Transformer, activation_bytes_per_layer, bytes_per_param,
                                  model_state_bytes)

GB = catalog.GB
DAY = formulas.DAY

# ---- published figures ---------------------------------------------------------------------------
# Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models",
# Figure 1 and Table 1: per-device model states, Ψ parameters, Nd data-parallel devices, K = 12.

ZERO_TABLE_1 = [  # (Ψ, Nd, stage, GB as printed)
    (7.5e9, 64, 0, "120"), (7.5e9, 64, 1, "31.4"), (7.5e9, 64, 2, "16.6"), (7.5e9, 64, 3, "1.88"),
    (7.5e9, 1024, 1, "30.1"), (7.5e9, 1024, 2, "15.1"), (7.5e9, 1024, 3, "0.12"),
    (128e9, 64, 1, "536"), (128e9, 64, 2, "284"), (128e9, 64, 3, "32"),
    (1e12, 1024, 3, "15.6"),
]


@pytest.mark.parametrize("psi,nd,stage,printed", ZERO_TABLE_1,
                         ids=[f"{p / 1e9:g}B-Nd{n}-stage{s}" for p, n, s, _ in ZERO_TABLE_1])
def test_zero_paper_table1_per_device_model_states(psi, nd, stage, printed):
    """ZeRO paper, Figure 1 / Table 1 (mixed-precision Adam, 2 + 2 + 12 bytes per parameter)."""
    got = model_state_bytes(psi, "fp16", "adam", zero_stage=stage, dp=nd)["total"] / GB
    decimals = len(printed.partition(".")[2])        # rounded as the paper prints it
    assert round(got, decimals) == pytest.approx(float(printed))


def test_zero_paper_gpt2_model_states():
    """ZeRO paper, section 3.1: GPT-2 (1.5B) has 3 GB of fp16 weights, yet training it with
    mixed-precision Adam needs at least 24 GB for the model states."""
    states = model_state_bytes(1.5e9, "fp16", "adam")
    assert states["params"] / GB == pytest.approx(3.0)
    assert states["total"] / GB == pytest.approx(24.0)
    assert bytes_per_param("bf16", "adam").total == 16   # 2 + 2 + K, K = 12


# Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models".
GPT3 = dict(seq_len=2048, micro_batch=1, d_model=12288, n_head=96)    # their Table 3
MT_NLG = dict(seq_len=2048, micro_batch=1, d_model=20480, n_head=128)


def test_activation_formula_table2_no_parallelism():
    """Korthikanti et al., eq. 1 / Table 2: s·b·h·(34 + 5·a·s/h) bytes per layer."""
    s, b, h, a = 2048, 1, 12288, 96
    assert activation_bytes_per_layer(s, b, h, a) == s * b * h * (34 + 5 * a * s / h)
    assert activation_bytes_per_layer(s, b, h, a, recompute="full") == 2 * s * b * h


@pytest.mark.parametrize("t", [2, 4, 8])
def test_activation_formula_table2_tensor_and_sequence_parallel(t):
    """Korthikanti et al., Table 2: tensor parallel s·b·h·(10 + 24/t + 5as/(ht)); with sequence
    parallel s·b·h·(34/t + 5as/(ht)); with selective recomputation too, s·b·h·34/t."""
    s, b, h, a = 2048, 1, 12288, 96
    sbh, scores = s * b * h, 5 * a * s / (h * t)
    assert activation_bytes_per_layer(s, b, h, a, tp=t) == \
        pytest.approx(sbh * (10 + 24 / t + scores))
    assert activation_bytes_per_layer(s, b, h, a, tp=t, sequence_parallel=True) == \
        pytest.approx(sbh * (34 / t + scores))
    assert activation_bytes_per_layer(s, b, h, a, tp=t, sequence_parallel=True,
                                      recompute="selective") == pytest.approx(sbh * 34 / t)


@pytest.mark.parametrize("shape,saving", [(GPT3, 0.70), (MT_NLG, 0.65)], ids=["GPT-3", "MT-NLG"])
def test_selective_recomputation_saving(shape, saving):
    """Korthikanti et al., section 4.2: selective recomputation cuts the activation memory by
    70 % for GPT-3 (5as/h = 80) and 65 % for MT-NLG (5as/h = 64)."""
    full = activation_bytes_per_layer(**shape, tp=8, sequence_parallel=True)
    selective = activation_bytes_per_layer(**shape, tp=8, sequence_parallel=True,
                                           recompute="selective")
    assert 1 - selective / full == pytest.approx(saving, abs=0.005)


def test_sequence_parallel_plus_selective_is_about_5x():
    """Korthikanti et al., abstract: together, sequence parallelism and selective recomputation
    reduce activation memory about 5x (MT-NLG 530B, t = 8, against tensor parallel alone)."""
    base = activation_bytes_per_layer(**MT_NLG, tp=8)
    both = activation_bytes_per_layer(**MT_NLG, tp=8, sequence_parallel=True,
                                      recompute="selective")
    assert base / both == pytest.approx(5.0, rel=0.02)


@pytest.mark.parametrize("params,layers,width,heads,tokens,gpus,tflops,days", [
    (175e9, 96, 12288, 96, 300e9, 1024, 140, 34), (1008e9, 128, 25600, 160, 450e9, 3072, 163, 84)],
    ids=["GPT-3", "1T"])
def test_megatron_end_to_end_training_time(params, layers, width, heads, tokens, gpus, tflops,
                                           days):
    """Narayanan et al. 2021 (Megatron-LM, SC'21), section 5.1 and Table 1: 8·T·P/(n·X) gives
    about 34 days for GPT-3 175B on 300B tokens (1024 A100s at 140 TFLOP/s) and 84 days for the
    1T model (128 layers, width 25600) on 450B tokens (3072 GPUs at 163 TFLOP/s). The planner
    counts the same FLOPs with attention's term, a factor 1 + s/(6h), which 8·T·P leaves out."""
    s = 2048
    model = Transformer(layers, width, heads, 51200, s, params=params)
    flops = plan_time.training_flops_per_token(model, recompute="full") * tokens / gpus
    seconds = plan_time.compute_seconds(flops, tflops * 1e12, hfu=1.0)   # X: what a GPU reached
    assert seconds / DAY == pytest.approx(days * (1 + s / (6 * width)), abs=0.6)
    # the count behind it, their eq. for a step with full recomputation (per token, the logit
    # layer left out): 96·l·h²·(1 + s/(6h))
    l, h = 96, 12288
    model = Transformer(l, h, 96, 51200, s, params=12 * l * h ** 2)
    per_token = plan_time.training_flops_per_token(model, recompute="full")
    assert per_token == pytest.approx(96 * l * h ** 2 * (1 + s / (6 * h)), rel=1e-12)


def test_gpt3_training_compute():
    """Brown et al. 2020, Table D.1: GPT-3 175B on 300B tokens took 3.14e23 FLOPs (6·N·D: the
    FLOPs per token without attention's term, times the tokens)."""
    assert formulas.training_flops_per_token(175e9) * 300e9 == pytest.approx(3.14e23, rel=0.01)


def test_flops_per_token_matches_the_models_own_count():
    """PaLM's 6·N + 12·L·s·h is what gpututor.models counts (N: the matmul weights)."""
    spec = RunSpec(model="gpt", model_size="small", strategy="single", world_size=1, seq_len=64)
    model = build_model(spec)
    cfg = model.cfg
    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    shape = Transformer(cfg.n_layer, cfg.d_model, cfg.n_head, cfg.vocab_size, 64, weights)
    assert plan_time.training_flops_per_token(shape) == model_flops_per_token(model, 64)


def test_ring_allreduce_and_bubble_formulas():
    """Patarasuk & Yuan 2009: a ring all-reduce moves 2(n-1)/n·S per rank; bubble (p-1)/m."""
    assert formulas.ring_allreduce_seconds(8e9, 8, 100e9) == pytest.approx(2 * 7 / 8 * 8e9 / 100e9)
    assert formulas.ring_allreduce_seconds(8e9, 1, 100e9) == 0
    assert formulas.bubble_to_compute_ratio(8, 32) == 7 / 32


