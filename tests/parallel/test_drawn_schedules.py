"""The schedules lessons 02 and 05 draw are the code's own: the ring's steps all-reduce, and the
pipeline's ideal timeline leaves the idle share the formula gives."""
from __future__ import annotations

import pytest

from gpututor.lessons.pipeline_parallel.figures import kept_at_once
from gpututor.parallel.data_parallel.ring import ring_schedule
from gpututor.parallel.pipeline.schedules import call_order, ideal_timeline


@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_the_drawn_ring_sums_every_chunk_on_every_rank(world):
    # each rank's chunks as sets of the ranks whose values they hold
    held = [[{r} for _ in range(world)] for r in range(world)]
    sent = [0] * world
    for step in ring_schedule(world):
        arriving = [set(held[(r - 1) % world][step["send"][(r - 1) % world]]) for r in range(world)]
        for r in range(world):
            assert step["recv"][r] == step["send"][(r - 1) % world]   # the left neighbour's chunk
            sent[r] += 1
            if step["phase"] == "reduce-scatter":
                held[r][step["recv"][r]] |= arriving[r]
            else:
                held[r][step["recv"][r]] = arriving[r]
    assert all(chunk == set(range(world)) for rank in held for chunk in rank)
    assert sent == [2 * (world - 1)] * world


@pytest.mark.parametrize("stages,m", [(2, 4), (4, 8), (4, 2), (3, 5)])
def test_the_drawn_pipeline_leaves_the_formulas_bubble(stages, m):
    for schedule in ("gpipe", "1f1b"):
        events = ideal_timeline(schedule, stages, m)
        span = max(e for evs in events.values() for *_, e in evs)
        busy = sum(e - s for evs in events.values() for *_, s, e in evs)
        assert 1 - busy / (stages * span) == pytest.approx((stages - 1) / (m + stages - 1))
        for s in range(stages):   # each stage runs the schedule function's calls, in its order
            assert [(k, i) for k, i, *_ in events[s]] == call_order(schedule, s, stages, m)
    assert kept_at_once(ideal_timeline("gpipe", stages, m), 0) == m
    assert kept_at_once(ideal_timeline("1f1b", stages, m), 0) == min(stages, m)


def test_every_stage_keeps_as_many_as_the_schedule_holds():
    stages, m = 4, 8
    assert [kept_at_once(ideal_timeline("gpipe", stages, m), s) for s in range(stages)] == [m] * stages
    assert [kept_at_once(ideal_timeline("1f1b", stages, m), s) for s in range(stages)] == [4, 3, 2, 1]
