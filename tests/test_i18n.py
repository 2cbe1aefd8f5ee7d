"""The widgets and checkers speak the notebook's language; English is the default and the
fallback, and a bad language is refused."""
from __future__ import annotations

import pytest

from gpututor import RunSpec
from gpututor.i18n import ZH, language, set_language, tr
from gpututor.lessons.exercises import check_answer


@pytest.fixture
def chinese():
    set_language("zh")
    yield
    set_language("en")


def test_english_is_the_default_and_templates_format():
    assert language() == "en"
    assert tr("Run") == "Run"
    assert tr("rank {rank}", rank=3) == "rank 3"
    with pytest.raises(ValueError, match="language='fr' is invalid: allowed are 'en', 'zh'"):
        set_language("fr")


def test_chinese_labels_and_an_untranslated_template_stays_english(chinese):
    assert tr("Run") == "运行" and tr("rank {rank}", rank=3) == "进程 3"
    assert tr("no such template {x}", x=1) == "no such template 1"


def test_every_translation_keeps_the_placeholders_of_its_template():
    import string
    fields = lambda text: {f for _, f, _, _ in string.Formatter().parse(text) if f}
    for english, chinese in ZH.items():
        assert fields(chinese) == fields(english), english


def test_the_panel_and_the_checker_speak_chinese(chinese, capsys):
    from gpututor.ui.panel import RunPanel
    panel = RunPanel(RunSpec(world_size=1))
    assert panel.run_button.description == "运行" and panel.stop_button.description == "停止"
    assert "就绪" in panel.status.value and panel.state == "ready"   # the state stays a name
    assert "各进程的 tokens/s" in [a.text for a in panel.fig.layout.annotations]
    check_answer(..., 1.0, "x")
    assert "尚未作答" in capsys.readouterr().out
    check_answer(1.0, 1.0, "x")
    assert "正确" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="与本笔记本测得的结果不符"):
        check_answer(2.0, 1.0, "x")
