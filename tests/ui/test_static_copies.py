"""show_static draws plain copies only of the live views no front end reported drawing."""
from __future__ import annotations

from types import SimpleNamespace

import IPython.display

from gpututor.ui.comparison import show_static


def item(draw_ms):
    return SimpleNamespace(view=SimpleNamespace(draw_ms=draw_ms),
                           static_figure=lambda: f"figure drawn in {draw_ms}")


def test_only_the_views_no_front_end_drew_get_a_static_copy(monkeypatch, capsys):
    shown = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    show_static(item(None), item(3.5))
    assert shown == ["figure drawn in None"]
    show_static(item(2.0), item(3.5))
    assert shown == ["figure drawn in None"] and "no static copies needed" in capsys.readouterr().out
    show_static(item(2.0), always=True)
    assert shown[-1] == "figure drawn in 2.0"
