"""Lesson 05's hand-off verdict on synthetic spans shaped as the pipeline records them (the
general timeline of a ``pp`` step): hand-offs counted per rank with their bytes (a posted send's
on the end-of-step ``send_wait`` only), time and share of the step, the bubble measure's
all_gather (the last stage's drain) named apart, and hand-off time never read as transfer time,
on two ranks, with nothing launched."""
import pytest

from gpututor.lessons.pipeline_parallel.handoffs import handoffs_verdict
from gpututor.parallel.pipeline.timeline import BUBBLE_GATHER

MB = 10**6


def span(kind, name, start_ms, end_ms, nbytes=None, scale=1.0):
    return {"kind": kind, "name": name, "start": 2000 + start_ms * scale / 1e3,
            "end": 2000 + end_ms * scale / 1e3, "bytes": nbytes, "group": 2 if nbytes else None}


def stage0(step=4, scale=1.0):
    """Stage 0 of 1F1B, m=2, sends waited: F0, hand-off (sends a0), F1, a long hand-off (sends
    a1, waits for stage 1's first backward's g0), B0, hand-off (receives g1), B1, the bubble
    measure's gather, sync (its all-reduce inside), optimizer: 100 ms."""
    s = lambda *a: span(*a, scale=scale)   # noqa: E731
    return {"rank": 0, "step": step, "timeline": [
        s("compute", "forward", 0, 10), s("collective", "send_recv", 10, 12, 1 * MB),
        s("compute", "forward", 12, 22), s("collective", "send_recv", 22, 52, 2 * MB),
        s("compute", "backward", 52, 62), s("collective", "send_recv", 62, 64, 1 * MB),
        s("compute", "backward", 64, 80), s("collective", BUBBLE_GATHER, 80, 81, 24),
        s("compute", "sync", 81, 95), s("collective", "all_reduce", 81, 95, 5 * MB),
        s("compute", "optimizer", 96, 100)]}


def stage1(step=4, sends="wait"):
    """Stage 1, the last: waits 12 ms for a0, F0 B0, hand-off (g0 out, a1 in), F1 B1, g1 out,
    then waits 18 ms in the bubble measure's gather (the drain: stage 0's B1), sync, optimizer:
    100 ms. With ``sends="post"`` as ``PointToPoint`` records it: an exchange's span holds only
    the bytes it waited for (the receives), g1 goes out in a flush that waits for nothing, and
    the end-of-step ``send_wait`` carries both posted sends' bytes."""
    post = sends == "post"
    spans = [span("collective", "send_recv", 0, 12, 1 * MB), span("compute", "forward", 12, 22),
             span("compute", "backward", 22, 40),
             span("collective", "send_recv", 40, 42, (1 if post else 2) * MB),
             span("compute", "forward", 42, 52), span("compute", "backward", 52, 60)]
    spans += [span("collective", "send_recv", 60, 60.5, 0),
              span("collective", "send_wait", 60.5, 62, 2 * MB)] if post else \
        [span("collective", "send_recv", 60, 62, 1 * MB)]
    spans += [span("collective", BUBBLE_GATHER, 62, 80, 24), span("compute", "sync", 81, 95),
              span("collective", "all_reduce", 81, 95, 5 * MB),
              span("compute", "optimizer", 95, 100)]
    return {"rank": 1, "step": step, "timeline": spans}


def verdict(records, step=4, shortest=0.002, device="cuda:0", cores=2):
    return handoffs_verdict(records, step, shortest, device, cores)


