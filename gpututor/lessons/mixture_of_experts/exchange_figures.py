"""Lesson 11's picture of expert parallel's dispatch all-to-all, from the model's own routing: the
first MoE layer's router on the first global batch, the slots the capacity keeps (as
``MoELayer.forward`` keeps them, in the global batch's token order), and for each rank's share of
the batch the slots whose expert lives on each rank (``ExpertExchange``: rank i holds experts
``i·E/n … (i+1)·E/n − 1``; rank r's tokens come after those of the ranks before it)."""
from __future__ import annotations

import plotly.graph_objects as go
import torch

from ...data import batches
from ...i18n import tr
from ...models import build_model
from ...moe import expert_capacity, moe_layers, route, slot_positions
from ...ui.style import TEMPLATE


def dispatch_counts(spec, world: int) -> list[list[int]]:
    """``counts[s][d]``: kept slots of rank ``s``'s tokens whose expert is on rank ``d``, in the
    first MoE layer, for the first global batch of ``spec`` (the model as built, not trained)."""
    model = build_model(spec)
    layer = moe_layers(model)[0]
    seen = {}
    hook = layer.register_forward_hook(lambda mod, args, out: seen.setdefault("x", args[0]))
    inputs, _ = next(batches(spec))
    with torch.no_grad():
        model(inputs)
    hook.remove()
    h = seen["x"].reshape(-1, seen["x"].shape[-1])
    tokens, k, n_expert = h.shape[0], layer.top_k, layer.n_expert
    with torch.no_grad():
        _, _, experts = route(layer.router(h), k)
    keep = slot_positions(experts, n_expert) < expert_capacity(tokens, k, n_expert,
                                                               layer.capacity_factor)
    owner = experts // (n_expert // world)           # the rank that holds each slot's expert
    source = torch.arange(tokens).div(tokens // world, rounding_mode="floor")[:, None].expand(-1, k)
    counts = torch.zeros(world, world, dtype=torch.long)
    counts.index_put_((source[keep], owner[keep]), torch.ones(int(keep.sum()), dtype=torch.long),
                      accumulate=True)
    return counts.tolist()


def dispatch_figure(spec, world: int = 2) -> go.Figure:
    """The dispatch all-to-all as a matrix: the slots each rank sends (rows) to each rank
    (columns); the diagonal stays on its rank. Combine sends the same numbers back."""
    counts = dispatch_counts(spec, world)
    names = [tr("rank {rank}", rank=r) for r in range(world)]
    hover = tr("from %{y} to %{x}: %{z} token slots") + "<extra></extra>"
    fig = go.Figure(go.Heatmap(z=counts, x=names, y=names, text=counts, texttemplate="%{text}",
                               colorscale="Blues", showscale=False, xgap=3, ygap=3,
                               hovertemplate=hover))
    moved = sum(counts[s][d] for s in range(world) for d in range(world) if s != d)
    total = sum(map(sum, counts))
    fig.update_yaxes(autorange="reversed", title_text=tr("from (the token's rank)"))
    fig.update_xaxes(title_text=tr("to (the rank with the token's expert)"), side="top")
    title = (tr("Dispatch on {n} ranks, first MoE layer, first batch", n=world) + "<br><sup>"
             + tr("{moved} of {total} kept token slots leave their rank ({share:.0%}; {blind:.0%} "
                  "if routing ignored where a token lives)", moved=moved, total=total,
                  share=moved / total, blind=1 - 1 / world) + "</sup>")
    # a top margin that holds the two title lines above the top x axis and its title
    fig.update_layout(title=title, height=210 + 70 * world, template=TEMPLATE,
                      margin=dict(l=120, r=20, t=170, b=20))
    return fig
