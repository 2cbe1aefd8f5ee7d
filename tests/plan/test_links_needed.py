"""The planner's levers that cut communication (issue 45, item 3): synchronising every H steps
(local SGD, DiLoCo) and the slowest link a plan can use."""
from __future__ import annotations

import pytest

from gpututor.catalog import LINKS
from gpututor.checks import InvalidValue
from gpututor.formulas import ring_allreduce_seconds
from gpututor.plan.links_needed import exposed_by_link, slowest_link
from gpututor.plan.memory import transformer_for_params
from gpututor.plan.time import step_time

MODEL = transformer_for_params(1e9)
PLAN = dict(tokens_per_step=1_000_000, n_gpus=64, peak_flops=989e12, dp=64)


def test_syncing_every_h_steps_sends_the_parameters_once_in_h_steps_and_hides_none():
    link = LINKS["eth-25g"]
    for h in (2, 10, 100):
        t = step_time(MODEL, dp_link=link, sync_every=h, sync_bytes=4, comm_efficiency=0.8, **PLAN)
        once = ring_allreduce_seconds(MODEL.n_params * 4, 64, link.bandwidth * 0.8, link.latency)
        assert t["dp_comm_s"] == pytest.approx(once / h, rel=1e-12)
        assert t["dp_exposed_s"] == t["dp_comm_s"]          # between steps: nothing hides it
        assert t["step_s"] == pytest.approx(t["compute_s"] + once / h, rel=1e-12)
    every = step_time(MODEL, dp_link=link, **PLAN)              # H = 1: gradients, overlapped
    assert every["dp_comm_s"] == pytest.approx(
        ring_allreduce_seconds(MODEL.n_params * 2, 64, link.bandwidth * 0.8, link.latency))


def test_sync_every_is_checked_and_refused_with_zero():
    with pytest.raises(InvalidValue, match="sync_every=0 is invalid"):
        step_time(MODEL, dp_link=LINKS["ib-hdr"], sync_every=0, **PLAN)
    with pytest.raises(InvalidValue, match=r"sync_every=4 is invalid with zero_stage=1 .*allowed is 1"):
        step_time(MODEL, dp_link=LINKS["ib-hdr"], sync_every=4, zero_stage=1, **PLAN)


def test_the_slowest_link_is_the_first_whose_exposed_share_fits_and_h_lowers_it():
    rows = exposed_by_link(MODEL, **PLAN, sync_every=10)
    assert [r["bandwidth"] for r in rows] == sorted(r["bandwidth"] for r in rows)
    chosen = slowest_link(MODEL, **PLAN, sync_every=10, max_exposed_share=0.1)
    first = next(r for r in rows if r["exposed_share"] <= 0.1)
    assert chosen == first and all(r["exposed_share"] > 0.1 for r in rows[:rows.index(first)])
    bandwidth = {h: slowest_link(MODEL, **PLAN, sync_every=h)["bandwidth"] for h in (1, 10, 100)}
    assert bandwidth[100] < bandwidth[10] < bandwidth[1]     # the same plan, slower links
    # syncing between steps hides nothing, so no link makes it free; overlapped, a fast one does
    assert slowest_link(MODEL, **PLAN, sync_every=10, max_exposed_share=0.0) is None
    assert slowest_link(MODEL, **PLAN, max_exposed_share=0.0)["dp_exposed_s"] == 0.0
    with pytest.raises(InvalidValue, match="max_exposed_share"):
        slowest_link(MODEL, **PLAN, max_exposed_share=1.5)


def test_powersgd_values_follow_torchs_rule_on_this_packages_model():
    """The planner's count per block and for the embedding equals what DDP's PowerSGD hook
    sends for the same matrices of the small GPT (``powersgd_bytes``, torch's rule, the bytes
    the ddp strategy meters), at a rank where every matrix is compressed and at one where the
    narrow ones are sent whole."""
    import torch
    from gpututor import RunSpec, build_model
    from gpututor.parallel.data_parallel.ddp import powersgd_bytes
    from gpututor.plan.memory import Transformer
    from gpututor.plan.time import powersgd_values
    spec = RunSpec(model="gpt", model_size="small", device="cpu")
    gpt = build_model(spec)
    cfg = gpt.cfg
    plan = Transformer(cfg.n_layer, cfg.d_model, cfg.n_head, cfg.vocab_size, cfg.block_size)
    for rank in (1, 4, cfg.d_model // 4):
        block = sum(powersgd_bytes(p, rank) // 4 for p in gpt.blocks[0].parameters()
                    if p.ndim == 2)
        emb = powersgd_bytes(gpt.tok_emb.weight, rank) // 4
        assert powersgd_values(plan, rank) == cfg.n_layer * block + emb, rank
        assert powersgd_values(plan, rank) < plan.n_params


def test_powersgd_sends_its_values_in_two_all_reduces_and_is_refused_where_it_does_not_apply():
    link = LINKS["eth-25g"]
    from gpututor.plan.time import powersgd_values
    t = step_time(MODEL, dp_link=link, powersgd_rank=4, grad_bytes=4, comm_efficiency=0.8,
                  **PLAN)
    bw = link.bandwidth * 0.8
    assert t["dp_comm_s"] == pytest.approx(
        ring_allreduce_seconds(powersgd_values(MODEL, 4) * 4, 64, bw, link.latency)
        + ring_allreduce_seconds(0, 64, bw, link.latency), rel=1e-12)
    plain = step_time(MODEL, dp_link=link, grad_bytes=4, comm_efficiency=0.8, **PLAN)
    assert t["dp_comm_s"] < plain["dp_comm_s"] / 50
    with pytest.raises(InvalidValue, match=r"powersgd_rank=4 is invalid with zero_stage=2"):
        step_time(MODEL, dp_link=link, powersgd_rank=4, zero_stage=2, **PLAN)
    with pytest.raises(InvalidValue, match=r"powersgd_rank=4 is invalid with sync_every=10"):
        step_time(MODEL, dp_link=link, powersgd_rank=4, sync_every=10, **PLAN)
    with pytest.raises(InvalidValue, match=r"powersgd_rank=-1 is invalid"):
        step_time(MODEL, dp_link=link, powersgd_rank=-1, **PLAN)
