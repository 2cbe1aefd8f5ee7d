"""Rank estimates and say what the ranking means: :class:`Recommendation` and its notes.

:func:`gpututor.plan.recommend.recommend` makes the estimates; this module orders them (those
that meet the deadline and budget first, then by cost, then by time) and writes the notes for
a person: whether one GPU is enough, the smallest cluster that meets the constraints, what does
not fit, when the link is the limit, and which precision a GPU without bf16 was planned in.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..catalog import CURRENCY_SYMBOLS, GB, currency, money


@dataclass
class Recommendation:
    """Ranked estimates that fit; the ones that do not; and notes for a person."""

    ranked: list
    rejected: list
    notes: list
    one_gpu_enough: bool
    link_bound: bool

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

    def table(self, top: int = 10) -> str:
        """The best ``top`` configurations as plain text, one line each; every row fits (the
        ``fits`` column says so); ``meets``: within the deadline and budget."""
        cost_label = f"cost {CURRENCY_SYMBOLS[currency()]}"   # the currency set_currency chose
        lines = [f"{'#':>2}  {'configuration':<72} {'GB/GPU':>7} {'fits':>4} {'days':>8} "
                 f"{cost_label:>10}  meets"]
        for i, e in enumerate(self.ranked[:top], 1):
            cost = f"{e.cost:,.0f}" if e.cost is not None else "not priced"
            lines.append(f"{i:>2}  {e.config.label:<72} {e.memory['total'] / GB:7.1f} "
                         f"{'yes' if e.fits else 'no':>4} {e.days:8.2f} {cost:>10}  "
                         f"{'yes' if e.meets else 'no'}")
        if self.rejected:
            lines.append(f"    ({len(self.rejected)} GPU counts and links where no layout fits "
                         "are left out: see the notes)")
        return "\n".join(lines)


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
    notes = [f"{gpu} has no bf16: planned in {planned} with loss scaling (asked for {asked})"
             for gpu, asked, planned in precisions]
    fitting_one = [e for e in ranked if e.config.count == 1]
    one_enough = bool(fitting_one) and fitting_one[0].meets
    if not ranked:
        smallest = rejected[-1] if rejected else None
        need = ""
        if smallest:
            count = smallest.config.count
            need = (f"; even {count} {'GPU needs' if count == 1 else 'GPUs need'} "
                    f"{smallest.memory['total'] / GB:,.0f} GB per GPU of "
                    f"{smallest.usable_bytes / GB:,.0f} usable")
        notes.append(f"nothing tried fits in memory{need}: try more GPUs or a GPU with more memory")
    elif one_enough:
        notes.append(f"one GPU is enough: {fitting_one[0].config.label} fits and takes "
                     f"{fitting_one[0].days:,.1f} days"
                     + (f" for {money(fitting_one[0].cost)}" if fitting_one[0].cost else "")
                     + "; more GPUs only buy time")
    elif fitting_one:
        notes.append(f"one GPU fits ({fitting_one[0].config.label}) but misses the deadline or "
                     f"budget: {fitting_one[0].days:,.1f} days")
    elif rejected:
        first = min((e.config.count for e in ranked), default=None)
        notes.append(f"the model does not fit on one GPU; the smallest count that fits is {first}")
    if ranked:
        notes.append("every configuration listed fits in its GPU's usable memory; "
                     f"{len(rejected)} GPU counts and links where none fits are left out")
    meeting = [e for e in ranked if e.meets]
    if meeting and not one_enough:
        e = min(meeting, key=lambda e: (e.config.count, rank_key(e)))
        notes.append(f"the smallest cluster that meets the deadline and budget: {e.config.label}"
                     f" ({e.days:,.1f} days" + (f", {money(e.cost)})" if e.cost else ")"))
    if ranked and not meeting:
        what = [w for w, v in (("deadline", deadline_days), ("budget", budget)) if v]
        notes.append(f"no configuration meets the {' and '.join(what) or 'constraints'}: "
                     "the fastest and cheapest that fit are shown")
    unpriced = sorted({e.config.gpu for e in ranked if e.cost is None})
    if budget is not None and unpriced:
        notes.append(f"{', '.join(unpriced)}: not priced, so the budget cannot be checked and "
                     "none of its layouts counts as meeting it; give a price "
                     "(catalog.set_price or price_per_hour) to rank it")
    link_bound = bool(ranked) and ranked[0].link_bound
    bound = [e for e in ranked if e.link_bound]
    if bound:
        e = bound[0]
        notes.append(f"link-bound: {e.config.label} waits on communication most of each step; "
                     "a faster link would speed it up more than more GPUs")
    return Recommendation(ranked, rejected, notes, one_enough, link_bound)
