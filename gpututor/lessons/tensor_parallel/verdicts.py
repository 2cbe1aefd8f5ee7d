"""Lesson 04's verdicts: what each result cell's runs showed, one sentence chosen from their
numbers, with the figures behind it as details, and the rows of the tables beside them. Each
verdict returns ``(headline, details, tone)`` for ``gpututor.i18n.show_verdict``; none launches
anything (``tests/lessons/tensor_parallel`` feeds them numbers)."""
from __future__ import annotations

from ...catalog import get_link
from ...formulas import ring_allreduce_seconds
from ...i18n import not_measured, tr
from ...models import INIT_STD
from ..common.timelines import last_timed_step
from . import messages

# an embedding and head below this share of the parameters and of the FLOPs are "small"
SMALL_SHARE = 0.05
# weights this close to one process's (a share of their starting spread) differ by rounding
ROUNDING_SHARE = 0.05


def vocabulary_verdict(vocab: dict) -> tuple[str, str, str]:
    """Whether splitting the token embedding and the head by vocabulary (Megatron-LM's way) would
    pay for ``vocab`` (``vocabulary_share``'s counts): small when both its parameter and FLOP
    shares are under :data:`SMALL_SHARE`."""
    words = dict(params=vocab["embedding_share"], flops=vocab["head_flop_share"])
    details = "\n".join([
        tr("vocabulary: {vocab} characters (from the data), width {d}: the token embedding, which "
           "the head shares, holds {params:,} of the {total:,} parameters; the head does {flops:.1%} "
           "of a forward pass's FLOPs (counted)", vocab=vocab["vocab_size"], d=vocab["d_model"],
           params=vocab["embedding_params"], total=vocab["params"], flops=vocab["head_flop_share"]),
        tr("Splitting them adds collectives: an all-reduce after the lookup, and the sums of a "
           "vocabulary-parallel cross-entropy.")])
    if max(words.values()) < SMALL_SHARE:
        return tr("The token embedding and the head are {params:.1%} of the parameters and do "
                  "{flops:.1%} of the FLOPs: splitting them by vocabulary would save at most about "
                  "that per rank, so this code keeps them whole", **words), details, "good"
    return tr("The token embedding and the head are {params:.1%} of the parameters and do "
              "{flops:.1%} of the FLOPs: splitting them by vocabulary, as Megatron-LM does, would "
              "pay here", **words), details, "bad"


def training_verdict(gaps: dict[str, tuple[float, str]], steps: int) -> tuple[str, str, str]:
    """The parallel runs against one process, after their losses were asserted equal: ``gaps``
    maps each strategy to its largest weight difference and the weight it is in. Within
    :data:`ROUNDING_SHARE` of the weights' starting spread (``INIT_STD``) it is rounding."""
    worst = max(gap for gap, _ in gaps.values())
    share = worst / INIT_STD
    details = "\n".join(
        [tr("{strategy}: largest weight difference {worst:.1e}, in {where}", strategy=s,
            worst=gap, where=where) for s, (gap, where) in gaps.items()]
        + [tr("The split matrix products add up in a different order, so the results round "
              "differently. Adam divides each step by the root of its running squared gradient: "
              "where a gradient is close to zero, a rounding difference in it can change the step "
              "by up to the learning rate (a likely cause; this lesson does not measure that "
              "element's gradient). tests/parallel/test_tensor_parallel.py also checks each layer "
              "and block on its own: outputs, and weight, bias and input gradients.")])
    words = dict(steps=steps, worst=worst, share=share, std=INIT_STD)
    if share <= ROUNDING_SHARE:
        return tr("Both tensor-parallel runs trained as one process does: the same loss at each of "
                  "the {steps} steps (within 1e-5), the weights at most {worst:.1e} apart, "
                  "{share:.1%} of their starting spread ({std})", **words), details, "good"
    return tr("Both tensor-parallel runs had one process's loss at each of the {steps} steps "
              "(within 1e-5), but a weight ended {worst:.1e} away, {share:.0%} of the weights' "
              "starting spread ({std}): more than rounding usually leaves", **words), details, "mixed"


