"""Lesson 11's dispatch picture counts what a run routes. Its cells are checked two ways: each row
(the kept slots of one rank's tokens, by the rank holding their expert) against what
``MoELayer.forward`` itself keeps and hands to the exchange on that rank's slice of the batch,
counted as an expert-parallel rank counts (the ranks before it first, capacity over the global
batch); and its columns, summed, against the kept slots per expert a real run records."""
from __future__ import annotations

import torch

from gpututor import RunSpec, launch
from gpututor.data import batches
from gpututor.lessons.mixture_of_experts.exchange_figures import dispatch_counts, dispatch_figure
from gpututor.models import build_model
from gpututor.moe import moe_layers, run_experts

SPEC = RunSpec(model="moe", model_size="small", strategy="single", world_size=1, batch_size=16,
               seq_len=64, steps=1, device="cpu")


class RankExchange:
    """The first MoE layer's exchange as rank ``rank`` of ``world`` sees it under expert
    parallel (``ExpertExchange.token_counts``: slots routed by the ranks before it, by all ranks,
    and the global batch's tokens), with every expert run here; it keeps the rows per expert the
    layer hands it to send, and the slots it routed."""

    def __init__(self, rank: int, routed_by_rank: torch.Tensor | None):
        self.rank, self.every = rank, routed_by_rank
        self.routed = self.sent = None

    def token_counts(self, routed, tokens):
        self.routed = routed.clone()
        if self.every is None:                    # the first pass: only learn what it routes
            return torch.zeros_like(routed), routed, tokens
        return (self.every[:self.rank].sum(dim=0), self.every.sum(dim=0),
                tokens * len(self.every))

    def run(self, x, counts, experts):
        self.sent = list(counts)
        return run_experts(x, counts, experts, first=0)


def rows_the_layer_sends(spec: RunSpec, world: int) -> list[list[int]]:
    """``rows[r][d]``: kept slots of rank r's tokens whose expert rank d holds, as the layer's own
    forward keeps them on rank r's slice of the first batch."""
    model = build_model(spec)
    layer = moe_layers(model)[0]
    inputs = [next(batches(spec, rank, world))[0] for rank in range(world)]
    routed = []
    for rank in range(world):                     # pass 1: what each rank routes
        layer.exchange = RankExchange(rank, None)
        with torch.no_grad():
            model(inputs[rank])
        routed.append(layer.exchange.routed)
    every = torch.stack(routed)
    rows = []
    for rank in range(world):                     # pass 2: what each rank keeps and sends
        layer.exchange = RankExchange(rank, every)
        with torch.no_grad():
            model(inputs[rank])
        per_rank = layer.n_expert // world
        sent = layer.exchange.sent
        rows.append([sum(sent[d * per_rank:(d + 1) * per_rank]) for d in range(world)])
    return rows


def test_each_row_of_the_drawn_dispatch_is_what_that_ranks_layer_sends():
    for world in (2, 4):
        drawn = [list(row) for row in dispatch_figure(SPEC, world).data[0].z]
        assert drawn == rows_the_layer_sends(SPEC, world), world


def test_the_drawn_dispatch_matches_the_kept_slots_a_run_records():
    run = launch(SPEC)
    run.wait()
    kept = run.records[0]["expert_tokens"][0]          # the first MoE layer, the first step
    for world in (2, 4):
        counts = dispatch_counts(SPEC, world)
        per_rank = len(kept) // world
        assert [sum(counts[s][d] for s in range(world)) for d in range(world)] == \
            [sum(kept[d * per_rank:(d + 1) * per_rank]) for d in range(world)]
        assert sum(map(sum, counts)) == sum(kept)
