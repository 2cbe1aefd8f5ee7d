"""Lesson 04's verdicts: each wording is chosen by the numbers that select it (fed here, nothing
launched), and each table row says "not measured" where a figure is None."""
from gpututor import RunSpec
from gpututor.lessons.tensor_parallel import verdicts
from gpututor.models import INIT_STD
from gpututor.parallel.link import EmulatedLink


def vocab(share: float, flops: float) -> dict:
    return {"vocab_size": 96, "d_model": 128, "embedding_params": 12288, "params": 838400,
            "embedding_share": share, "head_flop_share": flops}


def test_a_small_embedding_is_kept_whole_and_a_large_one_would_pay_to_split():
    headline, details, tone = verdicts.vocabulary_verdict(vocab(0.015, 0.014))
    assert "keeps them whole" in headline and "1.5%" in headline and tone == "good"
    assert "12,288 of the 838,400" in details
    headline, _, tone = verdicts.vocabulary_verdict(vocab(0.30, 0.02))
    assert "would pay here" in headline and tone == "bad"


def test_weights_within_rounding_and_beyond_it():
    headline, details, tone = verdicts.training_verdict(
        {"tp": (2e-4, "blocks.1.mlp.proj.weight"), "tp-dtensor": (1e-4, "head.weight")}, steps=6)
    assert "trained as one process does" in headline and "2.0e-04" in headline and tone == "good"
    assert "in blocks.1.mlp.proj.weight" in details and "in head.weight" in details
    headline, _, tone = verdicts.training_verdict({"tp": (INIT_STD * 0.5, "w")}, steps=6)
    assert "more than rounding usually leaves" in headline and "50%" in headline and tone == "mixed"


def speeds(single, tp, dtensor):
    return ({"tokens_per_s": single}, {"tokens_per_s": tp}, {"tokens_per_s": dtensor})


def test_speed_both_slower_both_faster_mixed_and_not_measured():
    headline, details, tone = verdicts.speed_verdict(*speeds(100, 80, 60))
    assert "both tensor-parallel runs were slower" in headline and "0.80×" in headline
    assert tone == "bad" and "0.75× tp's tokens/s: the slower of the two" in details
    headline, details, tone = verdicts.speed_verdict(*speeds(100, 150, 160))
    assert "both tensor-parallel runs were faster" in headline and tone == "good"
    assert "not slower" in details
    headline, _, tone = verdicts.speed_verdict(*speeds(100, 120, 90))
    assert headline.startswith("On 2 ranks tp reached 1.20×") and tone == "mixed"
    assert "nothing to compare" in verdicts.speed_verdict(*speeds(100, None, 90))[0]


def counts(forward: int, backward: int) -> dict:
    return {"forward": {"all_reduce": forward}, "backward": {"all_reduce": backward}}


def test_dtensor_all_reduces_more_fewer_and_as_many():
    headline, _, tone = verdicts.count_verdict(counts(8, 16), 4.0, n_layer=4)
    assert "6 all-reduces per block" in headline and "2 more" in headline and tone == "bad"
    headline, _, _ = verdicts.count_verdict(counts(4, 4), 4.0, n_layer=4)
    assert "2 fewer" in headline
    headline, _, _ = verdicts.count_verdict(counts(8, 8), 4.0, n_layer=4)
    assert "as many all-reduces" in headline


def test_waiting_most_less_and_not_measured():
    run = {"comm_s": 0.06, "step_time_s": 0.1, "comm_bytes_per_step": 16e6}
    headline, details, tone = verdicts.wait_verdict(run, n_layer=4)
    assert "most of their step: 60%" in headline and tone == "bad" and "4.00 MB per block" in details
    headline, _, tone = verdicts.wait_verdict({**run, "comm_s": 0.02}, n_layer=4)
    assert "less than half" in headline and tone == "good"
    assert "not measured" in verdicts.wait_verdict({**run, "comm_s": None}, n_layer=4)[0]


def degree(params, activations, tokens=1000.0):
    return {"mem_by_category": {"params": [params], "activations": [activations]},
            "tokens_per_s": tokens}


def test_activations_shrink_less_than_parameters_or_as_much():
    runs = {"tp degree 1": degree(4e6, 8e6), "tp degree 4": degree(1e6, 4e6)}
    headline, _, tone = verdicts.degree_verdict(runs)
    assert "shrank 4.0× and its activations only 2.0×" in headline and tone == "mixed"
    runs["tp degree 4"] = degree(1e6, 2e6)
    headline, _, tone = verdicts.degree_verdict(runs)
    assert "activations 4.0×" in headline and "only" not in headline and tone == "good"
    runs["tp degree 4"] = degree(1e6, None, tokens=None)
    assert "not measured" in verdicts.degree_verdict(runs)[0]
    assert verdicts.degree_rows(runs)[1] == ["tp degree 4", "1.00", "not measured", "not measured"]


def link_run(comm_s, step_s=0.1, nbytes=16 * 1_048_576):
    return {"comm_s": comm_s, "step_time_s": step_s, "comm_bytes_per_step": nbytes}


def ddp_records(steps: int = 4) -> list[dict]:
    buckets = [{"index": 0, "bytes": 100, "before_last_grad_s": 0.01},
               {"index": 1, "bytes": 300, "before_last_grad_s": 0.0}]
    return [{"rank": r, "step": s, "probe": s in (1, 2), "ddp_buckets": buckets}
            for s in range(steps) for r in range(2)]


def link_case(waits: dict[str, tuple]):
    spec = RunSpec(strategy="ddp", world_size=2, steps=4, device="cpu")
    runs, records = {}, {}
    for name, (tp, dp) in waits.items():
        runs[f"tp, {name}"], runs[f"ddp, {name}"] = link_run(tp), link_run(dp, nbytes=400)
        records[f"tp, {name}"] = records[f"ddp, {name}"] = spec, ddp_records()
    return runs, records


def test_tensor_parallel_waits_more_on_every_link_on_none_and_on_some():
    runs, records = link_case({"fast": (0.08, 0.03), "slow": (0.09, 0.06)})
    headline, details, tone = verdicts.link_verdict(runs, records, ["fast", "slow"], 1_048_576)
    assert headline.startswith("On every emulated link") and "fast: 80% against 30%" in headline
    assert tone == "bad" and "sent 16 all-reduces" in details and "25% of their bytes" in details
    runs, records = link_case({"fast": (0.01, 0.03), "slow": (0.02, 0.06)})
    assert verdicts.link_verdict(runs, records, ["fast", "slow"], 1_048_576)[0].startswith("On no")
    runs, records = link_case({"fast": (0.01, 0.03), "slow": (0.09, 0.06)})
    headline, _, tone = verdicts.link_verdict(runs, records, ["fast", "slow"], 1_048_576)
    assert "than data parallel on slow, not on the others" in headline and tone == "mixed"
    runs["tp, fast"]["comm_s"] = None
    assert "not measured" in verdicts.link_verdict(runs, records, ["fast", "slow"], 1_048_576)[0]
    assert verdicts.link_run_rows(runs, records)[0][2] == "not measured"


def test_a_link_row_splits_one_all_reduce_into_latency_and_bytes():
    # 2 ranks: 2 steps of (latency + S/(2B)); with S/(2B) = latency, half of it is latency
    link = EmulatedLink(bandwidth=1e6, latency=0.5)
    row = verdicts.link_rows({"slow": "pcie4"}, {"slow": link}, 1_000_000)[0]
    assert row[0] == "slow (pcie4)" and row[3:] == ["1.00", "500", "2000", "50%"]
