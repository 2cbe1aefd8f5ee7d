"""Lesson 03's results, each told first in one sentence chosen from the runs' numbers.

Every ``*_verdict`` returns ``(headline, details, tone)`` for ``gpututor.i18n.show_verdict``:
one bold sentence, true for the outcome that chose it, with the numbers behind it one click
away. Every ``*_table`` returns ``(columns, rows)`` for ``show_table``. A figure a run left
unmeasured (``None``) reads "not measured", never 0. The tests feed numbers to every branch
(``tests/lessons/sharding/test_sharding_verdicts.py``); nothing here launches a run.
"""
from __future__ import annotations

from ...formulas import MB
from ...i18n import not_measured, tr
from ...models import build_model
from ...parallel.sharding.flat import unit_parameters
from ..common.timelines import last_timed_step
from .runs import first_fit, outcome_words

Verdict = tuple[str, str, str]
Table = tuple[list[str], list[list[str]]]


def _mb(value) -> str:
    return not_measured(value, ".2f", MB)


def same_training_verdict(runs: dict[str, dict], baseline: str = "ddp") -> Verdict:
    """Each run's largest loss difference from ``baseline``'s at any step: none, float32
    rounding (``torch.testing``'s default tolerance for float32: 1e-5 + 1.3e-6 × the loss), or
    more."""
    base = runs[baseline]["losses"]
    gaps = {name: max(abs(a - b) for a, b in zip(s["losses"], base))
            for name, s in runs.items() if name != baseline}
    details = "\n".join(tr("{name}: largest loss difference from {baseline} over {steps} steps: "
                           "{gap:.1e}", name=name, baseline=baseline, gap=gap,
                           steps=len(runs[name]["losses"])) for name, gap in gaps.items())
    worst = max(gaps, key=gaps.get)
    if gaps[worst] == 0:
        return (tr("All {n} sharded runs had exactly {baseline}'s loss at every step",
                   n=len(gaps), baseline=baseline), details, "good")
    if all(gap <= 1e-5 + 1.3e-6 * max(abs(v) for v in base) for gap in gaps.values()):
        return (tr("All {n} sharded runs followed {baseline}'s losses to within float32 rounding "
                   "(at most {gap:.1e})", n=len(gaps), baseline=baseline, gap=gaps[worst]),
                details, "good")
    return (tr("{name}'s loss differed from {baseline}'s by up to {gap:.1e}: more than float32 "
               "rounding", name=worst, baseline=baseline, gap=gaps[worst]), details, "bad")


def explained_gap(spec, world_size: int) -> int:
    """The most bytes of model state the formula (Ψ × bytes per parameter) can leave out on one
    rank: AdamW's ``step`` counters, 4 bytes per parameter tensor at most, and each unit's
    padding to a multiple of ``world_size``, at most N − 1 values of 16 bytes (weight, gradient,
    two moments)."""
    model = build_model(spec, meta=True)
    return 4 * len(list(model.parameters())) + 16 * (world_size - 1) * len(unit_parameters(model))


def state_verdict(rows: list[dict], explained: int) -> Verdict:
    """Each run's measured model state against the formula (``figures.memory_rows``' rows:
    ``state_gap`` in bytes), within what ``explained`` bytes can account for."""
    worst = max(rows, key=lambda r: abs(r["state_gap"]))
    details = "\n".join(tr("{label}: measured {state} MB, formula {formula} MB, gap {gap:+,} bytes",
                           label=r["label"], state=_mb(r["measured_state"]),
                           formula=_mb(r["formula_total"]), gap=round(r["state_gap"]))
                        for r in rows)
    if abs(worst["state_gap"]) <= explained:
        return (tr("Every run's measured model state matched the formula to within {gap:,} bytes, "
                   "no more than AdamW's step counters and the padding can add ({explained:,})",
                   gap=round(abs(worst["state_gap"])), explained=explained), details, "good")
    return (tr("{label}'s measured model state is {gap:+,} bytes off the formula, more than "
               "AdamW's step counters and the padding can add ({explained:,}): something is held "
               "twice or missing", label=worst["label"], gap=round(worst["state_gap"]),
               explained=explained), details, "bad")


