"""Which link a plan needs: one step's data-parallel communication (``time.step_time``) priced
on each link of the catalogue, and the slowest link on which what compute does not hide stays
within a share of the step. The levers that cut communication change the answer: gradients in
fewer bytes (``grad_bytes``), more micro-batches per step (a larger ``tokens_per_step``), and
synchronising every H steps (``sync_every``, local SGD and DiLoCo). Formulas, no measurement."""
from __future__ import annotations

from .. import catalog, checks
from .memory import Transformer
from .time import step_time


def exposed_by_link(model: Transformer, tokens_per_step: float, n_gpus: int, peak_flops: float,
              links=None, **step_kwargs) -> list[dict]:
    """For each link (default: the catalogue's), slowest first: the step's data-parallel
    seconds (``dp_comm_s``), what compute does not hide (``dp_exposed_s``), ``compute_s``,
    ``step_s``, ``microbatches``, ``dp_window_s`` (the compute that can hide it) and
    ``exposed_share`` (exposed / step). ``step_kwargs`` go to ``step_time``
    (``dp`` = replicas, ``grad_bytes``, ``sync_every``, ...)."""
    chosen = [catalog.get_link(x) if isinstance(x, str) else x
              for x in (links if links is not None else catalog.LINKS.values())]
    rows = []
    for link in sorted(chosen, key=lambda x: x.bandwidth):
        t = step_time(model, tokens_per_step, n_gpus, peak_flops, dp_link=link, **step_kwargs)
        rows.append({"link": link.name, "bandwidth": link.bandwidth,
                     "dp_comm_s": t["dp_comm_s"], "dp_exposed_s": t["dp_exposed_s"],
                     "compute_s": t["compute_s"], "step_s": t["step_s"],
                     "microbatches": t["microbatches"], "dp_window_s": t["dp_window_s"],
                     "exposed_share": t["dp_exposed_s"] / t["step_s"]})
    return rows


def slowest_link(model: Transformer, tokens_per_step: float, n_gpus: int, peak_flops: float,
                 max_exposed_share: float = 0.1, links=None, **step_kwargs) -> dict | None:
    """The slowest link whose exposed data-parallel time is at most ``max_exposed_share`` of
    the step (its row of :func:`exposed_by_link`), or None if none of them is fast enough."""
    checks.fraction("max_exposed_share", max_exposed_share, allow_zero=True)
    rows = exposed_by_link(model, tokens_per_step, n_gpus, peak_flops, links, **step_kwargs)
    return next((r for r in rows if r["exposed_share"] <= max_exposed_share), None)
