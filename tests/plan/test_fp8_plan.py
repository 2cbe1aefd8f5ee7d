"""FP8 in the planner: the catalogue's dense FP8 peaks (half the datasheets' sparse figures),
None on GPUs without FP8 units, a plan in fp8 refused there naming the GPU, and an FP8 step
whose compute splits into the weights' matmuls at the FP8 peak and the rest at bf16's."""
import pytest

from gpututor import catalog
from gpututor.checks import InvalidValue
from gpututor.plan.memory import PRESETS
from gpututor.plan.recommend import Config, estimate, recommend
from gpututor.plan.time import fp8_flops_per_token, step_time, training_flops_per_token

# datasheet FP8 tensor TFLOPS with sparsity; the catalogue holds half (dense)
SPARSE_FP8 = {"H100-80GB": 3958, "H100-PCIe-80GB": 3026, "H200-141GB": 3958, "L4-24GB": 485,
              "L40S-48GB": 1466}
NO_FP8 = ("V100-32GB", "A100-40GB", "A100-80GB", "A10-24GB", "T4-16GB")


@pytest.mark.parametrize("gpu, sparse", SPARSE_FP8.items())
def test_the_fp8_peak_is_half_the_datasheets_sparse_figure(gpu, sparse):
    peak = catalog.get_gpu(gpu).peak("fp8")
    assert peak == pytest.approx(sparse / 2 * 1e12, rel=1e-3)
    assert peak == pytest.approx(2 * catalog.get_gpu(gpu).peak("bf16"), rel=0.02)
    assert "FP8" in catalog.get_gpu(gpu).source


@pytest.mark.parametrize("gpu", NO_FP8)
def test_a_gpu_without_fp8_units_has_none_and_a_plan_in_fp8_is_refused_naming_it(gpu):
    assert catalog.get_gpu(gpu).peak_flops["fp8"] is None
    config = Config(gpu, count=8, link=catalog.get_gpu(gpu).links[0], zero_stage=3)
    with pytest.raises(InvalidValue, match=f"gpu='{gpu}': it has no fp8 units"):
        estimate(PRESETS["7b"], 140e9, config, precision="fp8")
    with pytest.raises(InvalidValue, match=gpu):
        recommend(PRESETS["7b"], 140e9, gpus=("H100-80GB", gpu), max_gpus=8, precision="fp8")


def test_the_rtx_4090_has_fp8_units_but_no_listed_rate_and_says_so():
    with pytest.raises(InvalidValue, match="it has FP8 units, but its dense FP8 rate"):
        catalog.get_gpu("RTX4090-24GB").peak("fp8")


def test_add_gpu_takes_an_fp8_peak():
    try:
        gpu = catalog.add_gpu("test-fp8", 80, {"bf16": 100, "fp8": 200}, 1000)
        assert gpu.peak("fp8") == 200e12
        gpu = catalog.add_gpu("test-fp8", 80, {"bf16": 100}, 1000)
        with pytest.raises(InvalidValue, match="no fp8 units"):
            gpu.peak("fp8")
    finally:
        catalog.GPUS.pop("test-fp8", None)


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_an_fp8_step_runs_the_weights_matmuls_at_the_fp8_peak_and_the_rest_at_bf16s(recompute):
    model, gpu = PRESETS["7b"], catalog.get_gpu("H100-80GB")
    tokens, hfu = 2 ** 20, 0.4
    s = step_time(model, tokens, 1, gpu.peak("bf16"), hfu, recompute=recompute,
                  fp8_peak_flops=gpu.peak("fp8"))
    per_gpu = tokens
    fp8 = fp8_flops_per_token(model, recompute) * per_gpu
    rest = training_flops_per_token(model, recompute, False) * per_gpu - fp8
    assert fp8 == pytest.approx((8 if recompute == "full" else 6)
                                * (model.n_params - model.vocab_size * model.d_model) * per_gpu)
    assert s["compute_s"] == pytest.approx(fp8 / (gpu.peak("fp8") * hfu)
                                           + rest / (gpu.peak("bf16") * hfu))
    assert s["fp8_flops_per_gpu"] == pytest.approx(fp8)
    assert s["hfu"] == pytest.approx(hfu)   # one GPU's step: no wait, HFU as assumed


def test_fp8_keeps_bf16s_memory_and_shortens_the_step_by_less_than_twice():
    model, config = PRESETS["7b"], Config("H100-80GB", count=8, zero_stage=3)
    bf16 = estimate(model, 140e9, config, "bf16")
    fp8 = estimate(model, 140e9, config, "fp8")
    assert fp8.memory == bf16.memory and fp8.precision == "fp8" and bf16.precision == "bf16"
    assert 1 < bf16.step["step_s"] / fp8.step["step_s"] < 2   # attention and the head stay bf16
    assert fp8.cost < bf16.cost
    assert fp8.reasons[0].startswith("precision: FP8 for the weights' matmuls")
    assert fp8.to_dict()["precision"] == "fp8"
    assert bf16.step["fp8_flops_per_gpu"] == 0


def test_recommend_plans_fp8_where_the_gpus_have_it():
    rec = recommend(PRESETS["7b"], 140e9, gpus=("H100-80GB", "H200-141GB"), max_gpus=16,
                    deadline_days=30, precision="fp8")
    assert rec.ranked and all(e.precision == "fp8" for e in rec.ranked + rec.rejected)
