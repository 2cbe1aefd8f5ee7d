"""Lesson 02's results, each told first in one sentence chosen from the run's numbers.

Every ``*_verdict`` returns ``(headline, details, tone)`` for ``gpututor.i18n.show_verdict``:
one bold sentence, true for the outcome that chose it, with the numbers behind it one click
away. Every ``*_table`` returns ``(columns, rows)`` for ``show_table``. A figure a run left
unmeasured (``None``) reads "not measured", never 0. The tests feed numbers to every branch
(``tests/lessons/data_parallel/test_data_parallel_verdicts.py``); nothing here launches a run.
"""
from __future__ import annotations

from ...catalog import get_link
from ...i18n import not_measured, tr
from ...parallel.data_parallel.ddp import WAIT_SPAN
from ..common.timelines import last_timed_step
from .buckets import bucket_steps, describe, late_share
from .machine import _is_cuda

Verdict = tuple[str, str, str]
Table = tuple[list[str], list[list[str]]]


def _ms(seconds) -> str:
    return not_measured(seconds, ".1f", 1e-3)


def _share(part, whole) -> str:
    return tr("not measured") if part is None or not whole else f"{part / whole:.0%}"


def run_table(runs: dict[str, dict]) -> Table:
    """Section 1's runs: strategy, ranks, final loss, tokens/s."""
    return ([tr("run"), tr("ranks"), tr("final loss"), tr("tokens/s")],
            [[name, str(s["world_size"]), f"{s['final_loss']:.5f}",
              tr("not measured") if s["tokens_per_s"] is None else f"{s['tokens_per_s']:,.0f}"]
             for name, s in runs.items()])


def same_training_verdict(worst: dict[str, float]) -> Verdict:
    """After the cell has asserted equal losses and weights: the largest weight difference of
    each data-parallel run from one process (``worst``: strategy -> difference)."""
    details = "\n".join(tr("{strategy}: largest weight difference {worst:.1e}", strategy=k,
                           worst=v) for k, v in worst.items())
    return (tr("All {n} data-parallel runs trained like one process: the same losses, and "
               "weights at most {worst:.1e} apart", n=len(worst), worst=max(worst.values())),
            details, "good")


def bucket_table(records: list[dict]) -> Table:
    """DDP's buckets on rank 0, first and last step, in launch order: MB, and ms launched
    before backward's last gradient."""
    steps = bucket_steps(records)
    chosen = dict.fromkeys((min(steps), max(steps))) if steps else {}
    return ([tr("step"), tr("bucket"), "MB", tr("launched before the last gradient, ms")],
            [[str(step), str(i + 1), f"{b['bytes'] / 1e6:.2f}",
              f"{b['before_last_grad_s'] * 1e3:.1f}"]
             for step in chosen for i, b in enumerate(steps[step])])


def bucket_verdict(records: list[dict]) -> Verdict:
    """How much of DDP's last step could overlap backward: the share of its bytes launched
    before backward's last gradient existed."""
    steps = bucket_steps(records)
    if not steps:
        return tr("this run recorded no DDP buckets (one rank, or not a DDP run)"), "", "mixed"
    details = "\n".join(describe(records))
    late = late_share(steps[max(steps)])
    if late >= 1.0:
        return (tr("In DDP's last step every bucket was launched after backward's last "
                   "gradient: none of its all-reduce could overlap backward"), details, "bad")
    if late <= 0.0:
        return (tr("In DDP's last step every bucket was launched before backward's last "
                   "gradient: all of its all-reduce could overlap backward"), details, "good")
    return (tr("In DDP's last step {early:.0%} of the bytes were launched before backward's last "
               "gradient and could overlap it; {late:.0%} could not", early=1 - late, late=late),
            details, "mixed")


def _rank_overlap(spans: list[dict]) -> dict | None:
    """One rank's step: when backward computed (until its last gradient), how much of its
    all-reduces ran meanwhile, their total, and how long compute then waited."""
    backward = [s for s in spans if s["kind"] == "compute" and s["name"] == "backward"]
    reduces = [s for s in spans if s["kind"] == "collective"]
    if not backward or not reduces:
        return None
    start, end = min(b["start"] for b in backward), max(b["end"] for b in backward)
    return {"start": start, "end": end, "reduces": reduces,
            "under": sum(max(0.0, min(c["end"], end) - max(c["start"], start)) for c in reduces),
            "total": sum(c["end"] - c["start"] for c in reduces),
            "waited": sum(s["end"] - s["start"] for s in spans if s["name"] == WAIT_SPAN)}


