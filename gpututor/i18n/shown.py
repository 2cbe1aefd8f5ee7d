"""How a lesson's sentence reaches the learner: rendered as text in a notebook, printed elsewhere.

A sentence printed with ``print`` shows in a notebook as monospace, one unwrapped line per
sentence: walls of fixed-width text the learner has to scroll (issue 47). :func:`show` gives a
notebook kernel an HTML rendering of the same words, each line its own paragraph in the page's
font, wrapping at the cell's width, with the text itself as the plain-text form (what a console,
``nbval`` and a plain front end read). Outside a notebook kernel (a rank, a script, a test) it
prints, unchanged.

The HTML is kept from MathJax: JupyterLab typesets ``$...$`` in HTML outputs, which ate the dollar
signs of prices ("12,870at3/GPU-hour"). The block carries MathJax's ignore classes (MathJax 2's
``tex2jax_ignore``, MathJax 3's ``mathjax_ignore``: MathJax's documentation, "The tex2jax
Preprocessor" and "Document Options", ``ignoreHtmlClass``).
"""
from __future__ import annotations

import html
import re
import sys
import unicodedata

from ..checks import InvalidValue, choice

NO_MATH = "tex2jax_ignore mathjax_ignore"


def _display():
    """The kernel's ``IPython.display`` module, reached through the IPython already loaded:
    nothing here imports a front end (a rank never loads one)."""
    return sys.modules["IPython"].display


def _emit(text: str, page) -> None:
    """Print ``text`` outside a notebook; in one, display the HTML ``page()`` makes, with
    ``text`` as its plain form (made only where it is shown)."""
    if not in_notebook():
        print(text)
        return
    _display().display({"text/html": page(), "text/plain": text}, raw=True)


def in_notebook() -> bool:
    """True in a Jupyter kernel (an IPython shell with a kernel), False in a rank, a script or a
    plain IPython console."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


# how a kind of text looks: a lesson's sentence in the page's own colour; a note (a side remark
# about the machine, such as ranks sharing cores) smaller and grey; a report (a failure's lines as
# the run wrote them, stacks included) in a fixed-width font that still wraps at the cell's width
KINDS = {"text": "", "note": "color:#57606a;font-size:0.9em",
         "report": "font-family:var(--jp-code-font-family,monospace);font-size:0.9em;"
                   "white-space:pre-wrap;overflow-wrap:anywhere"}


def as_html(text: str, kind: str = "text") -> str:
    """``text`` as HTML paragraphs: one per line, escaped, blank lines kept as space; a report
    as one wrapping block, its indentation kept."""
    if kind == "report":
        return f"<div class='gpututor-report {NO_MATH}' style='{KINDS[kind]}'>{html.escape(str(text))}</div>"
    lines = [html.escape(line.strip()) for line in str(text).splitlines()]
    body = "".join(f"<p style='margin:0.15em 0'>{line}</p>" if line else "<br>" for line in lines)
    return f"<div class='gpututor-{kind} {NO_MATH}' style='{KINDS[kind]}'>{body}</div>"


def show(*parts, kind: str = "text") -> None:
    """Show ``parts`` (joined by spaces, as ``print`` joins them: a sentence, or lines of them)
    to the learner: rendered in a notebook, printed elsewhere. ``kind`` "note" draws it as a
    side remark (smaller, grey), "report" as a failure's report (fixed-width, wrapping)."""
    text = " ".join(str(part) for part in parts)
    choice("kind", kind, tuple(KINDS))
    _emit(text, lambda: as_html(text, kind))


def show_code(*objects) -> None:
    """Show the source of each of ``objects`` (functions, classes, methods): highlighted in a
    notebook, printed elsewhere."""
    import inspect
    source = "\n".join(inspect.getsource(o) for o in objects)
    if not in_notebook():
        print(source)
        return
    shown = _display()
    shown.display(shown.Code(source, language="python"))


