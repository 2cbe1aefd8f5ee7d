"""Lesson 01b's verdicts: each wording is chosen by the numbers that select it (fed here, nothing
measured), and the published A100 figure is the paper's."""
from gpututor.lessons.one_device import verdicts
from gpututor.parallel.link import EmulatedLink


def attention_rows(naive_growth: float, tiled_growth: float, tiled_time: float) -> list[dict]:
    rows = []
    for way, growth, time in (("naive", naive_growth, 1.0), ("tiled", tiled_growth, tiled_time),
                              ("sdpa", tiled_growth, 0.3)):
        rows += [{"way": way, "seq_len": 512, "saved_bytes": 1e6, "seconds": time / 2},
                 {"way": way, "seq_len": 1024, "saved_bytes": 1e6 * growth, "seconds": time}]
    return rows


def test_kept_bytes_grow_as_t_squared_and_as_t_or_otherwise():
    headline, details, tone = verdicts.memory_verdict(attention_rows(3.9, 2.0, 1.0))
    assert "by 3.9 (as T² would)" in headline and "by 2.0 (as T would)" in headline
    assert tone == "good" and "at T = 1024: naive keeps 3.9 MB" in details
    headline, _, tone = verdicts.memory_verdict(attention_rows(2.1, 3.8, 1.0))
    assert "(×4 would be T², ×2 would be T)" in headline and tone == "mixed"


def flops(tiled_total: float) -> dict:
    part = lambda total: {"forward": total / 3, "backward": 2 * total / 3, "total": total}
    return {"naive": part(100.0), "tiled": part(tiled_total), "tiles": {"all": 4, "computed": 3}}


CALLS = {"naive": {"wall_s": 0.05, "aten_calls": 200, "aten_s": 0.048, "matmul_s": 0.02},
         "tiled": {"wall_s": 0.045, "aten_calls": 38025, "aten_s": 0.034, "matmul_s": 0.012}}


def test_tiled_time_slower_despite_fewer_flops_slower_and_faster():
    rows = attention_rows(3.9, 2.0, 1.3)
    headline, details, tone = verdicts.time_verdict(rows, {512: flops(117.0), 1024: flops(62.0)}, CALLS)
    assert "1.30× ordinary attention's time although it computes fewer FLOPs" in headline
    assert tone == "bad" and "38,025 operator calls" in details and "0.62x in all" in details
    headline, _, _ = verdicts.time_verdict(rows, {1024: flops(120.0)}, CALLS)
    assert "although" not in headline and "1.30×" in headline
    headline, _, tone = verdicts.time_verdict(attention_rows(3.9, 2.0, 0.84), {1024: flops(62.0)}, CALLS)
    assert "as fast or faster, the FLOPs it skips" in headline and "SDPA: 0.30×" in headline
    assert tone == "good"
    headline, _, _ = verdicts.time_verdict(attention_rows(3.9, 2.0, 0.84), {1024: flops(120.0)}, CALLS)
    assert headline.endswith("(SDPA: 0.30×): as fast or faster")


def recomputation(variant_bytes: float, variant_s: float) -> list[dict]:
    return [{"policy": "none", "saved_bytes": 39.3e6, "seconds": 0.054},
            {"policy": "selective", "saved_bytes": 35.1e6, "seconds": 0.060},
            {"policy": "full", "saved_bytes": 3.6e6, "seconds": 0.065},
            {"policy": "matmul-outputs", "saved_bytes": variant_bytes, "seconds": variant_s}]


def test_recomputation_names_the_policy_that_kept_least_and_compares_the_variant():
    headline, details, _ = verdicts.recomputation_verdict(recomputation(28.7e6, 0.070))
    assert headline == "full kept the least for backward: 3.6 MB, 91% less than none, for 11 ms more a step"
    assert "no more than selective" in details and "more time than full" in details
    rows = recomputation(36e6, 0.045)
    rows[2]["seconds"] = 0.050   # full faster than none: noise on a busy machine
    headline, details, _ = verdicts.recomputation_verdict(rows)
    assert headline.endswith("and its step was not slower here (-4 ms)")
    assert "kept more than selective" in details and "no more time than full" in details
    assert verdicts.recomputation_rows(recomputation(28.7e6, 0.07))[2] == ["full", "3.6", "91%", "65", "+11"]


def test_selective_saves_little_or_much_by_the_count():
    kept = {"none": 39.3e6, "selective": 35.0e6}
    small = dict(seq_len=64, micro_batch=16, d_model=128, n_head=4)
    headline, details, tone = verdicts.selective_verdict(small, 4, kept)
    assert "saves little here" in headline and tone == "mixed" and "11%" in headline
    assert "the paper's" in details and "39.3 MB in all" in details
    long = dict(seq_len=4096, micro_batch=1, d_model=128, n_head=16)
    headline, _, tone = verdicts.selective_verdict(long, 4, kept)
    assert "saves much of it" in headline and tone == "good"


