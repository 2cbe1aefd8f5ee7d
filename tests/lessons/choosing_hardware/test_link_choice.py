"""Lesson 08's "Which link between the GPUs?": each lever's slowest link is read off the
planner's rows, and the words follow the numbers, in English and in Chinese."""
from __future__ import annotations

from gpututor.catalog import LINKS
from gpututor.i18n import language, set_language
from gpututor.lessons.choosing_hardware.link_choice import (LEVERS, link_choice,
                                                             link_choice_verdict, slowest_fitting)
from gpututor.lessons.choosing_hardware.link_choice_figures import link_choice_figure
from gpututor.plan.memory import transformer_for_params

MODEL = transformer_for_params(1e9, seq_len=2048)


def choice():
    return link_choice(MODEL, 2**20, "H100-80GB", 64, micro_batch=4)


def test_each_lever_is_priced_on_every_link_and_the_slowest_fitting_one_is_named():
    c = choice()
    assert list(c) == list(LEVERS) and all(len(rows) == len(LINKS) for rows in c.values())
    headline, details, kind = link_choice_verdict(c)
    every = slowest_fitting(c["every step, bf16 gradients"])
    rarest = slowest_fitting(c["every 500 steps (DiLoCo's paper)"])
    assert every["bandwidth"] > rarest["bandwidth"]
    assert f"needs {every['link']}" in headline and f"needs only {rarest['link']}" in headline
    for lever in LEVERS:
        assert lever in details
    fig = link_choice_figure(c)
    assert len(fig.data) == len(LEVERS) and all(len(t.y) == len(LINKS) for t in fig.data)


def test_a_sync_lever_that_needs_more_than_every_step_says_why():
    # one micro-batch of 4 sequences per GPU and step: the all-reduce hides behind a whole
    # backward; syncing every 2 steps in float32 hides nothing
    c = link_choice(MODEL, 64 * 4 * 2048, "H100-80GB", 64, micro_batch=4,
                    levers={"every step, fp32 gradients": {"grad_bytes": 4},
                            "every step, bf16 gradients": {"grad_bytes": 2},
                            "every 10 steps (local SGD, DiLoCo)": {"sync_every": 2}})
    _, details, _ = link_choice_verdict(c)
    assert "needs a faster link than every step here" in details


def test_the_verdict_reads_in_chinese():
    was = language()
    set_language("zh")
    try:
        headline, details, _ = link_choice_verdict(choice())
    finally:
        set_language(was)
    assert "每一步用 bf16 梯度同步" in headline and "每 500 步（DiLoCo 论文）" in details
