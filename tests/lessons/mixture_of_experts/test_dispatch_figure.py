"""Lesson 11's dispatch picture counts what a run routes: its columns, summed by the rank that
holds the experts, are the kept slots per expert the first step of a real run records."""
from __future__ import annotations

from gpututor import RunSpec, launch
from gpututor.lessons.mixture_of_experts.exchange_figures import dispatch_counts


def test_the_drawn_dispatch_matches_the_kept_slots_a_run_records():
    spec = RunSpec(model="moe", model_size="small", strategy="single", world_size=1,
                   batch_size=16, seq_len=64, steps=1, device="cpu")
    run = launch(spec)
    run.wait()
    kept = run.records[0]["expert_tokens"][0]          # the first MoE layer, the first step
    for world in (2, 4):
        counts = dispatch_counts(spec, world)
        per_rank = len(kept) // world
        assert [sum(counts[s][d] for s in range(world)) for d in range(world)] == \
            [sum(kept[d * per_rank:(d + 1) * per_rank]) for d in range(world)]
        assert sum(map(sum, counts)) == sum(kept)
