"""Lesson 08's "Which network between the servers?": each lever's slowest link is read off the
planner's rows, and the words follow the numbers, in English and in Chinese."""
from __future__ import annotations

from gpututor.i18n import language, set_language
from gpututor.lessons.choosing_hardware.link_choice import (EVERY_STEP, LEVERS, NETWORK_LINKS,
                                                             RAREST, link_choice,
                                                             link_choice_verdict, plan_words,
                                                             slowest_fitting)
from gpututor.lessons.choosing_hardware.link_choice_figures import link_choice_figure
from gpututor.plan.memory import per_device_memory, transformer_for_params

MODEL = transformer_for_params(1e9, seq_len=2048)


def choice(**plan):
    return link_choice(MODEL, 2**20, "H100-80GB", 64, micro_batch=4, **plan)


def test_each_lever_is_priced_on_every_network_link_and_its_slowest_fitting_one_named():
    c = choice()
    assert list(c) == list(LEVERS)
    assert all([r["link"] for r in rows] == list(NETWORK_LINKS) for rows in c.values())
    headline, details, kind = link_choice_verdict(c)
    every, rarest = slowest_fitting(c[EVERY_STEP]), slowest_fitting(c[RAREST])
    assert every["bandwidth"] > rarest["bandwidth"] and kind == "good"
    assert f"needs {every['link']}" in headline
    # the rarest sync fits on the slowest network here: said as such, not "needs only"
    assert rarest is c[RAREST][0] and f"even the slowest link here, {rarest['link']}" in headline
    for lever in LEVERS:
        assert lever in details
    fig = link_choice_figure(c)
    assert len(fig.data) == len(LEVERS) and all(len(t.y) == len(NETWORK_LINKS) for t in fig.data)


def test_a_sync_that_saves_less_than_h_times_the_bandwidth_says_why():
    c = choice()
    _, details, _ = link_choice_verdict(c)
    h10 = slowest_fitting(c["every 10 steps (local SGD or DiLoCo, H = 10)"])
    if h10["bandwidth"] == slowest_fitting(c[EVERY_STEP])["bandwidth"]:
        assert "10 times fewer syncs need as fast a link as every step" in details
    else:
        assert "10 times fewer syncs lower the bandwidth needed only" in details
    assert "its sync is exposed and in float32" in details


def test_the_plan_words_come_from_the_numbers():
    c = choice()
    words = plan_words(MODEL, "H100-80GB", per_device_memory(MODEL, micro_batch=4)["total"], c)
    row = c[EVERY_STEP][0]
    assert f"{row['microbatches']} micro-batches per GPU" in words and "within the 72 GB" in words
    assert f"{1e3 * row['dp_window_s']:.0f} ms" in words and "HFU 40%" in words
    assert "over the 72 GB" in plan_words(MODEL, "H100-80GB", 90e9, c)


def test_the_verdict_reads_in_chinese():
    was = language()
    set_language("zh")
    try:
        headline, details, _ = link_choice_verdict(choice())
    finally:
        set_language(was)
    assert "每一步用 bf16 梯度同步" in headline and "每 500 步（DiLoCo 论文）" in details
