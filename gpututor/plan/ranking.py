"""Rank estimates and say what the ranking means: :class:`Recommendation` and its notes.

:func:`gpututor.plan.recommend.recommend` makes the estimates; this module orders them (those
that meet the deadline and budget first, then by cost, then by time) and writes the notes for
a person: whether one GPU is enough, the smallest cluster that meets the constraints, what does
not fit, when the link is the limit, and which precision a GPU without bf16 was planned in. The
note that answers the question (one GPU is enough, the smallest cluster, or that nothing fits
or meets the constraints) is also its :attr:`Recommendation.headline`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..catalog import CURRENCY_SYMBOLS, GB, currency, money
from ..i18n import ntr, show_table, show_verdict, tr
from ..i18n.shown import table_text


@dataclass
class Recommendation:
    """Ranked estimates that fit; the ones that do not; and notes for a person."""

    ranked: list
    rejected: list
    notes: list
    one_gpu_enough: bool
    link_bound: bool
    headline: str = ""     # the note that answers the question (one of ``notes``)
    tone: str = "mixed"    # "good": it is met; "bad": nothing fits or meets the constraints

    @property
    def smallest(self):
        """The fewest GPUs that fit and meet the deadline and budget (cheapest among equals)."""
        meeting = [e for e in self.ranked if e.meets]
        return min(meeting, key=lambda e: (e.config.count, rank_key(e)), default=None)

    def best_per_gpu(self) -> dict:
        """GPU type -> its best-ranked estimate that fits (types where nothing fits left out)."""
        best = {}
        for e in self.ranked:
            best.setdefault(e.config.gpu, e)
        return best

    def rows(self, top: int = 10) -> tuple[list[str], list[list[str]]]:
        """The best ``top`` configurations, a row each; every row fits (the ``fits`` column
        says so); ``meets``: within the deadline and budget."""
        cost_label = tr("cost {symbol}", symbol=CURRENCY_SYMBOLS[currency()])   # set_currency's
        yes, no = tr("yes"), tr("no")
        columns = ["#", tr("configuration"), tr("GB/GPU"), tr("fits"), tr("days"), cost_label,
                   tr("meets")]
        rows = [[str(i), e.config.shown, f"{e.memory['total'] / GB:.1f}", yes if e.fits else no,
                 f"{e.days:.2f}", f"{e.cost:,.0f}" if e.cost is not None else tr("not priced"),
                 yes if e.meets else no] for i, e in enumerate(self.ranked[:top], 1)]
        return columns, rows

    def left_out(self) -> list[str]:
        """The line saying how many GPU counts and links no layout fits (none if none)."""
        return [ntr("({n} GPU count and link where no layout fits is left out: see the notes)",
                    "({n} GPU counts and links where no layout fits are left out: see the "
                    "notes)", len(self.rejected))] if self.rejected else []

    def table(self, top: int = 10) -> str:
        """:meth:`rows` as plain text, one line each."""
        return "\n".join([table_text(*self.rows(top))] + ["    " + line for line in self.left_out()])

    def show(self, top: int = 10, notes: bool = True) -> None:
        """:meth:`rows` as a table (in a notebook; printed elsewhere); with ``notes``, first the
        :attr:`headline`, the other notes (what does not fit, what was left out, prices) one
        click away. Every row fits (its ``fits`` column says so)."""
        if notes:
            show_verdict(sentence(self.headline),
                         "\n".join(n for n in self.notes if n != self.headline), self.tone)
        show_table(*self.rows(top))


def sentence(note: str) -> str:
    """A note as a headline: its first letter capitalised (the notes are lines of a list)."""
    return note[:1].upper() + note[1:]


def meets(est, budget, deadline_days) -> bool:
    """Whether ``est`` is within ``deadline_days`` and ``budget`` (None: no constraint)."""
    on_time = deadline_days is None or est.days <= deadline_days
    affordable = budget is None or (est.cost is not None and est.cost <= budget)
    return on_time and affordable


def rank_key(est) -> tuple:
    """Meeting the constraints first; then cost (time for those that miss), time, count."""
    cost = est.cost if est.cost is not None else math.inf
    return (not est.meets, cost if est.meets else est.total_s, est.total_s, est.config.count)


def with_notes(ranked, rejected, budget, deadline_days, precisions=()) -> Recommendation:
    """The :class:`Recommendation` of ``ranked`` (fit) and ``rejected`` (do not), with notes;
    ``precisions``: (gpu, asked, planned) where a GPU was planned in another precision."""
    notes = [tr("{gpu} has no bf16: planned in {planned} with loss scaling (asked for {asked})",
                gpu=gpu, planned=planned, asked=asked) for gpu, asked, planned in precisions]
    fitting_one = [e for e in ranked if e.config.count == 1]
    one_enough = bool(fitting_one) and fitting_one[0].meets
    headline, tone = None, "mixed"
    if not ranked:
        smallest = rejected[-1] if rejected else None
        if smallest is None:
            notes.append(tr("nothing tried fits in memory: try more GPUs or a GPU with more memory"))
        else:
            count = smallest.config.count
            notes.append(tr("nothing tried fits in memory; even {count} GPU needs {need:,.0f} GB "
                            "per GPU of {usable:,.0f} usable: try more GPUs or a GPU with more "
                            "memory" if count == 1 else
                            "nothing tried fits in memory; even {count} GPUs need {need:,.0f} GB "
                            "per GPU of {usable:,.0f} usable: try more GPUs or a GPU with more "
                            "memory", count=count, need=smallest.memory["total"] / GB,
                            usable=smallest.usable_bytes / GB))
        headline, tone = notes[-1], "bad"
    elif one_enough:
        one = fitting_one[0]
        notes.append(tr("one GPU is enough: {label} fits and takes {days:,.1f} days for {cost}; "
                        "more GPUs only buy time", label=one.config.shown, days=one.days,
                        cost=money(one.cost)) if one.cost else
                     tr("one GPU is enough: {label} fits and takes {days:,.1f} days; more GPUs "
                        "only buy time", label=one.config.shown, days=one.days))
        headline, tone = notes[-1], "good"
    elif fitting_one:
        notes.append(tr("one GPU fits ({label}) but misses the deadline or budget: {days:,.1f} "
                        "days", label=fitting_one[0].config.shown, days=fitting_one[0].days))
    elif rejected:   # the smallest count that fits, for each GPU type planned
        for gpu, first in sorted(_first_counts(ranked).items()):
            notes.append(tr("{gpu}: the model does not fit on one GPU; the smallest count that "
                            "fits is {count}", gpu=gpu, count=first))
    if ranked:
        notes.append(ntr("every configuration listed fits in its GPU's usable memory; {n} GPU "
                         "count and link where none fits is left out",
                         "every configuration listed fits in its GPU's usable memory; {n} GPU "
                         "counts and links where none fits are left out", len(rejected)))
    meeting = [e for e in ranked if e.meets]
    if meeting and not one_enough:
        e = min(meeting, key=lambda e: (e.config.count, rank_key(e)))
        asked = {(True, True): tr("the deadline and budget"), (True, False): tr("the deadline"),
                 (False, True): tr("the budget")}.get((deadline_days is not None,
                                                       budget is not None))
        values = dict(label=e.config.shown, days=e.days, what=asked)
        if asked is None:   # nothing asked: every configuration that fits meets it
            notes.append(tr("the smallest cluster that fits: {label} ({days:,.1f} days, {cost})",
                            cost=money(e.cost), **values) if e.cost is not None else
                         tr("the smallest cluster that fits: {label} ({days:,.1f} days)", **values))
        else:
            notes.append(tr("the smallest cluster that meets {what}: {label} ({days:,.1f} days, "
                            "{cost})", cost=money(e.cost), **values) if e.cost is not None else
                         tr("the smallest cluster that meets {what}: {label} ({days:,.1f} days)",
                            **values))
        headline, tone = notes[-1], "good"
    if ranked and not meeting:
        # literal templates, so tests/test_i18n.py sees each and its Chinese entry
        if deadline_days and budget:
            notes.append(tr("no configuration meets the deadline and budget: the fastest and "
                            "cheapest that fit are shown"))
        elif deadline_days:
            notes.append(tr("no configuration meets the deadline: the fastest and cheapest that "
                            "fit are shown"))
        elif budget:
            notes.append(tr("no configuration meets the budget: the fastest and cheapest that fit "
                            "are shown"))
        else:
            notes.append(tr("no configuration meets the constraints: the fastest and cheapest "
                            "that fit are shown"))
        headline, tone = notes[-1], "bad"
    unpriced = sorted({e.config.gpu for e in ranked if e.cost is None})
    if budget is not None and unpriced:
        notes.append(tr("{gpus}: not priced, so the budget cannot be checked and none of its "
                        "layouts counts as meeting it; give a price (catalog.set_price or "
                        "price_per_hour) to rank it", gpus=", ".join(unpriced)))
    link_bound = bool(ranked) and ranked[0].link_bound
    bound = [e for e in ranked if e.link_bound]
    if bound:
        notes.append(tr("link-bound: {label} waits on communication most of each step; a faster "
                        "link would speed it up more than more GPUs", label=bound[0].config.shown))
    return Recommendation(ranked, rejected, notes, one_enough, link_bound, headline or notes[0],
                          tone)


def _first_counts(ranked) -> dict:
    """GPU type -> the fewest GPUs of that type among ``ranked`` (the estimates that fit)."""
    first: dict = {}
    for e in ranked:
        first[e.config.gpu] = min(first.get(e.config.gpu, e.config.count), e.config.count)
    return first