def timeline_verdict(records: list[dict]) -> Verdict:
    """The last step with a timeline, every rank on one clock (ms from the first span of any
    rank, as the figure). An all-reduce ends only when every rank has joined it, so a rank that
    reaches a bucket first shows a longer bar and a longer wait: the headline reads the rank
    whose backward ended last (its bars are the nearest to the link's own time); the details
    give every rank."""
    last = last_timed_step(records)
    if last is None:
        return tr("this run recorded no timeline (RunSpec(timeline=True))"), "", "mixed"
    step, timed = last
    ranks = {r["rank"]: _rank_overlap(r["timeline"]) for r in timed}
    if not ranks or any(v is None for v in ranks.values()):
        return tr("step {step} recorded no backward or no collective on some rank", step=step), \
            "", "mixed"
    origin = min(s["start"] for r in timed for s in r["timeline"])
    ms = lambda t: f"{(t - origin) * 1e3:.1f}"   # noqa: E731
    details = []
    for rank, o in sorted(ranks.items()):
        details.append(tr("rank {rank}: backward computing {a} to {b} ms; {under:.1f} of its "
                          "all-reduces' {total:.1f} ms under it, then {waited:.1f} ms waited",
                          rank=rank, a=ms(o["start"]), b=ms(o["end"]), under=o["under"] * 1e3,
                          total=o["total"] * 1e3, waited=o["waited"] * 1e3))
        details += [tr("  {name} of {mb:.2f} MB: {a} to {b} ms", name=c["name"],
                       mb=(c["bytes"] or 0) / 1e6, a=ms(c["start"]), b=ms(c["end"]))
                    for c in o["reduces"]]
    details.append(tr("ms from the start of the figure; an all-reduce ends when every rank has "
                      "joined it, so a rank that arrives first waits for the others"))
    late = max(ranks, key=lambda r: ranks[r]["end"])
    o = ranks[late]
    return (tr("In step {step}, on rank {rank}, whose backward ended last: {under:.1f} ms of its "
               "all-reduces' {total:.1f} ms ran while backward still computed; then compute "
               "waited {waited:.1f} ms for the rest", step=step, rank=late,
               under=o["under"] * 1e3, total=o["total"] * 1e3, waited=o["waited"] * 1e3),
            "\n".join(details), "good" if o["under"] >= o["waited"] else "mixed")


def overlap_verdict(runs: dict[str, dict], how_ranks_talk: str) -> Verdict:
    """DDP's median step against the naive version's, on this machine's link; the details give
    each run's wait for communication and what carried the messages (``how_ranks_talk``)."""
    naive, ddp = runs["dp-naive"], runs["ddp"]
    ratio = ddp["step_time_s"] / naive["step_time_s"]
    details = "\n".join([tr("{name}: waiting {wait} ms of a {step} ms step ({share})", name=name,
                            wait=_ms(runs[name]["comm_s"]), step=_ms(runs[name]["step_time_s"]),
                            share=_share(runs[name]["comm_s"], runs[name]["step_time_s"]))
                         for name in ("dp-naive", "dp-bucketed", "ddp")] + [how_ranks_talk])
    if ratio < 0.97:
        return (tr("DDP's step took {ratio:.2f}× the naive one's: {saved:.0f} ms a step less",
                   ratio=ratio,
                   saved=(naive["step_time_s"] - ddp["step_time_s"]) * 1e3), details, "good")
    if ratio <= 1.03:
        return (tr("DDP's step took about as long as the naive one's ({ratio:.2f}×): on this "
                   "machine's link the buckets saved nothing measurable; section 4 makes the "
                   "link slower", ratio=ratio), details, "mixed")
    return (tr("DDP's step took {ratio:.2f}× the naive one's: slower on this machine's link; "
               "section 4 makes the link slower", ratio=ratio), details, "bad")


