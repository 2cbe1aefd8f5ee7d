"""What a ``%%ranks`` cell shows: one column per rank, side by side.

:class:`CellResult` holds each rank's :class:`RankOutcome` (what it printed, the value of its last
expression, its traceback) and, when the cell did not end normally, the sentence saying what
happened to the group (a timeout with the waiting ranks' stacks, an interrupt, a restart). It
draws itself as an HTML table in a notebook and as plain columns in a terminal. Plain strings
only: no widget or plotting library, so nothing here costs the ranks anything.
"""
from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass, field

from ...i18n import tr

COLUMN_CHARS = 38   # width of one rank's column in the text view


@dataclass
class RankOutcome:
    """One rank's part of a cell: ``text`` is ``[(stream, text), ...]`` in the order printed."""
    rank: int
    text: list = field(default_factory=list)
    value: str | None = None
    error: dict | None = None     # {"type", "message", "traceback"}
    seconds: float | None = None  # None: the rank did not finish the cell
    state: str = "done"           # done | error | waiting | interrupted | died | idle
    unanswered: list = field(default_factory=list)   # placeholders (``...``) it would have read

    @property
    def stdout(self) -> str:
        return "".join(t for s, t in self.text if s == "stdout")

    @property
    def stderr(self) -> str:
        return "".join(t for s, t in self.text if s == "stderr")


@dataclass
class CellResult:
    """A cell's outcome on the ranks that ran it, in rank order."""
    cell: int
    outcomes: list
    message: str = ""          # what happened to the group, if the cell did not end normally
    restarted: bool = False
    interrupted: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Every rank finished the cell without an error."""
        return not self.message and all(o.state == "done" for o in self.outcomes)

    def __getitem__(self, rank: int) -> RankOutcome:
        for outcome in self.outcomes:
            if outcome.rank == rank:
                return outcome
        raise KeyError(f"rank={rank} did not run cell {self.cell}; it ran on ranks "
                       + ", ".join(str(o.rank) for o in self.outcomes))

    # ---- drawing --------------------------------------------------------------------------
    def _unanswered_everywhere(self) -> bool:
        """Every rank held the cell back for the same placeholders: said once, not per rank."""
        first = self.outcomes[0].unanswered if self.outcomes else []
        return bool(first) and all(o.unanswered == first and not o.text for o in self.outcomes)

    def _repr_html_(self) -> str:
        if self._unanswered_everywhere():
            return (f"<div style='color:#57606a'>{html.escape(tr('every rank:'))} "
                    f"{html.escape(_unanswered_text(self.outcomes[0]))}</div>")
        head = "".join(f"<th style='text-align:left'>{html.escape(_heading(o))}</th>"
                       for o in self.outcomes)
        cells = "".join(f"<td style='vertical-align:top;text-align:left'>{_cell_html(o)}</td>"
                        for o in self.outcomes)
        note = (f"<pre style='color:#b00;white-space:pre-wrap'>{html.escape(self.message)}</pre>"
                if self.message else "")
        return (f"<table class='gpututor-ranks'><tr>{head}</tr><tr>{cells}</tr></table>{note}")

    def __str__(self) -> str:
        if self._unanswered_everywhere():
            return tr("every rank:") + " " + _unanswered_text(self.outcomes[0])
        columns = [[_heading(o), "-" * COLUMN_CHARS] + _cell_lines(o) for o in self.outcomes]
        height = max(len(c) for c in columns)
        rows = [" | ".join(c[i].ljust(COLUMN_CHARS) if i < len(c) else " " * COLUMN_CHARS
                           for c in columns).rstrip() for i in range(height)]
        return "\n".join(rows + ([self.message] if self.message else []))

    def __repr__(self) -> str:
        return str(self)


def _heading(outcome: RankOutcome) -> str:
    state = {"done": "", "error": tr("error"), "waiting": tr("still waiting"),
             "interrupted": tr("interrupted"), "died": tr("died"), "idle": ""}[outcome.state]
    return tr("rank {rank}", rank=outcome.rank) + (f" ({state})" if state else "")


def _unanswered_text(outcome: RankOutcome) -> str:
    return tr("not answered yet: {names} is still ... here; write your answer in the cell above, "
              "run it, then run this cell again", names=", ".join(outcome.unanswered))


def _cell_html(outcome: RankOutcome) -> str:
    parts = []
    if outcome.unanswered:
        parts.append(f"<div style='color:#57606a;white-space:normal'>"
                     f"{html.escape(_unanswered_text(outcome))}</div>")
    for stream, text in outcome.text:
        color = "#b00" if stream == "stderr" else "inherit"
        parts.append(f"<pre style='margin:0;color:{color}'>{html.escape(text)}</pre>")
    if outcome.value is not None:
        parts.append(f"<pre style='margin:0'>{html.escape(outcome.value)}</pre>")
    if outcome.error is not None:
        parts.append("<pre style='margin:0;color:#b00;white-space:pre-wrap'>"
                     f"{html.escape(outcome.error['traceback'])}</pre>")
    return "".join(parts)


def _cell_lines(outcome: RankOutcome) -> list[str]:
    text = "".join(t for _, t in outcome.text) + (_unanswered_text(outcome) if outcome.unanswered else "")
    if outcome.value is not None:
        text += ("" if not text or text.endswith("\n") else "\n") + outcome.value
    if outcome.error is not None:
        text += ("" if not text or text.endswith("\n") else "\n") + outcome.error["traceback"]
    lines = []
    for line in text.rstrip("\n").splitlines():
        lines.extend(textwrap.wrap(line, COLUMN_CHARS, replace_whitespace=False,
                                   drop_whitespace=False) or [""])
    return lines