def speed_verdict(single: dict, tp: dict, dtensor: dict) -> tuple[str, str, str]:
    """tp's and tp-dtensor's tokens/s on 2 ranks over one process's (``single``), and which of
    the two parallel runs was slower; "nothing to compare" where a run measured none."""
    speeds = [r["tokens_per_s"] for r in (single, tp, dtensor)]
    if any(v is None for v in speeds):
        return tr("A run measured no steady tokens/s: nothing to compare."), "", "mixed"
    words = dict(tp=speeds[1] / speeds[0], dt=speeds[2] / speeds[0], ratio=speeds[2] / speeds[1])
    ideal = tr("On 2 ranks the ideal is 2× one process, an upper bound even if communication were "
               "free: the layer norms, the embeddings and the head run whole on every rank.")
    if words["ratio"] < 1:
        other = tr("tp-dtensor reached {ratio:.2f}× tp's tokens/s: the slower of the two, with the "
                   "same arithmetic. Two causes are known, and this lesson does not measure which "
                   "weighs more: DTensor runs Python around every operation on a sharded tensor (it "
                   "works out each result's placement), a fixed cost that weighs more the smaller the "
                   "matrices; and the extra all-reduces section 4 counts. "
                   "benchmarks/bench_model_parallel.py measures the step-time ratio.", **words)
    else:
        other = tr("tp-dtensor reached {ratio:.2f}× tp's tokens/s: not slower.", **words)
    details = ideal + "\n" + other
    if max(words["tp"], words["dt"]) < 1:
        return tr("On 2 ranks both tensor-parallel runs were slower than one process: tp {tp:.2f}×, "
                  "tp-dtensor {dt:.2f}× its tokens/s", **words), details, "bad"
    if min(words["tp"], words["dt"]) >= 1:
        return tr("On 2 ranks both tensor-parallel runs were faster than one process: tp {tp:.2f}×, "
                  "tp-dtensor {dt:.2f}× its tokens/s", **words), details, "good"
    return tr("On 2 ranks tp reached {tp:.2f}× and tp-dtensor {dt:.2f}× one process's tokens/s",
              **words), details, "mixed"


def count_verdict(counted: dict, ours_per_block: float, n_layer: int) -> tuple[str, str, str]:
    """DTensor's all-reduces per block and step (``counted`` by ``count_collectives``) against
    this lesson's from-scratch layers' (``ours_per_block``: its measured bytes over one
    all-reduce's, per block)."""
    forward, backward = (counted[p].get("all_reduce", 0) / n_layer for p in ("forward", "backward"))
    words = dict(dt=forward + backward, forward=forward, backward=backward, ours=ours_per_block,
                 extra=abs(forward + backward - ours_per_block))
    details = tr("DTensor's: counted by PyTorch's CommDebugMode in one training step of rank 0; "
                 "ours: the bytes the tp run measured per step over the bytes of one all-reduce.")
    if round(forward + backward) > round(ours_per_block):
        return tr("DTensor's plan ran {dt:.0f} all-reduces per block and step ({forward:.0f} in "
                  "forward, {backward:.0f} in backward), ours {ours:.0f}: {extra:.0f} more",
                  **words), details, "bad"
    if round(forward + backward) < round(ours_per_block):
        return tr("DTensor's plan ran {dt:.0f} all-reduces per block and step ({forward:.0f} in "
                  "forward, {backward:.0f} in backward), ours {ours:.0f}: {extra:.0f} fewer",
                  **words), details, "good"
    return tr("DTensor's plan ran as many all-reduces per block and step as ours: {dt:.0f} "
              "({forward:.0f} in forward, {backward:.0f} in backward)", **words), details, "good"


def wait_verdict(tp: dict, n_layer: int) -> tuple[str, str, str]:
    """How much of the tp run's step its ranks waited in all-reduces (medians of the steady
    steps): most of it (half or more) or less."""
    if _waiting(tp) is None:
        return tr("This run did not measure its waiting: not measured."), "", "mixed"
    words = dict(share=_waiting(tp), step_ms=tp["step_time_s"] * 1e3,
                 mb=tp["comm_bytes_per_step"] / 1e6)
    details = tr("all-reduced per step: {step_mb:.2f} MB, {block_mb:.2f} MB per block; waiting: "
                 "{wait_ms:.1f} ms per step, {block_ms:.1f} ms per block (medians of the steady "
                 "steps; the wait: mean of the ranks, including waiting for the other rank to reach "
                 "the all-reduce; the step: the slowest rank)",
                 step_mb=words["mb"], block_mb=words["mb"] / n_layer, wait_ms=tp["comm_s"] * 1e3,
                 block_ms=tp["comm_s"] / n_layer * 1e3)
    if words["share"] >= 0.5:
        return tr("The tp run's ranks waited in all-reduces for most of their step: {share:.0%} of "
                  "{step_ms:.0f} ms, for {mb:.2f} MB a step", **words), details, "bad"
    return tr("The tp run's ranks waited in all-reduces for less than half of their step: "
              "{share:.0%} of {step_ms:.0f} ms, for {mb:.2f} MB a step", **words), details, "good"