def latency_verdict(rows: list[dict]) -> Verdict:
    """From the smallest and the largest all-reduce of a benchmark (``run_comm_benchmark``'s
    rows): was the small one mostly fixed cost (latency)? In the α-β model the large one took at
    least its bytes' time, so the small one's bytes took at most (small/large bytes) of the
    large one's time: that share of the small one's time, at most, was bandwidth."""
    ends = sorted((r for r in rows if r["op"] == "all_reduce" and "time_s" in r),
                  key=lambda r: r["bytes"])
    small, large = ends[0], ends[-1]
    more_bytes, more_time = large["bytes"] / small["bytes"], large["time_s"] / small["time_s"]
    share = min(1.0, more_time / more_bytes)
    facts = dict(small_kb=small["bytes"] / 1e3, small_us=small["time_s"] * 1e6,
                 large_mb=large["bytes"] / 1e6, large_us=large["time_s"] * 1e6,
                 more_bytes=more_bytes, more_time=more_time, share=share)
    details = tr("all-reduce here: {small_kb:.0f} KB took {small_us:.0f} us, {large_mb:.1f} MB "
                 "{large_us:.0f} us: {more_bytes:,.0f}x the bytes in {more_time:,.1f}x the time, "
                 "so at most {share:.1%} of the small one's time was its bytes", **facts)
    if share < 0.5:
        return (tr("An all-reduce of {small_kb:.0f} KB took {small_us:.0f} us here: mostly fixed "
                   "cost (latency), at most {share:.1%} of it was its bytes", **facts),
                details, "mixed")
    return (tr("An all-reduce of {small_kb:.0f} KB took {small_us:.0f} us here: up to {share:.0%} "
               "of it may have been its bytes, so these two sizes cannot tell whether it was "
               "mostly fixed cost", **facts), details, "mixed")


def bandwidth_table(comm: dict) -> Table:
    """Per collective, its largest message: MB, algorithm and bus bandwidth in GB/s."""
    out = []
    for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
        rows = [r for r in comm["rows"] if r["op"] == op and "time_s" in r]
        if rows:
            top = max(rows, key=lambda r: r["bytes"])
            out.append([op, f"{top['bytes'] / 1e6:.1f}", f"{top['algbw'] / 1e9:.3f}",
                        f"{top['busbw'] / 1e9:.3f}"])
    return ([tr("collective ({n} ranks, {backend})", n=comm["world_size"],
                backend=comm["backend"]), "MB", tr("algorithm bandwidth, GB/s"),
             tr("bus bandwidth, GB/s")], out)


def link_table(links: dict[str, str], emulated: dict) -> Table:
    """Each link (shown name -> catalogue name): its datasheet bandwidth and latency, and the
    same link as emulated here (``scaled_link``)."""
    return ([tr("link"), "GB/s", tr("latency, us"), tr("emulated here, MB/s"),
             tr("emulated latency, ms")],
            [[f"{name} ({link})", f"{get_link(link).bandwidth / 1e9:g}",
              f"{get_link(link).latency * 1e6:.0f}", f"{emulated[name].bandwidth / 1e6:.3g}",
              f"{emulated[name].latency * 1e3:.3g}"] for name, link in links.items()])


def link_verdict(link_runs: dict[str, dict], solo: dict) -> Verdict:
    """Section 4's runs on emulated links against one rank (``solo``): DDP on the PCIe-like
    and on the NVLink-like link, and the best of the fixes tried on the PCIe-like one (the
    runs named "DDP + ...")."""
    speedups = {k: s["tokens_per_s"] / solo["tokens_per_s"] for k, s in link_runs.items()}
    pcie, nvlink = speedups["DDP, PCIe-like"], speedups["DDP, NVLink-like"]
    fixes = {k: v for k, v in speedups.items() if k.startswith("DDP +")}
    details = "\n".join(tr("{name}: {speedup:.2f}x one rank, waiting {waiting} of each step",
                           name=tr(k), speedup=v, waiting=_share(link_runs[k]["comm_s"],
                                                                link_runs[k]["step_time_s"]))
                        for k, v in speedups.items())
    links = (tr("DDP ran {pcie:.2f}× one rank on the PCIe-like link and {nvlink:.2f}× on the "
                "NVLink-like one", pcie=pcie, nvlink=nvlink) if nvlink > pcie else
             tr("DDP was no faster on the NVLink-like link ({nvlink:.2f}×) than on the "
                "PCIe-like one ({pcie:.2f}×)", pcie=pcie, nvlink=nvlink))
    best = max(fixes, key=fixes.get) if fixes else None
    if best is not None and fixes[best] > pcie:
        return (tr("{links}; the best of the fixes, {fix}, reached {speedup:.2f}×", links=links,
                   fix=tr(best), speedup=fixes[best]), details,
                "good" if nvlink > pcie else "mixed")
    return (tr("{links}; no fix beat plain DDP on the PCIe-like link here", links=links),
            details, "mixed")


