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


def load_of(record: dict, layer: int = 0) -> dict:
    """One step's load in ``layer`` (the first: the one lesson 11's live figure draws): the
    busiest expert over the mean, and the share of its slots dropped."""
    kept, dropped = record["expert_tokens"][layer], record["expert_dropped"][layer]
    return {"step": record["step"], "busiest": imbalance(kept, dropped),
            "dropped": sum(dropped) / (sum(dropped) + sum(kept))}


def load_verdict(first: dict, last: dict, top_k: int | None = None) -> tuple[str, str, str]:
    """``(headline, details, tone)``: whether the load grew less balanced, more balanced or
    stayed about as balanced between two steps' records, in the first MoE layer (the busiest
    expert's load over the mean; a change by less than :data:`SAME` of its first value is "about
    the same"), the two steps' figures as details. With ``top_k``, the details say when the
    busiest expert reached the ceiling ``n_expert / top_k``: every token chose it."""
    a, b = load_of(first), load_of(last)
    details = "\n".join(tr("step {step}, first layer: busiest expert x{busiest:.2f} the mean, "
                           "{dropped:.1%} of the layer's slots dropped", **x) for x in (a, b))
    n_expert = len(last["expert_tokens"][0])
    if top_k and b["busiest"] >= n_expert / top_k - 1e-9:
        details += "\n" + tr("x{ceiling:.2f} is the most an expert can take with top-{k} of "
                             "{n} experts: at step {step} every token chose that expert",
                             ceiling=n_expert / top_k, k=top_k, n=n_expert, step=b["step"])
    change = (b["busiest"] - a["busiest"]) / a["busiest"]
    words = dict(first=a["step"], last=b["step"], before=a["busiest"], after=b["busiest"],
                 dropped_before=a["dropped"], dropped_after=b["dropped"])
    if change > SAME:
        return tr("Between steps {first} and {last} the first layer's load grew less balanced: "
                  "the busiest expert went from x{before:.2f} to x{after:.2f} the mean, dropped "
                  "slots from {dropped_before:.1%} to {dropped_after:.1%}", **words), details, "bad"
    if change < -SAME:
        return tr("Between steps {first} and {last} the first layer's load grew more balanced: "
                  "the busiest expert went from x{before:.2f} to x{after:.2f} the mean, dropped "
                  "slots from {dropped_before:.1%} to {dropped_after:.1%}", **words), details, "good"
    return tr("Between steps {first} and {last} the first layer's load stayed about as balanced: "
              "the busiest expert x{before:.2f}, then x{after:.2f} the mean; dropped slots "
              "{dropped_before:.1%}, then {dropped_after:.1%}", **words), details, "mixed"
