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