def peak_verdict(rows: list[dict], block_bytes: int, root_bytes: int) -> Verdict:
    """How far fsdp's peak sat above zero3's, in gathered blocks (``block_bytes``: one block's
    padded flat vector; ``root_bytes``: the root's); each run's peak against ddp's in the
    details."""
    peak = {r["label"]: r["peak"] for r in rows}
    details = "\n".join([tr("{name}: peak not measured", name=name) if p is None or not
                         peak.get("ddp") else tr("{name}: peak {peak:.2f} MB = {share:.0%} of "
                                                 "ddp's", name=name, peak=p / MB,
                                                 share=p / peak["ddp"])
                         for name, p in peak.items()]
                        + [tr("one gathered block: {block:.2f} MB, the root: {root:.2f} MB",
                              block=block_bytes / MB, root=root_bytes / MB)])
    if peak.get("fsdp") is None or peak.get("zero3") is None:
        return tr("fsdp's or zero3's peak was not measured: nothing to compare."), details, "mixed"
    diff = peak["fsdp"] - peak["zero3"]
    if diff > 0:
        return (tr("fsdp's peak sat {diff:.2f} MB above zero3's: {blocks:.1f}× one gathered block "
                   "({block:.2f} MB)", diff=diff / MB, blocks=diff / block_bytes,
                   block=block_bytes / MB), details, "mixed")
    return (tr("fsdp's peak was not above zero3's here ({diff:+.2f} MB)", diff=diff / MB),
            details, "mixed")


def comm_lines(rows: list[dict], baseline: str = "ddp") -> list[str]:
    """One line per run: bytes sent per rank per step against ``baseline``'s, and how long
    compute waited for communication in the median step. A figure the run did not measure
    (CUDA leaves the wait of FSDP2's overlapped collectives unmeasured: None) reads "not
    measured", never a number."""
    def ms(seconds):
        return not_measured(seconds, ".1f", 1e-3, " ms")
    lines = []
    for r in rows:
        sent = tr("not measured") if r["wire_bytes"] is None else \
            tr("{mb:.2f} MB", mb=r["wire_bytes"] / MB)
        ratio = "" if r["vs_baseline"] is None else \
            tr(" = {ratio:.2f}x {baseline}", ratio=r["vs_baseline"], baseline=baseline)
        lines.append(tr("{label:>6}: sent per rank per step {sent}{ratio}; compute's wait: "
                        "{wait}; step {step}", label=r["label"], sent=sent, ratio=ratio,
                        wait=ms(r["comm_s"]), step=ms(r["step_time_s"])))
    return lines


def comm_verdict(rows: list[dict], baseline: str = "ddp") -> Verdict:
    """Bytes sent per rank and step against ``baseline``'s (``figures.comm_rows``' rows):
    whether zero3 sent more than stages 1 and 2, and by how much."""
    ratio = {r["label"]: r["vs_baseline"] for r in rows}
    details = "\n".join(comm_lines(rows, baseline))
    if any(ratio.get(k) is None for k in ("zero1", "zero2", "zero3")):
        return tr("Some run's bytes were not measured: nothing to compare."), details, "mixed"
    fmt = dict(r1=ratio["zero1"], r2=ratio["zero2"], r3=ratio["zero3"], baseline=baseline)
    if ratio["zero3"] > max(ratio["zero1"], ratio["zero2"]):
        return (tr("Per rank and step, zero1 and zero2 sent {r1:.2f}× and {r2:.2f}× {baseline}'s "
                   "bytes, zero3 {r3:.2f}×: its second all-gather", **fmt), details, "good")
    return (tr("Per rank and step, zero3 sent {r3:.2f}× {baseline}'s bytes, no more than zero1 "
               "({r1:.2f}×) and zero2 ({r2:.2f}×)", **fmt), details, "bad")


