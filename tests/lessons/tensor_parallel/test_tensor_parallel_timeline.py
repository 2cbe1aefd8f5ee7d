"""Lesson 04's timeline verdict on synthetic spans: all-reduces counted per pass, their share of
each rank's step as drawn, and the bars' sum checked against the wait the worker counted
(comm_s: every all-reduce blocks, so they must agree), on two ranks, with nothing launched."""
from gpututor.lessons.tensor_parallel import verdicts


def span(kind, name, start_ms, end_ms, nbytes=None):
    return {"kind": kind, "name": name, "start": 1000 + start_ms / 1e3,
            "end": 1000 + end_ms / 1e3, "bytes": nbytes, "group": 2 if nbytes else None}


def rank_record(rank, waited_ms, step=3, late_ms=0.0, extra_backward=0):
    """A tp step: forward 0-40 ms with 2 all-reduces of 10 ms, backward 40-90 with 2 (+extra),
    optimizer 90-100: 40 of 100 ms in all-reduces."""
    t = lambda ms: ms + late_ms   # noqa: E731
    spans = [span("compute", "forward", t(0), t(40)), span("collective", "all_reduce", t(5), t(15), 2**20),
             span("collective", "all_reduce", t(25), t(35), 2**20),
             span("compute", "backward", t(40), t(90)),
             span("collective", "all_reduce", t(50), t(60), 2**20),
             span("collective", "all_reduce", t(70), t(80), 2**20),
             span("compute", "optimizer", t(90), t(100))]
    spans += [span("collective", "all_reduce", t(85), t(86), 2**20)] * extra_backward
    return {"rank": rank, "step": step, "timeline": spans,
            "comm_s": None if waited_ms is None else waited_ms / 1e3}


def test_blocking_all_reduces_are_counted_per_pass_and_add_up_to_the_counted_wait():
    records = [rank_record(0, 40.0), rank_record(1, 40.0, late_ms=2.0),
               {"rank": 0, "step": 2, "timeline": None, "comm_s": 0.01}]
    headline, details, tone = verdicts.timeline_verdict(records)
    assert headline.startswith("In the last step (step 3, counted from 0) each rank made 2 "
                               "all-reduces in forward and 2 in backward, which took 40% of its "
                               "step as drawn (first bar to last)")
    assert "the bars add up to the wait it counted (comm_s), a consistency check, not a measure " \
        "of overlap" in headline and tone == "mixed"
    assert "rank 0: step as drawn 0.0 to 100.0 ms; forward 2 all-reduces (20.0 ms), backward 2 " \
        "(20.0 ms)" in details and "rank 1: step as drawn 2.0 to 102.0 ms" in details
    assert "4.19 MB in all, 40.0 ms, 40% of its step as drawn; the wait the worker counted " \
        "(comm_s): 40.0 ms" in details
    assert "need not end together" in details and "arrives first" not in details


def test_ranks_that_differ_and_not_measured():
    headline, _, tone = verdicts.timeline_verdict([rank_record(0, 40.0),
                                                   rank_record(1, 41.0, extra_backward=1)])
    assert "2 to 3 in backward" in headline and "40% to 41% of its step" in headline
    assert "consistency check" in headline and tone == "mixed"
    headline, details, tone = verdicts.timeline_verdict([rank_record(0, None), rank_record(1, 40.0)])
    assert headline.endswith("the wait the worker counted was not measured, so the bars cannot be "
                             "checked against it")
    assert "(comm_s): not measured\n" in details and "not measured ms" not in details
    assert tone == "mixed"


def test_bars_that_do_not_add_up_to_the_counted_wait_are_a_measuring_fault_not_overlap():
    """Less counted wait than bars is not compute running meanwhile: every all-reduce here blocks
    and goes through CollectiveTimer.run, which adds the same seconds to both."""
    headline, _, tone = verdicts.timeline_verdict([rank_record(0, 30.0), rank_record(1, 40.0)])
    assert headline.endswith("the bars do not add up to the wait the worker counted (rank 0: "
                             "40.0 ms of bars, 30.0 ms counted; rank 1: 40.0 ms of bars, 40.0 ms "
                             "counted): the spans and the meter disagree, a fault in the "
                             "measuring, not overlap") and tone == "bad"


def test_wrong_reading_all_reduces_inside_the_pass_bars_are_not_overlap():
    """The named wrong answer: every all-reduce lies inside a forward or backward bar, and
    reading that as "ran while compute ran" would call every blocking all-reduce overlapped."""
    headline, _, _ = verdicts.timeline_verdict([rank_record(0, 40.0), rank_record(1, 40.0)])
    assert "compute ran" not in headline and "overlapped" not in headline
    assert "not a measure of overlap" in headline


def test_no_timeline_and_no_collective():
    assert "no timeline" in verdicts.timeline_verdict([{"rank": 0, "step": 0}])[0]
    quiet = {"rank": 0, "step": 1, "comm_s": 0.0,
             "timeline": [span("compute", "forward", 0, 10)]}
    assert verdicts.timeline_verdict([quiet])[0] == "step 1 recorded no collective on any rank"
