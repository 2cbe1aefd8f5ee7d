"""A mixture of experts: the layer that takes the place of the GPT's MLP in ``model="moe"``.

Each token goes to ``top_k`` of ``n_expert`` expert MLPs, picked by a learned router
(Shazeer et al. 2017, "Outrageously large neural networks: the sparsely-gated
mixture-of-experts layer" [ref: shazeer2017-moe]; top-2 as in GShard, Lepikhin et al. 2021
[ref: lepikhin2021-gating]; top-1 with a capacity and a balancing loss as in the Switch
Transformer, Fedus et al. 2021 [ref: fedus2021-top1] [ref: fedus2021-capacity]). The conventions
here:

- **Gates.** Softmax over all experts first, then the ``top_k`` largest probabilities, and
  those renormalised to sum to 1 over the k chosen (GShard's top-2 convention
  [ref: lepikhin2021-gating]; with ``top_k=1`` every gate is 1). The layer's output for a
  token is ``Σ gate_j · expert_j(x)``.
- **Capacity.** Each expert takes at most ``ceil(capacity_factor · tokens · top_k /
  n_expert)`` token slots per forward, ``tokens`` the batch's tokens (``B·T``): GShard's
  2·tokens/n_expert for top-2 [ref: lepikhin2021-capacity] with a capacity factor, Switch's
  eq. 3 for top-1 [ref: fedus2021-capacity].
- **Drop order.** Slots are served in token order (row-major over ``B x T``; all ``top_k``
  slots of a token before those of the next token); a slot that finds its expert full is
  dropped: its term is 0 (the token's other gates are *not* renormalised again) and the
  residual connection carries the token on. Under expert parallel the order is that of the
  global batch (rank r's tokens after those of ranks < r), so drops are the one-process ones.
- **Load-balancing loss** (Switch, eq. 4, for k slots per token [ref: fedus2021-balance-loss]):
  ``n_expert · Σ_e f_e · P_e``, ``f_e`` the fraction of routed slots sent to expert e (before
  dropping; not differentiable), ``P_e`` the mean router probability of e. It is 1 when routing
  is uniform; the layer keeps ``aux_loss_coef`` times it, and :func:`auxiliary_loss` adds the
  layers' up for the training loss.

Where the experts run is the layer's ``exchange``: :class:`LocalExperts` (all experts in this
process) by default; expert parallel puts in one that sends tokens to the ranks owning their
experts (``gpututor.parallel.expert_parallel``). Everything else is the same code on one rank
and on many, which is why the two give the same numbers.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from .model_sizes import MoEConfig


# ---- the router's pieces, each a small function a test can call on hand-made inputs ----------

def route(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(probs, gates, experts)`` for router ``logits`` (tokens x n_expert): the softmax over
    experts, and each token's ``top_k`` experts with their probabilities renormalised over the
    k chosen (tokens x top_k each)."""
    probs = F.softmax(logits.float(), dim=-1)
    top, experts = probs.topk(top_k, dim=-1)
    return probs, top / top.sum(dim=-1, keepdim=True), experts


def expert_capacity(tokens: int, top_k: int, n_expert: int, capacity_factor: float) -> int:
    """Slots each expert may take: ``ceil(capacity_factor · tokens · top_k / n_expert)``."""
    return math.ceil(capacity_factor * tokens * top_k / n_expert)


def slot_positions(experts: torch.Tensor, n_expert: int,
                   earlier: torch.Tensor | None = None) -> torch.Tensor:
    """Each slot's place in its expert's queue (tokens x top_k): how many slots of earlier
    tokens chose the same expert, plus ``earlier[e]`` slots taken before this batch (under
    expert parallel: by the ranks before this one)."""
    chosen = F.one_hot(experts, n_expert).sum(dim=1)   # tokens x n_expert, 0 or 1
    before = chosen.cumsum(dim=0) - chosen             # slots of the tokens before this one
    if earlier is not None:
        before = before + earlier
    return before.gather(1, experts)


def load_balancing_loss(probs: torch.Tensor, fraction: torch.Tensor) -> torch.Tensor:
    """Switch's auxiliary loss ``n_expert · Σ_e f_e · P_e``: ``fraction`` is f (slots routed to
    each expert over all slots), ``P`` the mean of ``probs`` (tokens x n_expert) over tokens."""
    return probs.shape[-1] * (fraction * probs.mean(dim=0)).sum()


# ---- where the experts run ----------------------------------------------------------------

class LocalExperts:
    """All experts in this process: the batch is all the tokens there are."""

    def token_counts(self, routed: torch.Tensor, tokens: int):
        """``(earlier, total, tokens)``: slots per expert taken before this batch (none), slots
        per expert in the whole batch, and the whole batch's tokens."""
        return torch.zeros_like(routed), routed, tokens

    def run(self, x: torch.Tensor, counts: list[int], experts: nn.ModuleDict) -> torch.Tensor:
        """Rows of ``x`` sorted by expert, ``counts[e]`` of them for expert e -> their outputs."""
        return run_experts(x, counts, experts, first=0)