def powersgd_verdict(plain: dict, compressed: dict, start: int) -> Verdict:
    """PowerSGD against plain DDP on the same batches: bytes per steady step, and how far the
    losses moved apart from the first step whose loss a compressed update can change
    (``start + 1``: steps 0 to ``start`` all-reduce whole gradients)."""
    ratio = plain["comm_bytes_per_step"] / compressed["comm_bytes_per_step"]
    first = start + 1
    same = max(abs(a - b) for a, b in zip(compressed["losses"][:first], plain["losses"][:first]))
    later = [abs(a - b) for a, b in zip(compressed["losses"][first:], plain["losses"][first:])]
    details = "\n".join([
        tr("PowerSGD rank 1 all-reduced {mb:.3f} MB per steady step, plain DDP {plain_mb:.2f} MB",
           mb=compressed["comm_bytes_per_step"] / 1e6, plain_mb=plain["comm_bytes_per_step"] / 1e6),
        tr("start_powerSGD_iter = {start}: the losses of steps 0 to {last_plain} come from plain "
           "updates and differ by at most {same:.1e}", start=start, last_plain=first - 1,
           same=same)])
    if not later:
        return (tr("PowerSGD rank 1 all-reduced {ratio:.0f}× fewer bytes than plain DDP; these "
                   "runs ended before step {first}, the first whose loss it can change",
                   ratio=ratio, first=first), details, "mixed")
    gap = max(later)
    details += "\n" + tr("final losses {loss:.4f} (PowerSGD) and {plain_loss:.4f} (plain DDP)",
                         loss=compressed["final_loss"], plain_loss=plain["final_loss"])
    return (tr("PowerSGD rank 1 all-reduced {ratio:.0f}× fewer bytes than plain DDP, and from "
               "step {first} on its loss differed from plain DDP's by at most {gap:.4f}",
               ratio=ratio, first=first, gap=gap), details,
            "good" if gap <= 0.01 * abs(plain["final_loss"]) else "mixed")


def weak_verdict(weak: dict, run: dict) -> Verdict:
    """Weak scaling (``ui.series.weak_scaling``'s numbers: ``world_size``, ``throughput_ratio``,
    ``efficiency``), with the N-rank ``run``'s wait for communication in the details."""
    n, ratio, efficiency = weak["world_size"], weak["throughput_ratio"], weak["efficiency"]
    if ratio is None:
        return tr("Weak scaling: one of the two runs has no measured throughput."), "", "mixed"
    details = tr("waiting for communication: {wait} ms of each {step} ms step",
                 wait=_ms(run["comm_s"]), step=_ms(run["step_time_s"]))
    if efficiency >= 0.95:
        return (tr("With {n}× the batch on {n} ranks, they processed {ratio:.2f}× one rank's "
                   "tokens/s: every rank kept its one-rank speed", n=n, ratio=ratio),
                details, "good")
    if ratio > 1.1:
        return (tr("With {n}× the batch on {n} ranks, they processed {ratio:.2f}× one rank's "
                   "tokens/s, {efficiency:.0%} of the ideal {n}×", n=n, ratio=ratio,
                   efficiency=efficiency), details, "good" if efficiency >= 0.75 else "mixed")
    return (tr("With {n}× the batch on {n} ranks, they processed only {ratio:.2f}× one rank's "
               "tokens/s: about one rank's speed or less, against the ideal {n}×", n=n,
               ratio=ratio), details, "bad")


