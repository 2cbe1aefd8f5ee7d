"""Section 5's ddp+tp step on one clock: the verdict splits the collectives into data
parallel's (DDP's own buckets) and tensor parallel's (the rest) and reads counts, bytes, time
and overlap from the spans. Synthetic spans, in milliseconds, nothing launched."""
from __future__ import annotations

import pytest

from gpututor.lessons.composing_parallelisms.timeline import (
    composed_timeline_verdict, rank_summary, split_collectives)
from gpututor.parallel.data_parallel.ddp import WAIT_SPAN

T0 = 1_700_000_000.0   # the spans are wall-clock seconds (float: about 0.2 us apart)


def span(kind, name, start_ms, end_ms, nbytes=None, group=None):
    return {"kind": kind, "name": name, "start": T0 + start_ms / 1e3, "end": T0 + end_ms / 1e3,
            "bytes": nbytes, "group": group}


def record(rank=0, shift=0.0, bucket_bytes=5000, tp_ms=2.0, step=3):
    """A ddp+tp step: forward 0-40 ms and backward 40-90 ms, each with two tensor-parallel
    all-reduces of 1000 bytes (``tp_ms`` long); DDP's first bucket launched at 60 ms (30 ms
    before the last gradient, at 90 ms) and done at 85, its second 90-100 while compute waits;
    the optimizer 100-110 ms. ``shift`` moves the whole step."""
    s = lambda *a, **k: span(*a[:2], a[2] + shift, a[3] + shift, **k)   # noqa: E731
    spans = [s("compute", "forward", 0, 40), s("compute", "backward", 40, 90),
             s("compute", WAIT_SPAN, 90, 100), s("compute", "optimizer", 100, 110)]
    spans += [s("collective", "all_reduce", t, t + tp_ms, nbytes=1000, group=2)
              for t in (10, 25, 50, 70)]
    spans += [s("collective", "all_reduce", 60, 85, nbytes=bucket_bytes, group=2),
              s("collective", "all_reduce", 90, 100, nbytes=8000, group=2)]
    spans.sort(key=lambda x: x["start"])
    return {"rank": rank, "step": step, "timeline": spans,
            "ddp_buckets": [{"index": 0, "bytes": bucket_bytes, "before_last_grad_s": 0.030},
                            {"index": 1, "bytes": 8000, "before_last_grad_s": 0.0}]}


def test_the_buckets_ddp_listed_are_data_parallels_and_the_rest_tensor_parallels():
    o = rank_summary(record())
    assert (o["tp"]["n"], o["tp"]["bytes"], o["tp"]["group"]) == (4, 4000, 2)
    assert (o["dp"]["n"], o["dp"]["bytes"], o["dp"]["group"]) == (2, 13000, 2)
    assert o["tp"]["busy"] == pytest.approx(0.008, abs=1e-6)
    assert o["dp"]["busy"] == pytest.approx(0.035, abs=1e-6)
    assert o["dp"]["under"] == pytest.approx(0.025, abs=1e-6)   # the first bucket, all under backward
    assert o["dp"]["waited"] == pytest.approx(0.010, abs=1e-6)
    assert o["end"] - o["start"] == pytest.approx(0.110, abs=1e-6)


def test_a_bucket_of_an_activations_bytes_is_found_by_its_launch_time():
    """Named wrong method: telling the kinds apart by bytes (or by group size: 2 and 2 here)
    would take the first all-reduce of 1000 bytes, a forward one, as DDP's bucket."""
    split = split_collectives(record(bucket_bytes=1000))
    assert [round((s["start"] - T0) * 1e3) for s in split["dp"]] == [60, 90]
    assert [round((s["start"] - T0) * 1e3) for s in split["tp"]] == [10, 25, 50, 70]
    first_of_its_bytes = min((s for s in record(bucket_bytes=1000)["timeline"]
                              if s["bytes"] == 1000), key=lambda s: s["start"])
    assert first_of_its_bytes not in split["dp"]


def test_the_headline_reads_the_rank_whose_backward_ended_last():
    headline, details, tone = composed_timeline_verdict(
        [record(rank=0), record(rank=1, shift=5.0), record(rank=1, step=2)],
        how_it_ran="The 2 ranks ran on one GPU each.")
    assert headline.startswith("In step 3, on rank 1, whose backward ended last: 4 "
                               "tensor-parallel all-reduces (0.00 MB of messages)")
    assert "took 8.0 ms of its 110.0 ms step (7%)" in headline
    assert "2 data-parallel all-reduces of the gradients (0.01 MB of messages) took 35.0 ms, 25.0 ms of it " \
           "while backward was still running, and compute then waited 10.0 ms" in headline
    assert tone == "good"   # 8 + 10 ms of 110 stood still: under a fifth
    assert details.startswith("The 2 ranks ran on one GPU each.\nrank 0: step 0.0 to 110.0 ms, "
                              "backward 40.0 to 90.0 ms")
    assert "rank 1: step 5.0 to 115.0 ms" in details


@pytest.mark.parametrize("tp_ms,tone", [(5.0, "mixed"), (12.0, "bad")])
def test_the_tone_follows_the_share_of_the_step_compute_stood_still(tp_ms, tone):
    # 4 tensor-parallel all-reduces of tp_ms and 10 ms of waiting, of a 110 ms step
    assert composed_timeline_verdict([record(tp_ms=tp_ms)])[2] == tone


def test_a_run_without_a_timeline_or_without_ddp_buckets_says_so():
    assert "no timeline" in composed_timeline_verdict([{"rank": 0, "step": 0}])[0]
    tp_only = dict(record(), ddp_buckets=None)
    headline, _, tone = composed_timeline_verdict([tp_only])
    assert "no data-parallel bucket" in headline and tone == "mixed"
    assert split_collectives(tp_only) is None
