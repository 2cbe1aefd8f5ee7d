"""How balanced the experts' load is, and how a run changed it: the numbers lesson 11 reads off
rank 0's records, and the verdict chosen from them."""
from __future__ import annotations

from ...i18n import tr

# a change smaller than this share of the first step's figure is read as "about the same"
SAME = 0.05


def imbalance(kept: list[int], dropped: list[int]) -> float:
    """The busiest expert's routed slots over the mean (1 = perfectly balanced)."""
    routed = [k + d for k, d in zip(kept, dropped)]
    return max(routed) / (sum(routed) / len(routed))


def load_of(record: dict) -> dict:
    """One step's load: the busiest expert over the mean in its worst layer, and the share of
    all slots dropped."""
    ratios = [imbalance(k, d) for k, d in zip(record["expert_tokens"], record["expert_dropped"])]
    dropped = sum(map(sum, record["expert_dropped"]))
    routed = dropped + sum(map(sum, record["expert_tokens"]))
    return {"step": record["step"], "busiest": max(ratios), "dropped": dropped / routed}


def load_verdict(first: dict, last: dict) -> tuple[str, str, str]:
    """``(headline, details, tone)``: whether the load grew less balanced, more balanced or
    stayed about as balanced between two steps' records (the busiest expert's excess over the
    mean, the worst layer; a change within :data:`SAME` of it is "about the same"), the two
    steps' figures as details."""
    a, b = load_of(first), load_of(last)
    details = "\n".join(tr("step {step}: busiest expert x{busiest:.2f} the mean (worst layer), "
                           "{dropped:.1%} of slots dropped", **x) for x in (a, b))
    change = (b["busiest"] - a["busiest"]) / a["busiest"]
    words = dict(first=a["step"], last=b["step"], before=a["busiest"], after=b["busiest"],
                 dropped_before=a["dropped"], dropped_after=b["dropped"])
    if change > SAME:
        return tr("Between steps {first} and {last} the load grew less balanced: the busiest expert "
                  "went from x{before:.2f} to x{after:.2f} the mean, dropped slots from "
                  "{dropped_before:.1%} to {dropped_after:.1%}", **words), details, "bad"
    if change < -SAME:
        return tr("Between steps {first} and {last} the load grew more balanced: the busiest expert "
                  "went from x{before:.2f} to x{after:.2f} the mean, dropped slots from "
                  "{dropped_before:.1%} to {dropped_after:.1%}", **words), details, "good"
    return tr("Between steps {first} and {last} the load stayed about as balanced: the busiest "
              "expert x{before:.2f}, then x{after:.2f} the mean; dropped slots {dropped_before:.1%}, "
              "then {dropped_after:.1%}", **words), details, "mixed"