def test_each_rank_s_hand_offs_drain_wait_and_share_of_its_step():
    records = [stage0(), stage1(), stage0(step=3), {"rank": 0, "step": 2, "timeline": None}]
    headline, details, tone = verdict(records)
    assert headline.startswith(
        "In step 4 the stages stood still: rank 0 in 3 hand-offs (4.00 MB sent and received) for "
        "34.00 ms, and 1.00 ms in all_gather (bubble measure): 35% of its step (first span to "
        "last, 100.00 ms); rank 1 in 3 hand-offs (4.00 MB sent and received) for 16.00 ms, and "
        "18.00 ms in all_gather (bubble measure): 34% of its step (first span to last, "
        "100.00 ms). A hand-off's time is the transfer and the wait for the neighbour together")
    assert headline.endswith("On rank 1, the last stage, all_gather (bubble measure) is the "
                             "wait for the drain: it ends when stage 0's last backward does")
    assert tone == "mixed"
    assert ("rank 0: step 100.00 ms (first span to last); forwards and backwards 46.00 ms, "
            "hand-offs 34.00 ms, all_gather (bubble measure) 1.00 ms, sync 14.00 ms, "
            "optimizer step 4.00 ms; in no span 1.00 ms") in details
    assert "rank 1: step 100.00 ms (first span to last); forwards and backwards 46.00 ms" in details
    assert "all_gather (bubble measure) 18.00 ms" in details
    assert "in no span 1.00 ms" in details.split("\n")[1]   # the all-reduce inside sync counts once
    assert "One step of one run: rerun and it moves." in details


def test_posted_sends_bytes_counted_once_and_their_wait_not_a_hand_off():
    """With sends="post" the posted sends' bytes are on send_wait only: rank 1 moves the same
    4 MB as with sends waited (counting them on send_recv too gave 6 MB), and the end-of-step
    wait is named apart from the hand-offs; the flush that posted g1 and waited for no byte is
    not a hand-off (its 0.5 ms stays in the time)."""
    headline, details, _ = verdict([stage0(), stage1(sends="post")])
    assert ("rank 1 in 2 hand-offs and 1 end-of-step wait for posted sends (4.00 MB sent and "
            "received) for 16.00 ms") in headline
    assert "hand-offs 14.50 ms, end-of-step waits for posted sends 1.50 ms" in details


def test_wrong_reading_a_long_hand_off_as_a_slow_transfer():
    """The wrong reading: stage 1's 12 ms hand-off of 1 MB "took 12 ms to transfer" (0.08 GB/s),
    when another 1 MB took 2 ms. The verdict puts both side by side, calls the time transfer and
    waiting together, and gives the shortest hand-off as the transfer's bound."""
    headline, _, _ = verdict([stage0(), stage1()])
    assert ("which the spans do not tell apart; the shortest hand-off above (2.00 ms) bounds the "
            "transfer; the 4 hand-offs of 1.00 MB each took from 2.00 ms to 12.00 ms") in headline
    assert "transfer time" not in headline and "GB/s" not in headline


@pytest.mark.parametrize("device, cores, words", [
    ("cpu", 1, "the transfer, waiting for the neighbour and, with ranks sharing cores, waiting "
               "for a core"),
    ("cpu", 2, "the transfer, waiting for the neighbour and, on a busy machine, waiting for a "
               "core"),
    ("cuda:0", 1, "the transfer and the wait for the neighbour together")])
def test_words_follow_the_device_and_core_sharing(device, cores, words):
    headline, _, _ = verdict([stage0(), stage1()], device=device, cores=cores)
    assert f"A hand-off's time is {words}, which the spans do not tell apart" in headline


def test_gpu_sized_spans_print_in_microseconds_and_no_bound_said_so():
    headline, details, _ = verdict([stage0(scale=0.01)], shortest=None)
    assert "for 340 µs, and 10 µs in all_gather (bubble measure)" in headline
    assert "(first span to last, 1.00 ms)" in headline
    assert "no hand-off was timed above to bound the transfer" in headline
    assert "0.0 ms" not in headline + details


def test_no_timeline_and_no_hand_off_metered():
    assert verdict([stage0()], step=5)[0] == \
        "Step 5 recorded no timeline (RunSpec(timeline=True))"
    torch_run = [{"rank": r, "step": 4, "timeline": [span("compute", "forward", 0, 10),
                                                     span("compute", "optimizer", 10, 12)]}
                 for r in (0, 1)]
    assert verdict(torch_run)[0].startswith("In step 4 no rank recorded a hand-off")