def _megabytes(value) -> str:
    return tr("not measured") if value is None else f"{value / 1e6:.2f}"


def tokens_per_s(summary: dict) -> str:
    """A run's tokens/s for a table: "12,345", or "not measured" (no steady step)."""
    value = summary["tokens_per_s"]
    return tr("not measured") if value is None else f"{value:,.0f}"


def degree_rows(by_degree: dict[str, dict], rank: int = 0) -> list[list[str]]:
    """One row per tensor-parallel degree: rank ``rank``'s parameters and activations (MB) and
    the run's tokens/s ("not measured" where a figure is None)."""
    return [[label, _megabytes(s["mem_by_category"]["params"][rank]),
             _megabytes(s["mem_by_category"]["activations"][rank]),
             tokens_per_s(s)]
            for label, s in by_degree.items()]


def degree_verdict(by_degree: dict[str, dict], rank: int = 0) -> tuple[str, str, str]:
    """How much rank ``rank``'s parameters and activations shrank from the first degree to the
    last: activations that shrank by less than nine tenths of the parameters' factor are the
    replicated ones (layer norms, residual stream)."""
    (first, one), (last, many) = list(by_degree.items())[0], list(by_degree.items())[-1]
    shrink = {}
    for category in ("params", "activations"):
        before, after = (s["mem_by_category"][category][rank] for s in (one, many))
        shrink[category] = before / after if before and after else None
    if None in shrink.values():
        return tr("Rank {rank}'s memory by category was not measured: nothing to compare.",
                  rank=rank), "", "mixed"
    words = dict(first=first, last=last, rank=rank, params=shrink["params"],
                 acts=shrink["activations"])
    if shrink["activations"] < 0.9 * shrink["params"]:
        return tr("From {first} to {last}, rank {rank}'s parameters shrank {params:.1f}× and its "
                  "activations only {acts:.1f}×: the layer norms' inputs and outputs and the "
                  "residual stream stay whole on every rank", **words), "", "mixed"
    return tr("From {first} to {last}, rank {rank}'s parameters shrank {params:.1f}× and its "
              "activations {acts:.1f}×", **words), "", "good"


def _waiting(summary: dict) -> float | None:
    """The share of a run's median step its ranks waited for communication (None: not measured)."""
    if summary["comm_s"] is None or not summary["step_time_s"]:
        return None
    return summary["comm_s"] / summary["step_time_s"]


def link_run_rows(link_runs: dict[str, dict], link_records: dict[str, tuple]) -> list[list[str]]:
    """One row per run on an emulated link: MB all-reduced per step, the share of the step its
    ranks waited, and the steady step the figures come from."""
    rows = []
    for label, s in link_runs.items():
        waited = _waiting(s)
        rows.append([label, _megabytes(s["comm_bytes_per_step"]),
                     tr("not measured") if waited is None else f"{waited:.0%}",
                     str(messages.last_steady_step(*link_records[label]))])
    return rows


