"""Section 5's ddp+tp step on one clock: the verdict splits the collectives into data
parallel's (DDP's own buckets, matched by launch time) and tensor parallel's (the rest) and
reads counts, bytes, time and overlap from the spans; the figure names the bars by kind.
Synthetic spans, in milliseconds, nothing launched."""
from __future__ import annotations

import pytest

from gpututor.lessons.composing_parallelisms.figures import composed_timeline_figure
from gpututor.lessons.composing_parallelisms.timeline import (
    ALL_REDUCE_NAMES, composed_timeline_verdict, labelled_records, rank_summary, split_collectives)
from gpututor.parallel.data_parallel.ddp import WAIT_SPAN

T0 = 1_700_000_000.0   # the spans are wall-clock seconds (float: about 0.2 us apart)
GPU_RUN = {"device": "cuda:0", "world_size": 4}
CPU_RUN = {"device": "cpu", "world_size": 4}


def span(kind, name, start_ms, end_ms, nbytes=None, group=None):
    return {"kind": kind, "name": name, "start": T0 + start_ms / 1e3, "end": T0 + end_ms / 1e3,
            "bytes": nbytes, "group": group}


def record(rank=0, shift=0.0, bucket_bytes=5000, tp_ms=2.0, step=3, sent_bytes=None,
           first_launch_ms=60.0, last_launch_ms=90.0):
    """A ddp+tp step: forward 0-40 ms and backward 40-90 ms, each with two tensor-parallel
    all-reduces of 1000 bytes (``tp_ms`` long); DDP's first bucket launched at 60 ms (30 ms
    before the last gradient, at 90 ms) and done at 85, its second 90-100 while compute waits;
    the optimizer 100-110 ms. ``shift`` moves the whole step; ``sent_bytes`` gives the buckets'
    bars other bytes than DDP lists (a compressing comm hook); ``first_launch_ms`` moves the
    first bucket's listed launch away from its bar; ``last_launch_ms`` launches the last bucket
    (and starts its bar) that long after the last gradient, as DDP does a little after it."""
    s = lambda *a, **k: span(*a[:2], a[2] + shift, a[3] + shift, **k)   # noqa: E731
    spans = [s("compute", "forward", 0, 40), s("compute", "backward", 40, 90),
             s("compute", WAIT_SPAN, 90, 100), s("compute", "optimizer", 100, 110)]
    spans += [s("collective", "all_reduce", t, t + tp_ms, nbytes=1000, group=2)
              for t in (10, 25, 50, 70)]
    spans += [s("collective", "all_reduce", 60, 85, nbytes=sent_bytes or bucket_bytes, group=2),
              s("collective", "all_reduce", last_launch_ms, 100, nbytes=sent_bytes or 8000,
                group=2)]
    spans.sort(key=lambda x: x["start"])
    return {"rank": rank, "step": step, "timeline": spans,
            "ddp_buckets": [{"index": 0, "bytes": bucket_bytes,
                             "before_last_grad_s": (90 - first_launch_ms) / 1e3,
                             "launch_s": (first_launch_ms - 90) / 1e3},
                            {"index": 1, "bytes": 8000, "before_last_grad_s": 0.0,
                             "launch_s": (last_launch_ms - 90) / 1e3}]}


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


def test_the_headline_reads_the_rank_with_the_least_time_in_tensor_parallel_all_reduces():
    """Named wrong choice: the rank whose backward ended last (rank 0 here, 5 ms later), whose
    bars held more waiting (3 ms each against rank 1's 2 ms)."""
    headline, details, tone = composed_timeline_verdict(
        [record(rank=0, shift=5.0, tp_ms=3.0), record(rank=1), record(rank=1, step=2)],
        step=3, run=GPU_RUN, cores=2)
    assert headline.startswith("In step 3, on rank 1, the rank with the least time in "
                               "tensor-parallel all-reduces (each bar also holds waiting for a "
                               "later rank; this rank had the least of it): "
                               "4 tensor-parallel all-reduces (0.00 MB of messages)")
    assert "took 8.0 ms of its 110.0 ms step;" in headline
    assert "2 data-parallel all-reduces of the gradients (0.01 MB of messages) took 35.0 ms, 25.0 ms of it " \
           "while backward was still running; from the last gradient until backward() returned " \
           "(DDP's last bucket reduced and copied back into the gradients) compute waited 10.0 ms" \
           in headline
    assert headline.endswith("Compute stood still for 16% of the step")   # (8 + 10) / 110
    assert tone == "good"   # under a fifth, and each rank had its own GPU
    assert details.startswith("The 4 ranks ran on one GPU each.\nrank 0: step 5.0 to 115.0 ms, "
                              "backward 45.0 to 95.0 ms")
    assert "rank 1: step 0.0 to 110.0 ms" in details
    assert "(bars: shortest 2.00 ms, median 2.00 ms)" in details
    assert "less than 20% of the step" in details and "rerun and it moves" in details


