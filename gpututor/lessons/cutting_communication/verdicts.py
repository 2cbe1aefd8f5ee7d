"""Lesson 13's verdicts: what the lever runs showed, each sentence chosen from their numbers
(``levers.run_levers``'s measures), never written in advance.

Words for "about the same" are conditions stated in the lesson: bytes within :data:`SAME_SHARE`
of the run compared with, times within :data:`SAME_TIME` (one run each, on a shared machine, so
smaller differences are not read as differences), held-out losses within :data:`SAME_LOSS`. The
headline names every run within those of the best, not one of a tie.
"""
from __future__ import annotations

from ...i18n import not_measured, tr

SAME_SHARE = 0.10   # bytes within 10 % of the other run's: "about the same"
# times within 25 %: the examiner's three identical DDP runs on the shared 2-core machine spread
# 22 % (their first two, measuring steps then counted; now left out, see levers.lever_measures)
SAME_TIME = 0.25
SAME_LOSS = 0.01    # held-out losses within 0.01: "about the same"
Verdict = tuple[str, str, str]


def _bytes_words(mine, theirs, other: str) -> str:
    if mine is None or theirs is None:
        return tr("bytes sent: not measured")
    if mine == 0:
        return tr("sent nothing")
    ratio = theirs / mine
    if abs(ratio - 1) <= SAME_SHARE:
        return tr("sent about as many bytes per token as {other} ({mine:,.0f})", other=other,
                  mine=mine)
    if ratio > 1:
        return tr("sent {ratio:.1f}× fewer bytes per token than {other} ({mine:,.0f} against "
                  "{theirs:,.0f})", ratio=ratio, other=other, mine=mine, theirs=theirs)
    return tr("sent {ratio:.1f}× more bytes per token than {other} ({mine:,.0f} against "
              "{theirs:,.0f})", ratio=1 / ratio, other=other, mine=mine, theirs=theirs)


def _time_words(mine, theirs, other: str) -> str:
    if mine is None or theirs is None:
        return tr("time per token: not measured")
    ratio = mine / theirs
    if abs(ratio - 1) <= SAME_TIME:
        return tr("took about {other}'s time per token ({mine:.2f} ms per 1,000 tokens)",
                  other=other, mine=mine)
    if ratio < 1:
        return tr("took {ratio:.2f}× {other}'s time per token: faster ({mine:.2f} against "
                  "{theirs:.2f} ms per 1,000 tokens)", ratio=ratio, other=other, mine=mine,
                  theirs=theirs)
    return tr("took {ratio:.2f}× {other}'s time per token: slower ({mine:.2f} against "
              "{theirs:.2f} ms per 1,000 tokens)", ratio=ratio, other=other, mine=mine,
              theirs=theirs)


def _loss_words(mine: float, theirs: float, other: str) -> str:
    gap = mine - theirs
    if abs(gap) <= SAME_LOSS:
        return tr("held-out loss {mine:.3f}, within {same} of {other}'s", mine=mine,
                  same=SAME_LOSS, other=other)
    if gap < 0:
        return tr("held-out loss {mine:.3f}, {gap:.3f} below {other}'s", mine=mine, gap=-gap,
                  other=other)
    return tr("held-out loss {mine:.3f}, {gap:.3f} above {other}'s", mine=mine, gap=gap,
              other=other)


def lever_sentence(name: str, results: dict) -> str:
    """One lever against the run it changes one thing of (its ``against``)."""
    mine = results[name]
    other = mine["lever"].against
    theirs = results[other]
    label = tr(other)
    sent = _bytes_words(mine["sent_per_token"], theirs["sent_per_token"], label)
    if mine.get("compressed_sent_per_token") and theirs["sent_per_token"]:
        sent += tr(" (its first {warm} steps send whole gradients; over the {n} steps after "
                   "them, {ratio:.1f}× fewer: {mine:,.0f})", warm=mine["warm_up_steps"],
                   n=mine["steps"] - mine["warm_up_steps"],
                   ratio=theirs["sent_per_token"] / mine["compressed_sent_per_token"],
                   mine=mine["compressed_sent_per_token"])
    return tr("{name}: {sent}; {time}; {loss}.", name=tr(name), sent=sent,
              time=_time_words(mine["ms_per_k_tokens"], theirs["ms_per_k_tokens"],
                               label),
              loss=_loss_words(mine["held_out_loss"], theirs["held_out_loss"], label))