def link_verdict(link_runs: dict[str, dict], link_records: dict[str, tuple], names,
                 allreduce_bytes: int) -> tuple[str, str, str]:
    """On which emulated links (``names``) tensor parallel (run ``"tp, <name>"``) waited a larger
    share of its step than data parallel (``"ddp, <name>"``); the details count each run's
    messages (``messages``: tp's all-reduces of ``allreduce_bytes``, DDP's buckets and how many of
    their bytes were launched before backward's last gradient)."""
    waits = {name: (_waiting(link_runs[f"tp, {name}"]), _waiting(link_runs[f"ddp, {name}"]))
             for name in names}
    if any(None in pair for pair in waits.values()):
        return tr("These runs did not measure their waiting: not measured."), "", "mixed"
    lines = []
    for name in names:
        sent = messages.tp_allreduces(link_runs[f"tp, {name}"], allreduce_bytes)
        buckets = messages.ddp_buckets(*link_records[f"ddp, {name}"])
        lines.append(tr("{name}: tensor parallel sent {tp_n} all-reduces ({tp_mb:.2f} MB), each "
                        "between two layers that need it; DDP sent {dp_n} buckets ({dp_mb:.2f} MB), "
                        "{early:.0%} of their bytes launched before backward's last gradient (they "
                        "can overlap it), the rest after it", name=name, tp_n=sent["count"],
                        tp_mb=sent["bytes"] / 1e6, dp_n=buckets["count"],
                        dp_mb=buckets["bytes"] / 1e6, early=buckets["early_share"]))
    pairs = tr("; ").join(tr("{name}: {tp:.0%} against {dp:.0%}", name=name, tp=tp, dp=dp)
                      for name, (tp, dp) in waits.items())
    more = [name for name, (tp, dp) in waits.items() if tp > dp]
    details = "\n".join(lines)
    if len(more) == len(waits):
        return tr("On every emulated link tensor parallel waited a larger share of its step than "
                  "data parallel ({pairs})", pairs=pairs), details, "bad"
    if not more:
        return tr("On no emulated link did tensor parallel wait a larger share of its step than "
                  "data parallel ({pairs})", pairs=pairs), details, "good"
    return tr("Tensor parallel waited a larger share of its step than data parallel on {more}, "
              "not on the others ({pairs})", more=", ".join(more), pairs=pairs), details, "mixed"


def _ms(seconds: float) -> str:
    """Milliseconds with three significant figures (a GPU link emulated here is well under 1 ms)."""
    ms = seconds * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def link_rows(links: dict[str, str], emulated: dict, allreduce_bytes: int) -> list[list[str]]:
    """One row per link (``links``: its name -> its ``gpututor.catalog`` key; ``emulated``: its
    name -> the ``EmulatedLink`` here): the catalogue's bandwidth (GB/s) and latency (µs), the
    emulated ones (MB/s, ms), and one all-reduce of ``allreduce_bytes`` on 2 ranks in the α-β
    model, emulated (ms), with the share of it that is latency."""
    rows = []
    for name, key in links.items():
        real, link = get_link(key), emulated[name]
        whole = link.allreduce_seconds(allreduce_bytes, 2)
        bytes_only = ring_allreduce_seconds(allreduce_bytes, 2, link.bandwidth)   # without α
        rows.append([f"{name} ({key})", f"{real.bandwidth / 1e9:g}", f"{real.latency * 1e6:.0f}",
                     f"{link.bandwidth / 1e6:.2f}", _ms(link.latency), _ms(whole), f"{1 - bytes_only / whole:.0%}"])
    return rows


def _pass_of(collective: dict, passes: list[dict]) -> str:
    """The compute span (forward, backward, ...) that was running when ``collective`` started."""
    return next((p["name"] for p in passes if p["start"] <= collective["start"] <= p["end"]),
                "other")


def _rank_step(record: dict) -> dict:
    """One rank's step from its spans: its all-reduces per pass, their time, the step as drawn
    (first span to last), and the wait the worker counted in the step (the record's ``comm_s``;
    None: not measured)."""
    spans = record["timeline"]
    passes = [s for s in spans if s["kind"] == "compute"]
    reduces = [s for s in spans if s["kind"] == "collective"]
    within = {name: [c for c in reduces if _pass_of(c, passes) == name]
              for name in ("forward", "backward")}
    return {"start": min(s["start"] for s in spans), "end": max(s["end"] for s in spans),
            "forward": within["forward"], "backward": within["backward"], "reduces": reduces,
            "total": sum(c["end"] - c["start"] for c in reduces), "waited": record.get("comm_s")}


def _one_or_range(values: list, fmt: str) -> str:
    """``values`` formatted: one figure where every rank's reads the same, else lowest to highest."""
    low, high = (format(v, fmt) for v in (min(values), max(values)))
    return low if low == high else tr("{low} to {high}", low=low, high=high)