def _numeric(text: str) -> bool:
    """Whether a formatted cell reads as a number ("1,234", "-7.1%", "0.50×", "12 ms", "n/a")."""
    return bool(re.fullmatch(r"[-+]?([\d,.]+(e[-+]?\d+)?|inf|nan)\s*(%|×|x|[a-zA-Z/]{0,3})?\*?"
                             r"|n/a|-", text.strip()))


def _aligns(columns: list[str], rows: list[list]) -> list[str]:
    """Each column's alignment: right where every cell is a number, else left."""
    return ["right" if rows and all(_numeric(str(r[i])) for r in rows) else "left"
            for i in range(len(columns))]


def table_html(columns: list[str], rows: list[list]) -> str:
    """An HTML table of ``rows`` (lists of cells, already formatted) under ``columns``: columns
    of numbers to the right, the others to the left."""
    aligns = _aligns(columns, rows)
    head = "".join(f"<th style='text-align:{aligns[i]}'>{html.escape(str(c))}</th>"
                   for i, c in enumerate(columns))
    body = "".join("<tr>" + "".join(f"<td style='text-align:{aligns[i]}'>{html.escape(str(c))}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return (f"<table class='gpututor-table {NO_MATH}'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def columns_of(text: str) -> int:
    """How many columns of a fixed-width font ``text`` takes (a Chinese character takes two)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def table_text(columns: list[str], rows: list[list]) -> str:
    """The same table as aligned plain text (a console, a script, a test), aligned as
    :func:`table_html` aligns it."""
    cells = [[str(c) for c in columns]] + [[str(c) for c in row] for row in rows]
    widths = [max(columns_of(r[i]) for r in cells) for i in range(len(columns))]
    aligns = _aligns(columns, rows)
    pad = lambda text, width, i: (text + " " * (width - columns_of(text)) if aligns[i] == "left"
                                  else " " * (width - columns_of(text)) + text)
    return "\n".join("  ".join(pad(c, w, i) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
                     for r in cells)


def show_table(columns: list[str], rows: list[list]) -> None:
    """Show a table (``rows`` of formatted cells under ``columns``): an HTML table in a notebook,
    aligned text elsewhere."""
    rows = [list(r) for r in rows]
    if any(len(r) != len(columns) for r in rows):
        raise InvalidValue("rows", rows, f"rows of {len(columns)} cells, one per column of "
                           f"{columns!r}")
    _emit(table_text(columns, rows), lambda: table_html(columns, rows))


# a verdict's tone: what the run showed went the way the lesson hoped, the other way, or neither
TONES = {"good": "#1a7f37", "bad": "#cf222e", "mixed": "#9a6700"}


def verdict_html(headline: str, details: str = "", tone: str = "mixed",
                 toggle: str = "details") -> str:
    """A callout: the headline in bold beside a bar of the tone's colour, the details (lines of
    text) one click away in a ``<details>`` element whose toggle says ``toggle``."""
    more = "" if not details else (
        f"<details><summary style='cursor:pointer;color:#57606a'>{html.escape(toggle)}"
        f"</summary>{as_html(details)}</details>")
    return (f"<div class='gpututor-verdict {NO_MATH}' style='border-left:4px solid {TONES[tone]};"
            f"padding:0.3em 0.8em;margin:0.3em 0;background:rgba(127,127,127,0.06)'>"
            f"<b>{html.escape(headline)}</b>{more}</div>")


def verdict(headline: str, details: str = "", tone: str = "mixed", toggle: str = "details") -> None:
    """Show what a run showed, first: ``headline`` (one sentence, chosen from the run's numbers)
    with ``details`` behind a click (a toggle saying ``toggle``) in a notebook; both printed
    elsewhere. ``tone``: "good", "bad" or "mixed"."""
    choice("tone", tone, tuple(TONES))
    _emit(headline + ("\n" + details if details else ""),
          lambda: verdict_html(headline, details, tone, toggle))