def levers_verdict(results: dict) -> Verdict:
    """Which run sent the fewest bytes per token, which took the least time per token on the
    link, which ended with the lowest held-out loss; a sentence per lever as details."""
    def best(key, near, runs=results):
        """Every run within ``near`` of the best on ``key``: a share of it, or (loss) a gap."""
        measured = {n: r[key] for n, r in runs.items() if r[key] is not None}
        if not measured:
            return tr("not measured")
        least = min(measured.values())
        limit = least + near if key == "held_out_loss" else least * (1 + near)
        return " / ".join(tr(n) for n, v in measured.items() if v <= limit)
    same_link = {n: r for n, r in results.items() if not r["lever"].other_link}
    tokens = {r["tokens"] for r in results.values()}
    headline = tr("Fewest bytes per token (within {share:.0%} of the fewest): {fewest}; least "
                  "time per token on the InfiniBand-like link (within {time:.0%} of the least): "
                  "{fastest}; lowest held-out loss after the same {tokens:,} tokens (within "
                  "{loss} of the lowest): {lowest}.",
                  share=SAME_SHARE, time=SAME_TIME, loss=SAME_LOSS,
                  fewest=best("sent_per_token", SAME_SHARE),
                  fastest=best("ms_per_k_tokens", SAME_TIME, same_link),
                  lowest=best("held_out_loss", SAME_LOSS), tokens=max(tokens))
    details = [lever_sentence(n, results) for n, r in results.items()
               if r["lever"].against is not None]
    if len(tokens) > 1:
        details.append(tr("The runs trained different numbers of tokens: {tokens}",
                          tokens=", ".join(f"{t:,}" for t in sorted(tokens))))
    return headline, "\n".join(details), "mixed"


def overlap_counts(records: list[dict]) -> dict:
    """From rank 0's timelines: how many collectives started before that step's last backward
    ended, out of how many, and what share of their seconds lay under backward."""
    started = total = 0
    under = seconds = 0.0
    for r in records:
        spans = r.get("timeline") if r["rank"] == 0 else None
        if not spans:
            continue
        backward = [s for s in spans if s["kind"] == "compute" and s["name"] == "backward"]
        if not backward:
            continue
        first, last = min(s["start"] for s in backward), max(s["end"] for s in backward)
        for s in spans:
            if s["kind"] != "collective":
                continue
            total += 1
            started += s["start"] < last
            seconds += s["end"] - s["start"]
            under += max(0.0, min(s["end"], last) - max(s["start"], first))
    return {"started": started, "total": total,
            "under_share": under / seconds if seconds > 0 else None}


def overlap_verdict(on: dict, off: dict) -> Verdict:
    """The overlap run against the one that sends every bucket after backward, from their
    timelines and their time per token."""
    a, b = overlap_counts(on["records"]), overlap_counts(off["records"])
    share = lambda c: not_measured(c["under_share"], ".0%")
    detail = tr("with overlap {started} of the {total} bucket all-reduces of rank 0's steps "
                "started before that step's backward ended ({share} of their time under "
                "backward); without, {b_started} of {b_total} ({b_share}).",
                started=a["started"], total=a["total"],
                share=share(a), b_started=b["started"], b_total=b["total"], b_share=share(b))
    t_on, t_off = on["ms_per_k_tokens"], off["ms_per_k_tokens"]
    if t_on is None or t_off is None:
        return tr("Overlap: time per token not measured"), detail, "mixed"
    ratio = t_on / t_off
    if abs(ratio - 1) <= SAME_TIME:
        head = tr("Overlap on and off took about the same time per token here ({on:.2f} and "
                  "{off:.2f} ms per 1,000 tokens)", on=t_on, off=t_off)
        return head, detail, "mixed"
    if ratio < 1:
        head = tr("With overlap a token took {ratio:.2f}× the time it took without ({on:.2f} "
                  "against {off:.2f} ms per 1,000 tokens)", ratio=ratio, on=t_on, off=t_off)
        return head, detail, "good"
    head = tr("With overlap a token took {ratio:.2f}× the time it took without, more, not less "
              "({on:.2f} against {off:.2f} ms per 1,000 tokens)", ratio=ratio, on=t_on,
              off=t_off)
    return head, detail, "bad"
