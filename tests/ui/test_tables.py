"""Tables shown with gpututor.i18n.show_table: columns of numbers to the right, text to the left,
in HTML and in plain text alike."""
from __future__ import annotations

from gpututor.i18n.shown import _aligns, table_html, table_text


def test_numbers_right_text_left():
    columns = ["run", "ranks", "off by", "fp16", "source"]
    rows = [["single (reference)", "1", "-0.0%*", "inf", "Rajbhandari et al."],
            ["ddp", "2", "+1.7%", "65504", "ZeRO, Table 1"]]
    assert _aligns(columns, rows) == ["left", "right", "right", "right", "left"]
    assert "text-align:right'>-0.0%*</td>" in table_html(columns, rows)
    assert table_text(columns, rows).splitlines()[1].startswith("single (reference)")