def run_experts(x: torch.Tensor, counts: list[int], experts: nn.ModuleDict,
                first: int) -> torch.Tensor:
    """Apply expert ``first + i`` to the i-th run of ``counts[i]`` rows of ``x``. Every expert
    runs, on no rows if none came, so each has a gradient (0) every step."""
    parts = x.split(counts)
    return torch.cat([experts[str(first + i)](part) for i, part in enumerate(parts)])


# ---- the layer -------------------------------------------------------------------------------

class MoELayer(nn.Module):
    """Router + ``n_expert`` expert MLPs, with capacity and the balancing loss (module docs).

    ``experts`` is keyed by the expert's number, so a rank that keeps some of them (expert
    parallel) keeps their names, and with them their initial values. After each forward the
    layer holds ``aux_loss`` (already times ``aux_loss_coef``) and adds the batch's kept and
    dropped slots per expert to ``kept`` and ``dropped`` (read and cleared by
    :func:`expert_load`)."""

    def __init__(self, cfg: MoEConfig, make_expert: Callable[[], nn.Module]):
        super().__init__()
        self.n_expert, self.top_k = cfg.n_expert, cfg.top_k
        self.capacity_factor, self.aux_loss_coef = cfg.capacity_factor, cfg.aux_loss_coef
        self.router = nn.Linear(cfg.d_model, cfg.n_expert, bias=False)
        self.experts = nn.ModuleDict({str(e): make_expert() for e in range(cfg.n_expert)})
        self.exchange = LocalExperts()
        self.aux_loss = None
        self.kept = self.dropped = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.reshape(-1, x.shape[-1])                      # tokens x d_model
        tokens, k, E = h.shape[0], self.top_k, self.n_expert
        probs, gates, experts = route(self.router(h), k)
        routed = torch.bincount(experts.flatten(), minlength=E)
        earlier, total, all_tokens = self.exchange.token_counts(routed, tokens)
        capacity = expert_capacity(all_tokens, k, E, self.capacity_factor)
        keep = (slot_positions(experts, E, earlier) < capacity).flatten()
        # the kept slots, sorted by expert; a stable sort keeps token order within each expert
        slot_expert = experts.flatten()[keep]
        slot_token = torch.arange(tokens, device=h.device).repeat_interleave(k)[keep]
        slot_gate = gates.flatten()[keep]
        slot_expert, order = torch.sort(slot_expert, stable=True)
        slot_token, slot_gate = slot_token[order], slot_gate[order]
        counts = torch.bincount(slot_expert, minlength=E).tolist()
        y = self.exchange.run(h[slot_token], counts, self.experts)
        out = y.new_zeros(h.shape).index_add(0, slot_token, y * slot_gate[:, None].to(y.dtype))
        self.aux_loss = self.aux_loss_coef * load_balancing_loss(probs, total / (all_tokens * k))
        kept = total.clamp(max=capacity)   # queue places 0 .. total-1: the first `capacity` stay
        self._count(kept, total - kept)
        return out.view(x.shape)

    def _count(self, kept: torch.Tensor, dropped: torch.Tensor) -> None:
        kept, dropped = kept.detach().cpu(), dropped.detach().cpu()
        self.kept = kept if self.kept is None else self.kept + kept
        self.dropped = dropped if self.dropped is None else self.dropped + dropped


def moe_layers(model: nn.Module) -> list[MoELayer]:
    """The model's MoE layers, in order (none for a model without experts); looks inside
    wrappers such as DDP."""
    return [m for m in model.modules() if isinstance(m, MoELayer)]


def auxiliary_loss(model: nn.Module):
    """What the training loss adds to the cross-entropy: the MoE layers' balancing losses of
    the last forward (each already times its coefficient); ``0.0`` for a model without experts."""
    losses = [layer.aux_loss for layer in moe_layers(model) if layer.aux_loss is not None]
    return sum(losses) if losses else 0.0


def expert_load(model: nn.Module) -> dict:
    """Token slots per expert since the last call, and clear them: ``{"expert_tokens": one
    list per layer of kept slots per expert, "expert_dropped": one list per layer of dropped
    slots per expert}``: the fields of a step's record (both None for a model without experts).
    Counted over the batch the layers route: the global batch on one rank and under expert
    parallel (which counts across its ranks); under plain data parallel, the rank's own slice
    (capacity is then per rank too, and drops differ from one process's)."""
    layers = moe_layers(model)
    if not layers:
        return {"expert_tokens": None, "expert_dropped": None}
    load = {"expert_tokens": [], "expert_dropped": []}
    for layer in layers:
        for key, counts in (("expert_tokens", layer.kept), ("expert_dropped", layer.dropped)):
            load[key].append(counts.tolist() if counts is not None else [0] * layer.n_expert)
        layer.kept = layer.dropped = None
    return load
