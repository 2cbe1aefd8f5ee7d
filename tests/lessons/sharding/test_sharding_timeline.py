"""Lesson 03's timeline verdicts (``verdicts.gather_verdict``, ``verdicts.prefetch_verdict``)
on synthetic spans: the counts and the share of the step are read from the spans, the bars are
checked against the wait the worker counted, and each branch says what its numbers show; nothing
is launched."""
from gpututor.lessons.sharding import verdicts


def _span(kind, name, start, end, nbytes=None):
    return {"kind": kind, "name": name, "start": start, "end": end, "bytes": nbytes, "group": 2}


def _step(rank, backward_order, waited, shift=0.0, step=3):
    """One rank's step in ms: forward 0-10 with two all-gathers, backward 10-30 with the
    collectives of ``backward_order`` one ms apart, the optimizer 30-32."""
    ms = lambda *t: [shift + x / 1e3 for x in t]   # noqa: E731
    spans = [_span("compute", "forward", *ms(0, 10)),
             _span("collective", "all_gather", *ms(1, 2), 1_000_000),
             _span("collective", "all_gather", *ms(5, 6), 1_000_000),
             _span("compute", "backward", *ms(10, 30)),
             _span("compute", "optimizer", *ms(30, 32))]
    spans += [_span("collective", name, *ms(11 + 2 * i, 12 + 2 * i), 1_000_000)
              for i, name in enumerate(backward_order)]
    return {"rank": rank, "step": step, "comm_s": waited, "timeline": spans}


ZERO3 = ["all_gather", "all_gather", "reduce_scatter", "all_gather", "reduce_scatter",
         "reduce_scatter"]          # the root, a block, its gradient, the next block, ...
PREFETCH = ["all_gather", "all_gather", "all_gather", "reduce_scatter", "reduce_scatter",
            "reduce_scatter"]       # ... the next block gathered before the first gradient


def test_blocking_collectives_are_checked_against_the_wait_the_worker_counted():
    records = [_step(0, ZERO3, waited=8e-3), _step(1, ZERO3, waited=8e-3, shift=1e-4),
               {"rank": 0, "step": 2, "comm_s": 0.0}]   # a step without a timeline: left out
    headline, details, tone = verdicts.gather_verdict(records)
    assert ("In zero3's step 3, 2 all-gathers in forward, then 3 all-gathers and 3 "
            "reduce-scatters in backward took 8.0 ms of the 32.0 ms step (25%) on rank 0"
            in headline and "this rank had less of it" in headline)
    assert ("zero3's collectives block" in headline and "the bars add up to the 8.0 ms the "
            "worker counted in this step" in headline and "by construction" in headline
            and "not a measure of overlap" in headline)
    assert tone == "mixed"
    assert ("rank 1: collectives 8.0 ms of a 32.0 ms step (all-gathers in forward 2.0 ms, in "
            "backward 3.0 ms, reduce-scatters 3.0 ms); compute's wait counted: 8.0 ms" in details)
    assert len(details.splitlines()) == 2      # per-rank totals only: the figure shows each bar


def test_the_headline_reads_the_rank_that_waited_less_in_collectives():
    slow = _step(0, ZERO3, waited=9e-3)
    slow["timeline"][1]["end"] += 1e-3         # rank 0 waited 1 ms more in its first all-gather
    headline, details, _ = verdicts.gather_verdict([slow, _step(1, ZERO3, waited=8e-3)])
    assert "on rank 1" in headline and "took 8.0 ms" in headline
    assert "rank 0: collectives 9.0 ms" in details and "in forward 3.0 ms" in details


def test_bars_longer_than_the_counted_wait_are_a_measuring_fault_not_overlap():
    headline, _, tone = verdicts.gather_verdict([_step(0, ZERO3, waited=3e-3)], name="fsdp")
    assert "In fsdp's step 3" in headline and ("the bars hold 5.0 ms more than the 3.0 ms wait "
                                               "the worker counted") in headline
    assert "fault in the measuring" in headline and "overlap" not in headline and tone == "bad"


def test_a_counted_wait_no_bar_shows():
    headline, _, tone = verdicts.gather_verdict([_step(0, ZERO3, waited=10e-3)])
    assert "2.0 ms more than the bars hold" in headline and tone == "bad"


def test_an_unmeasured_wait_is_said_so_never_zero():
    headline, details, tone = verdicts.gather_verdict([_step(0, ZERO3, waited=None)])
    assert "the wait the worker counted was not measured" in headline and tone == "mixed"
    assert "compute's wait counted: not measured" in details and "measured ms" not in details


def test_a_wrong_reading_counting_every_collective_in_forward_is_not_what_it_says():
    """Named wrong case: all-gathers placed by the phase that *contains* their start, not
    all six counted as forward's (the backward ones start after forward has ended)."""
    headline, _, _ = verdicts.gather_verdict([_step(0, ZERO3, waited=8e-3)])
    assert "5 all-gathers in forward" not in headline and "2 all-gathers in forward" in headline


def test_no_timeline_or_no_collective_is_said_so():
    assert "recorded no timeline" in verdicts.gather_verdict([{"rank": 0, "step": 1}])[0]
    bare = _step(0, [], waited=0.0)
    bare["timeline"] = [s for s in bare["timeline"] if s["kind"] == "compute"]
    assert "no compute or no collective" in verdicts.gather_verdict([bare])[0]


def test_prefetch_is_gathering_further_ahead_than_zero3():
    zero3 = [_step(r, ZERO3, 8e-3) for r in (0, 1)]
    fsdp = [_step(r, PREFETCH, 8e-3) for r in (0, 1)]
    headline, details, tone = verdicts.prefetch_verdict(zero3, fsdp)
    assert "fsdp had up to 3 units gathered at once" in headline and "zero3 2" in headline
    assert "had 1 more gathered ahead" in headline and tone == "good"
    assert "zero3: up to 2 all-gathers ahead" in details


def test_no_prefetch_and_unmetered_collectives():
    zero3 = [_step(0, ZERO3, 8e-3)]
    headline, _, tone = verdicts.prefetch_verdict(zero3, zero3)
    assert "gathered no further ahead in this step" in headline and tone == "mixed"
    unmetered = _step(0, [], 0.0)
    unmetered["timeline"] = [s for s in unmetered["timeline"] if s["kind"] == "compute"]
    headline, _, _ = verdicts.prefetch_verdict(zero3, [unmetered])
    assert "fsdp's timeline holds no collectives" in headline
