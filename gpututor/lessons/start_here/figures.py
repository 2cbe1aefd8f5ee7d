"""Lesson 00's table of common claims, each with what the learner's own run showed."""
from __future__ import annotations

import html

from ...i18n import tr


def claims_html(rows: list[dict]) -> str:
    """An HTML table of ``gpututor.lessons.common.results.claims()``-shaped rows, in the notebook's
    language; a claim whose lesson has not run yet says "not measured yet"."""
    head = "".join(f"<th style='text-align:left'>{html.escape(tr(h))}</th>"
                   for h in ("claim", "measured in lesson", "what your run showed"))
    body = []
    for r in rows:
        if r["values"] is None:
            showed = f"<i>{html.escape(tr('not measured yet: run lesson {lesson}', lesson=r['lesson']))}</i>"
        else:
            showed = html.escape(tr(r["template"], **r["values"])) + \
                f" <small>({html.escape(r['when'])})</small>"
        body.append(f"<tr><td>{html.escape(tr(r['claim']))}</td><td>{html.escape(r['lesson'])}</td>"
                    f"<td>{showed}</td></tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def show_claims(rows: list[dict]):
    """Display :func:`claims_html` in the notebook (and return the HTML object)."""
    from IPython.display import HTML
    return HTML(claims_html(rows))