def timeline_verdict(records: list[dict]) -> tuple[str, str, str]:
    """The tp run's last step with a timeline: how many all-reduces each rank made in forward and
    in backward and what share of its step as drawn (first span to last) they took. Each of them
    blocks (``dist.all_reduce`` without ``async_op``), so the worker counts each bar's whole
    length as waiting: the bars must add up to the rank's ``comm_s``, a consistency check of the
    spans against the meter, not a measure of overlap."""
    last = last_timed_step(records)
    if last is None:
        return tr("this run recorded no timeline (RunSpec(timeline=True))"), "", "mixed"
    step, timed = last
    ranks = {r["rank"]: _rank_step(r) for r in timed}
    if not any(o["reduces"] for o in ranks.values()):
        return tr("step {step} recorded no collective on any rank", step=step), "", "mixed"
    origin = min(o["start"] for o in ranks.values())
    ms = lambda t: f"{(t - origin) * 1e3:.1f}"   # noqa: E731
    details = [tr("rank {rank}: step as drawn {a} to {b} ms; forward {fwd} all-reduces ({fwd_ms:.1f} "
                  "ms), backward {bwd} ({bwd_ms:.1f} ms); {mb:.2f} MB in all, {total:.1f} ms, "
                  "{share:.0%} of its step as drawn; the wait the worker counted (comm_s): {waited}",
                  rank=rank, a=ms(o["start"]), b=ms(o["end"]), fwd=len(o["forward"]),
                  bwd=len(o["backward"]),
                  fwd_ms=sum(c["end"] - c["start"] for c in o["forward"]) * 1e3,
                  bwd_ms=sum(c["end"] - c["start"] for c in o["backward"]) * 1e3,
                  mb=sum(c["bytes"] or 0 for c in o["reduces"]) / 1e6, total=o["total"] * 1e3,
                  share=o["total"] / (o["end"] - o["start"]), waited=not_measured(o["waited"], ".1f", 1e-3, " ms"))
               for rank, o in sorted(ranks.items())]
    details.append(tr("ms from the start of the figure. Each all-reduce here blocks: "
                      "dist.all_reduce without async_op makes the rank (on a GPU, its compute "
                      "stream) wait until it ends, so the worker counts each bar's whole length as "
                      "waiting, and comm_s is the bars' sum, printed as a consistency check. The "
                      "forward and backward bars time the whole pass, these waits included. An "
                      "all-reduce cannot end on any rank before the last rank has joined it, so a "
                      "bar includes waiting for the other rank (and, where ranks share cores, for a "
                      "core); the two ranks' bars need not end together. The share is of this one "
                      "step as drawn, first bar to last; section 5's wait verdict took medians of "
                      "the steady steps, against the slowest rank's step."))
    words = dict(step=step,
                 fwd=_one_or_range([len(o["forward"]) for o in ranks.values()], "d"),
                 bwd=_one_or_range([len(o["backward"]) for o in ranks.values()], "d"),
                 share=_one_or_range([o["total"] / (o["end"] - o["start"])
                                      for o in ranks.values()], ".0%"))
    said = tr("In the last step (step {step}, counted from 0) each rank made {fwd} all-reduces in "
              "forward and {bwd} in backward, which took {share} of its step as drawn (first bar "
              "to last)", **words)
    if any(o["waited"] is None for o in ranks.values()):
        return (said + tr("; the wait the worker counted was not measured, so the bars cannot be "
                          "checked against it"), "\n".join(details), "mixed")
    # the bars and comm_s come from the same seconds (CollectiveTimer.run adds each all-reduce's
    # to both): they differ only if the spans or the meter are wrong, never through overlap
    off = {rank: o["total"] - o["waited"] for rank, o in ranks.items()}
    if all(abs(v) <= max(0.01 * ranks[r]["total"], 5e-5) for r, v in off.items()):
        return (said + tr("; each all-reduce blocks its rank, so the worker counted all of their "
                          "time as waiting: the bars add up to the wait it counted (comm_s), a "
                          "consistency check, not a measure of overlap"), "\n".join(details), "mixed")
    return (said + tr("; the bars do not add up to the wait the worker counted ({off}): the spans "
                      "and the meter disagree, a fault in the measuring, not overlap",
                      off=tr("; ").join(tr("rank {rank}: {total:.1f} ms of bars, {waited:.1f} ms "
                                           "counted", rank=r, total=ranks[r]["total"] * 1e3,
                                           waited=ranks[r]["waited"] * 1e3) for r in sorted(off))),
            "\n".join(details), "bad")