def bucket_verdict(buckets: dict, words: str, how_ranks_talk: str) -> Verdict:
    """What of DDP's bytes could overlap backward: all but its last bucket, which holds the
    gradients backward makes last (``buckets``: ``runs.ddp_buckets``, in bytes). ``words``
    (``runs.bucket_words``) and ``how_ranks_talk`` go in the details."""
    later = buckets["later"]
    details = words + "\n" + how_ranks_talk
    if len(later) == 1:
        return (tr("DDP put all of this model's gradients in one bucket: its all-reduce starts "
                   "only when backward is over, so it overlaps nothing, as zero1's"), details,
                "bad")
    return (tr("DDP's last bucket holds {share:.0%} of the bytes and starts only when backward is "
               "over: only the other {rest:.0%} can overlap backward",
               share=later[-1] / sum(later), rest=1 - later[-1] / sum(later)), details, "mixed")


def variants_verdict(plain: dict, keep: dict, bf16: dict) -> Verdict:
    """FSDP2's two variants against plain fsdp: each one's final loss, as a difference."""
    keep_diff = keep["final_loss"] - plain["final_loss"]
    bf16_diff = bf16["final_loss"] - plain["final_loss"]
    details = "\n".join(tr("{label}: final loss {loss:.4f}, {diff:+.1e} from fsdp's", label=label,
                           loss=s["final_loss"], diff=s["final_loss"] - plain["final_loss"])
                        for label, s in ((tr("fsdp keep weights"), keep), (tr("fsdp bf16"), bf16)))
    if keep_diff == 0:
        return (tr("Keeping the weights left plain fsdp's final loss exactly as it was; bf16 "
                   "moved it by {bf16:+.1e}", bf16=bf16_diff), details, "good")
    return (tr("Keeping the weights moved plain fsdp's final loss by {keep:+.1e}, bf16 by "
               "{bf16:+.1e}", keep=keep_diff, bf16=bf16_diff), details, "mixed")


def shard_table(summaries: list[dict], formulas: list[float]) -> Table:
    """The same zero3 run on several world sizes: rank 0's model state (measured and by the
    formula, ``formulas``) and activations, in MB."""
    return ([tr("ranks"), tr("model state, MB"), tr("formula, MB"), tr("activations, MB")],
            [[str(s["world_size"]),
              _mb(sum(s["mem_by_category"][c][0] for c in ("params", "grads", "optimizer"))),
              _mb(f), _mb(s["mem_by_category"]["activations"][0])]
             for s, f in zip(summaries, formulas)])


def fit_table(rows: list[dict]) -> Table:
    """Per strategy: the plan in MB, whether it fits, and what the capped run did."""
    return ([tr("run"), tr("plan, MB"), tr("plan"), tr("capped run")],
            [[r["strategy"], _mb(r["planned"]),
              tr("fits") if r["planned_fits"] else tr("does not fit"), outcome_words(r)]
             for r in rows])


def fit_verdict(rows: list[dict], capacity: float) -> Verdict:
    """The first stage to fit ``capacity`` bytes per rank, by the plan and by the capped runs."""
    planned, measured = first_fit(rows, "planned_fits"), first_fit(rows, "fits")
    if measured is None:
        return (tr("No stage fit {mb:.0f} MB per rank in the capped runs (the plan: {planned})",
                   mb=capacity / MB, planned=planned or tr("none")), "", "bad")
    if planned == measured:
        return (tr("{name} is the first stage to fit {mb:.0f} MB per rank, by the plan and by the "
                   "capped runs", name=measured, mb=capacity / MB), "", "good")
    return (tr("The plan said {planned} would be the first to fit {mb:.0f} MB per rank, the capped "
               "runs {measured}: the runs decide", planned=planned or tr("none"),
               measured=measured, mb=capacity / MB), "", "mixed")