@pytest.mark.parametrize("tp_ms,share,tone", [(2.0, "16%", "good"), (5.0, "27%", "mixed"),
                                               (12.0, "53%", "mixed")])
def test_the_tone_follows_the_printed_share_of_the_step_compute_stood_still(tp_ms, share, tone):
    # 4 tensor-parallel all-reduces of tp_ms and 10 ms of waiting, of a 110 ms step; never "bad"
    headline, _, got = composed_timeline_verdict([record(tp_ms=tp_ms)])
    assert f"Compute stood still for {share} of the step" in headline and got == tone


def test_on_shared_cores_the_tone_stays_mixed_and_the_headline_says_why():
    headline, details, tone = composed_timeline_verdict([record()], run=CPU_RUN, cores=2)
    assert tone == "mixed"   # 16 % would be good, but the bars hold the ranks taking turns
    assert headline.endswith("; on shared cores these bars also hold the ranks taking turns on "
                             "the cores: the shortest tensor-parallel bar, 2.00 ms, is the "
                             "closest to the transfer itself")
    assert details.startswith("The 4 ranks were 4 CPU processes sharing this machine's 2 cores")
    assert composed_timeline_verdict([record()], run=CPU_RUN, cores=4)[2] == "good"


def test_buckets_whose_bytes_differ_from_their_bars_still_match_by_launch_time():
    """DDP lists a bucket's gradient bytes, its bar carries the bytes sent: with an fp16, bf16
    or PowerSGD comm hook they differ (here half), and matching by bytes found no bucket."""
    compressed = record(sent_bytes=2500)
    split = split_collectives(compressed)
    assert [round((s["start"] - T0) * 1e3) for s in split["dp"]] == [60, 90]
    assert split["unmatched"] == []
    headline, _, _ = composed_timeline_verdict([compressed])
    assert "2 data-parallel all-reduces" in headline and "recorded no" not in headline


def test_a_bucket_no_bar_started_near_is_named_with_its_bytes_and_launch():
    headline, details, tone = composed_timeline_verdict([record(first_launch_ms=55.0)])
    assert headline == ("In step 3, on rank 0, a bucket of 5000 bytes launched at 55.0 ms "
                        "matched no all-reduce (none started within 1 ms of it): the two kinds "
                        "of all-reduce cannot be told apart in this step")
    assert tone == "mixed"


def test_the_verdict_reads_the_step_it_is_given():
    records = [record(step=3), record(step=2, tp_ms=5.0)]
    assert composed_timeline_verdict(records, step=2)[0].startswith("In step 2,")
    assert "step 7 recorded no" in composed_timeline_verdict(records, step=7)[0]


def test_the_figure_names_each_kind_of_all_reduce_and_leaves_the_records_alone():
    records = [record(rank=0), record(rank=1, shift=5.0), record(rank=0, step=2)]
    labelled = labelled_records(records, 3)
    assert [r["step"] for r in labelled] == [3, 3]
    names = [s["name"] for s in labelled[0]["timeline"] if s["kind"] == "collective"]
    assert names.count(ALL_REDUCE_NAMES["dp"]) == 2 and names.count(ALL_REDUCE_NAMES["tp"]) == 4
    assert all(s["name"] == "all_reduce" for r in records for s in r["timeline"]
               if s["kind"] == "collective")
    fig = composed_timeline_figure(records, 3)
    assert fig.layout.title.text == "ddp+tp, step 3, on one clock"
    legend = {t.name: t.marker.color for t in fig.data}
    assert {ALL_REDUCE_NAMES["dp"], ALL_REDUCE_NAMES["tp"], "forward", "backward", WAIT_SPAN} <= set(legend)
    assert "all_reduce" not in legend
    assert legend[ALL_REDUCE_NAMES["dp"]] != legend[ALL_REDUCE_NAMES["tp"]]


def test_a_run_without_a_timeline_or_without_ddp_buckets_says_so():
    assert "no timeline" in composed_timeline_verdict([{"rank": 0, "step": 0}])[0]
    tp_only = dict(record(), ddp_buckets=None)
    headline, _, tone = composed_timeline_verdict([tp_only])
    assert "no data-parallel bucket" in headline and tone == "mixed"
    assert split_collectives(tp_only) is None


def test_a_bucket_launched_after_the_last_gradient_is_matched_by_its_own_launch_mark():
    """DDP launches the last bucket a little after the last gradient, later still where a rank
    waits for a core: its launch is read signed (``launch_s``), not as the clamped
    ``before_last_grad_s`` (0 here), which would put it 1.5 ms before its bar."""
    split = split_collectives(record(last_launch_ms=91.5))
    assert not split["unmatched"]
    assert [round((s["start"] - T0) * 1e3, 1) for s in split["dp"]] == [60.0, 91.5]
