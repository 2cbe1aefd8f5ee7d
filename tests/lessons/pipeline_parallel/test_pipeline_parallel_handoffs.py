"""Lesson 05's hand-off verdict on synthetic spans (the general timeline of a ``pp`` step):
hand-offs counted per rank with their bytes, time and share of the step, and their time never
read as transfer time alone, on two ranks, with nothing launched."""
from gpututor.lessons.pipeline_parallel import verdicts as v

MB = 10**6


def span(kind, name, start_ms, end_ms, nbytes=None):
    return {"kind": kind, "name": name, "start": 2000 + start_ms / 1e3,
            "end": 2000 + end_ms / 1e3, "bytes": nbytes, "group": 2 if nbytes else None}


def stage0(step=4):
    """Stage 0 of 1F1B, m=2: F0, hand-off, F1, a long hand-off (waiting for stage 1's first
    backward), B0, hand-off, B1, then sync (its all-reduce inside) and the optimizer: 100 ms."""
    return {"rank": 0, "step": step, "timeline": [
        span("compute", "forward", 0, 10), span("collective", "send_recv", 10, 12, 1 * MB),
        span("compute", "forward", 12, 22), span("collective", "send_recv", 22, 62, 2 * MB),
        span("compute", "backward", 62, 72), span("collective", "send_recv", 72, 74, 2 * MB),
        span("compute", "backward", 74, 90), span("compute", "sync", 90, 95),
        span("collective", "all_reduce", 90, 95, 5 * MB), span("compute", "optimizer", 96, 100)]}


def stage1(step=4, waits=False):
    """Stage 1: waits 12 ms for its first input, then F0 B0, F1 B1, sync, optimizer: 100 ms;
    with ``waits``, an end-of-step wait for posted sends (3 ms, 1 MB) before the sync."""
    spans = [span("collective", "send_recv", 0, 12, 1 * MB), span("compute", "forward", 12, 22),
             span("compute", "backward", 22, 40), span("collective", "send_recv", 40, 42, 2 * MB),
             span("compute", "forward", 42, 52), span("compute", "backward", 52, 86),
             span("compute", "sync", 90, 95), span("collective", "all_reduce", 90, 95, 5 * MB),
             span("compute", "optimizer", 95, 100)]
    if waits:
        spans.append(span("collective", "send_wait", 86, 89, 1 * MB))
    return {"rank": 1, "step": step, "timeline": spans}


def test_each_rank_s_hand_offs_their_bytes_time_and_share_of_its_step():
    records = [stage0(), stage1(), stage0(step=3), {"rank": 0, "step": 2, "timeline": None}]
    headline, details, tone = v.handoffs_verdict(records, 4)
    assert headline.startswith(
        "In step 4 the stages stood still: rank 0 in 3 hand-offs (5.00 MB sent and received) for "
        "44.0 ms, 44% of its step; rank 1 in 2 hand-offs (3.00 MB sent and received) for 14.0 ms, "
        "14% of its step. That time is the transfer and the wait for the neighbour together")
    assert tone == "mixed"
    assert ("rank 0: step 100.0 ms; forwards and backwards 46.0 ms, hand-offs 44.0 ms, sync 5.0 "
            "ms, optimizer step 4.0 ms; in no span 1.0 ms") in details
    assert "rank 1: step 100.0 ms; forwards and backwards 72.0 ms, hand-offs 14.0 ms" in details
    assert "in no span 4.0 ms" in details   # the all-reduce inside sync counts once


def test_wrong_reading_a_long_hand_off_as_a_slow_transfer():
    """The wrong reading: stage 0's 40 ms hand-off of 2 MB "took 40 ms to transfer" (0.05 GB/s),
    when another 2 MB took 2 ms. The verdict puts both figures side by side and calls the time
    transfer and waiting together, never a transfer time or a bandwidth."""
    headline, _, _ = v.handoffs_verdict([stage0(), stage1()], 4)
    assert headline.endswith("which the spans do not tell apart: the 3 hand-offs of 2.00 MB "
                             "each took from 2.0 to 40.0 ms")
    assert "transfer time" not in headline and "GB/s" not in headline


def test_end_of_step_waits_for_posted_sends_are_hand_offs_too():
    headline, details, _ = v.handoffs_verdict([stage0(), stage1(waits=True)], 4)
    assert "rank 1 in 3 hand-offs (4.00 MB sent and received) for 17.0 ms, 17% of its step" \
        in headline
    assert "hand-offs 17.0 ms (incl. 1 end-of-step wait for posted sends)" in details


def test_no_timeline_and_no_hand_off_metered():
    assert v.handoffs_verdict([stage0()], 5)[0] == \
        "Step 5 recorded no timeline (RunSpec(timeline=True))"
    torch_run = [{"rank": r, "step": 4, "timeline": [span("compute", "forward", 0, 10),
                                                     span("compute", "optimizer", 10, 12)]}
                 for r in (0, 1)]
    assert v.handoffs_verdict(torch_run, 4)[0].startswith("In step 4 no rank recorded a hand-off")