def apart(short_within: bool, long_within: bool) -> list[dict]:
    row = lambda steps, name, distance, within: {"steps": steps, "name": name, "apart": distance,
                                                 "cosine": 0.9, "within": within, "loss": 3.2,
                                                 "reference_loss": 3.2}
    return [row(12, "Adam, 8-bit state", 0.05, short_within),
            row(12, "fp32 Adam, twice the learning rate", 1.2, False),
            row(40, "Adam, 8-bit state", 0.5, long_within),
            row(40, "fp32 Adam, twice the learning rate", 1.4, False)]


def test_8bit_adam_within_the_bounds_both_times_first_only_or_never():
    headline, details, tone = verdicts.adam8bit_verdict(apart(True, True))
    assert "after 12 and after 40 steps" in headline and tone == "good"
    assert "x10.0 for 8-bit Adam" in details and "outside the bounds" in details
    headline, _, tone = verdicts.adam8bit_verdict(apart(True, False))
    assert "not after 40: the distance grew ×10.0" in headline and tone == "mixed"
    headline, _, tone = verdicts.adam8bit_verdict(apart(False, False))
    assert "already after 12 steps" in headline and tone == "bad"
    assert verdicts.apart_rows(apart(True, False))[2][4] == "outside"


def offload(emulated_s: float, step_s: float) -> dict:
    base = {"losses": [1.0] * 6, "bytes_per_step": {"to_host": 4000, "to_device": 4000},
            "tensors": 52, "parameters": 1000}
    return {"Adam on the device": {**base, "step_s": 0.06, "emulated_s": 0.0},
            "offloaded, emulated link": {**base, "step_s": step_s, "emulated_s": emulated_s}}


def test_the_emulated_link_takes_most_of_the_step_or_less():
    link = EmulatedLink(bandwidth=1e6, latency=0.01)
    headline, details, tone = verdicts.offload_verdict(offload(0.3, 0.35), link)
    assert "took most of the offloaded step: 300 of 350 ms (86%)" in headline and tone == "bad"
    assert "52 tensors each way" in details and "1020 ms a step" in details
    headline, _, tone = verdicts.offload_verdict(offload(0.01, 0.06), link)
    assert "less than the compute" in headline and tone == "good"
    assert verdicts.offload_rows(offload(0.3, 0.35))[1] == ["offloaded, emulated link", "350", "300"]


def fit(name: str, size: str, parameters: float, fits: bool) -> dict:
    return {"name": name, "model_size": size, "parameters": parameters, "fits": fits,
            "peak_bytes": 1.0}


def test_the_largest_model_that_fits_with_and_without_the_levers():
    rows = [fit("as in lesson 01", "small", 0.84e6, True), fit("as in lesson 01", "large", 6.4e6, False),
            fit("levers", "small", 0.84e6, True), fit("levers", "large", 6.41e6, True)]
    headline, _, tone = verdicts.capacity_verdict(rows, 96_000_000)
    assert "grew from small (0.84 M parameters) to large (6.41 M)" in headline and tone == "good"
    rows[3]["fits"] = False
    assert "did not let a larger model fit" in verdicts.capacity_verdict(rows, 96_000_000)[0]
    rows[0]["fits"] = False
    assert verdicts.capacity_verdict(rows, 96_000_000)[0].startswith("Without the levers nothing")
    rows[2]["fits"] = False
    assert verdicts.capacity_verdict(rows, 96_000_000)[0].startswith("Nothing fits 96 MB")
    rows = [fit("as in lesson 01", "small", 0.84e6, True), fit("levers", "small", 0.84e6, False)]
    assert "with all of them nothing does" in verdicts.capacity_verdict(rows, 96_000_000)[0]


def test_the_published_flash_attention_figure_is_the_papers():
    # Dao et al. 2022, Figure 2 (left): 41.7 ms standard, 7.3 ms FlashAttention, A100, seq 1024
    assert verdicts.FLASH_ATTENTION_A100 == {"seq_len": 1024, "standard_ms": 41.7, "flash_ms": 7.3}
    assert round(verdicts.flash_attention_ratio(), 3) == 0.175


def test_the_emulation_table_names_the_reference_and_the_scaled_link():
    rows = verdicts.emulation_rows(1e11, "pcie4")
    assert rows[0][0] == "FLOP/s in a training step" and "100.0 GFLOP/s (measured)" == rows[0][2]
    assert rows[1][1] == "31.5 GB/s" and rows[2][1] == "10 µs"