def strong_verdict(rows: list[dict], expected: dict, device: str, notes=()) -> Verdict:
    """Strong scaling (``ui.series.speedup_rows``' rows: ``world_size``, ``speedup``) on 2
    ranks here, beside what the planner expects on GPUs of the catalogue (``expected``:
    :func:`~.expected.planner_speedup`). ``device``: the runs' device; ``notes``: more lines
    for the details."""
    two = next((r for r in rows if r["world_size"] == 2), None)
    gpus = tr("{n}× {gpu} with {link}", n=expected["world_size"], gpu=expected["gpu"],
              link=expected["link_name"])
    plan = tr("the planner expects {speedup:.2f}× on {gpus} (not measured)",
              speedup=expected["speedup"], gpus=gpus)
    details = list(notes) + [
        tr("planner: one step {one:.2f} ms on 1 GPU, {many:.2f} ms on {n}, all-reduce "
           "{comm:.3f} ms of which {exposed:.3f} ms not hidden by backward; assumed: {hfu:.0%} "
           "of the GPU's {precision} peak, {efficiency:.0%} of the link's bandwidth",
           one=expected["step_one_s"] * 1e3, many=expected["step_many_s"] * 1e3,
           n=expected["world_size"], comm=expected["comm_s"] * 1e3,
           exposed=expected["exposed_s"] * 1e3, hfu=expected["hfu"],
           precision=expected["precision"], efficiency=expected["comm_efficiency"]),
        tr("The planner leaves out each kernel's fixed cost, which weighs most on a model this "
           "small.")]
    if not _is_cuda(device):
        details.append(tr("Here each rank is a one-thread CPU process: the ranks share this "
                          "machine's caches and memory bandwidth and talk over loopback TCP; on "
                          "GPUs each rank computes on a device of its own."))
    details = "\n".join(details)
    speedup = None if two is None else two["speedup"]
    if speedup is None:
        return tr("No speedup on 2 ranks was measured here; {plan}", plan=plan), details, "mixed"
    if speedup >= 2:
        return (tr("DDP on 2 ranks ran {speedup:.2f}× as fast as one here, at or above the ideal "
                   "2×; {plan}", speedup=speedup, plan=plan), details, "good")
    if speedup >= 1.8:
        return (tr("DDP on 2 ranks ran {speedup:.2f}× as fast as one here, near the ideal 2×; "
                   "{plan}", speedup=speedup, plan=plan), details, "good")
    if speedup > 1.1:
        return (tr("DDP on 2 ranks ran {speedup:.2f}× as fast as one here, {share:.0%} of the "
                   "ideal 2×; {plan}", speedup=speedup, share=speedup / 2, plan=plan),
                details, "mixed")
    if speedup >= 0.9:
        return (tr("DDP on 2 ranks was about as fast as one here ({speedup:.2f}×); {plan}",
                   speedup=speedup, plan=plan), details, "bad")
    return (tr("DDP on 2 ranks was slower than one here ({speedup:.2f}×); {plan}",
               speedup=speedup, plan=plan), details, "bad")


def _state(summary: dict) -> float:
    return sum(summary["mem_by_category"][c][0] for c in ("params", "grads", "optimizer"))


def memory_table(runs: dict[str, dict], names=("single", "ddp")) -> Table:
    """What rank 0 of each run held of the model state, in MB."""
    return ([tr("run"), tr("params, MB"), tr("grads, MB"), tr("optimizer, MB")],
            [[name] + [f"{runs[name]['mem_by_category'][c][0] / 1e6:.2f}"
                       for c in ("params", "grads", "optimizer")] for name in names])


def replica_verdict(single: dict, ddp: dict) -> Verdict:
    """Whether a data-parallel rank held as much model state as one process (to 1 %)."""
    ratio = _state(ddp) / _state(single)
    if abs(ratio - 1) <= 0.01:
        return (tr("Each of DDP's {n} ranks held {mb:.2f} MB of model state, as much as one "
                   "process: a whole copy", n=ddp["world_size"], mb=_state(ddp) / 1e6),
                "", "mixed")
    return (tr("Each of DDP's {n} ranks held {ratio:.2f}× the model state of one process",
               n=ddp["world_size"], ratio=ratio), "", "mixed")