# ---- one step on one clock (the runs' ``timeline`` spans, ``gpututor.measure.timeline``) -----

def _read_step(record: dict) -> dict | None:
    """One rank's step from its spans: each collective with the compute phase it ran in, the
    step's length (first phase's start to last phase's end), the collectives' total time, the
    wait the worker measured (``comm_s``, None if not measured) and, in backward, the most
    all-gathers that had started ahead of their units' reduce-scatters (:func:`_ahead`)."""
    spans = record["timeline"]
    compute = [s for s in spans if s["kind"] == "compute"]
    coll = [s for s in spans if s["kind"] == "collective"]
    if not compute or not coll:
        return None
    phase = lambda c: max((p for p in compute if p["start"] <= c["start"] + 1e-6),  # noqa: E731
                          key=lambda p: p["start"], default=compute[0])["name"]
    placed = [{**c, "phase": phase(c)} for c in coll]
    return {"rank": record["rank"], "spans": placed, "waited": record.get("comm_s"),
            "start": min(p["start"] for p in compute), "end": max(p["end"] for p in compute),
            "busy": sum(c["end"] - c["start"] for c in coll),
            "ahead": _ahead([c for c in placed if c["phase"] == "backward"]),
            "count": lambda name, where: sum(c["name"] == name and c["phase"] == where
                                             for c in placed)}


def _ahead(backward: list[dict]) -> int:
    """The most all-gathers, at any moment of backward, whose reduce-scatter had not started:
    the units whose weights were gathered at once (each unit's gradient is reduce-scattered
    once, when its backward is over)."""
    ahead = most = 0
    for c in sorted(backward, key=lambda c: c["start"]):
        ahead += (c["name"] == "all_gather") - (c["name"] == "reduce_scatter")
        most = max(most, ahead)
    return most


def _sums(o: dict) -> dict:
    """One rank's collective time by kind and phase, in ms: what the details print."""
    ms = lambda keep: sum(c["end"] - c["start"] for c in o["spans"] if keep(c)) * 1e3  # noqa: E731
    sums = {"forward": ms(lambda c: c["name"] == "all_gather" and c["phase"] == "forward"),
            "backward": ms(lambda c: c["name"] == "all_gather" and c["phase"] == "backward"),
            "scatters": ms(lambda c: c["name"] == "reduce_scatter" and c["phase"] == "backward")}
    return {**sums, "other": o["busy"] * 1e3 - sum(sums.values())}


def gather_verdict(records: list[dict], name: str = "zero3") -> Verdict:
    """The last step with a timeline of a sharded run (``name``): how many all-gathers it made
    in forward and in backward and how many reduce-scatters, and how much of the step they took;
    then whether their bars add up to the wait the worker counted (``comm_s``, the meter section
    6's wait comes from). Collectives that block, as zero3's, are counted whole as compute's
    wait, so this checks the spans against the meter: it does not measure overlap. Each bar also
    holds the time a rank waited there for a rank that arrived later; the headline reads the
    rank with less of it (less time in collectives). The details: each rank's totals by phase
    (the figure shows each collective)."""
    last = last_timed_step(records)
    if last is None:
        return tr("this run recorded no timeline (RunSpec(timeline=True))"), "", "mixed"
    step, ranks = last
    read = [_read_step(r) for r in ranks]
    if any(o is None for o in read):
        return tr("step {step} recorded no compute or no collective on some rank", step=step), \
            "", "mixed"
    lines = []
    for o in read:
        sums = _sums(o)
        lines.append(tr("rank {rank}: collectives {busy:.1f} ms of a {total:.1f} ms step "
                        "(all-gathers in forward {forward:.1f} ms, in backward {backward:.1f} ms, "
                        "reduce-scatters {scatters:.1f} ms); compute's wait counted: {waited}",
                        rank=o["rank"], busy=o["busy"] * 1e3, total=(o["end"] - o["start"]) * 1e3,
                        waited=not_measured(o["waited"], ".1f", 1e-3, " ms"), **sums)
                     + (tr("; other collectives {other:.1f} ms", other=sums["other"])
                        if sums["other"] > 0.05 else ""))
    details = "\n".join(lines)
    o = min(read, key=lambda o: o["busy"])
    said = dict(name=name, step=step, rank=o["rank"], busy=o["busy"] * 1e3,
                total=(o["end"] - o["start"]) * 1e3, share=o["busy"] / (o["end"] - o["start"]),
                forward=o["count"]("all_gather", "forward"),
                backward=o["count"]("all_gather", "backward"),
                scatters=o["count"]("reduce_scatter", "backward"))
    head = tr("In {name}'s step {step}, {forward} all-gathers in forward, then {backward} "
              "all-gathers and {scatters} reduce-scatters in backward took {busy:.1f} ms of the "
              "{total:.1f} ms step ({share:.0%}) on rank {rank} (each bar also holds the time a "
              "rank waited there for a rank that arrived later, and, where ranks share cores, for "
              "a core; this rank had less of it)", **said)
    if o["waited"] is None:
        return head + tr("; the wait the worker counted was not measured: the bars cannot be "
                         "checked against it"), details, "mixed"
    gap = o["busy"] - o["waited"]
    said = dict(name=name, waited=o["waited"] * 1e3, gap=abs(gap) * 1e3)
    if abs(gap) <= max(0.01 * o["busy"], 5e-5):
        return head + tr("; {name}'s collectives block, and each one's seconds are written both "
                         "to its bar and to compute's wait: the bars add up to the {waited:.1f} "
                         "ms the worker counted in this step (the meter section 6's wait comes "
                         "from) by construction, a check of the recording, not a measure of "
                         "overlap", **said), details, "mixed"
    if gap > 0:   # each collective's seconds go to both: any gap is a fault in the measuring
        return head + tr("; the bars hold {gap:.1f} ms more than the {waited:.1f} ms wait the "
                         "worker counted: with blocking collectives, whose seconds go to both, a "
                         "fault in the measuring", **said), details, "bad"
    return head + tr("; the worker counted {waited:.1f} ms of wait, {gap:.1f} ms more than the "
                     "bars hold: with blocking collectives, whose seconds go to both, a fault in "
                     "the measuring", **said), details, "bad"


def prefetch_verdict(plain: list[dict], prefetching: list[dict],
                     names: tuple[str, str] = ("zero3", "fsdp")) -> Verdict:
    """Whether the second run (``names[1]``, FSDP2) gathered further ahead in backward than the
    first (the from-scratch ZeRO-3): on each, the most all-gathers started ahead of their
    units' reduce-scatters at any moment of the last step's backward, the most over its ranks."""
    first, second = names
    ahead = {}
    for name, records in ((first, plain), (second, prefetching)):
        last = last_timed_step(records)
        read = [] if last is None else [_read_step(r) for r in last[1]]
        if not read or any(o is None for o in read):
            return (tr("{name}'s timeline holds no collectives (no timeline, or its collectives "
                       "were not metered): its gathers cannot be read here", name=name), "",
                    "mixed")
        ahead[name] = max(o["ahead"] for o in read)
    details = "\n".join(tr("{name}: up to {n} all-gathers ahead of their reduce-scatters in "
                           "backward", name=k, n=v) for k, v in ahead.items())
    said = dict(first=first, second=second, a=ahead[first], b=ahead[second],
                extra=ahead[second] - ahead[first])
    if ahead[second] > ahead[first]:
        return (tr("In backward, {second} had up to {b} units gathered at once (all-gathers "
                   "started whose reduce-scatter had not), {first} {a}: {second} had {extra} more "
                   "gathered ahead of the unit computing, its prefetch", **said), details, "good")
    return (tr("In backward, {second} had up to {b} units gathered at once (all-gathers started "
               "whose reduce-scatter had not), {first} {a}: {second} gathered no further ahead "
               "in this step", **said), details, "mixed")
