"""The contention ceiling: what two ranks on one machine could reach if they never talked.

Two CPU ranks share the cores, the caches and the memory bandwidth; that costs throughput even
without communication. :func:`independent_pair` measures it: two independent 1-rank runs, each
with half the global batch (a data-parallel rank's share), launched at the same moment on the
same cores (on GPUs: each on one of the two GPUs DDP's ranks use, sharing the host), behind a
barrier and timed only while both train (pair.py). Their summed tokens/s is the ceiling a 2-rank
data-parallel run can reach here.

:func:`without_view` measures DDP, one rank and the pair side by side in one cell, none of them
with a live view open (a view in the browser shares the cores too), and :func:`explain_gap` says
where DDP's extra time per step went from what was measured: the time the ranks waited for
communication, and what is left, which is not split further here.
"""
from __future__ import annotations

import statistics

from ...hardware import usable_cpu_cores
from ...i18n import tr
from ...measure.matmul import measure_matmul_flops
from ...runtime.launcher import launch
from .pair import run_pair, while_both_trained


def independent_pair(spec) -> dict:
    """Run two 1-rank copies of ``spec`` (batch halved) at once, behind one barrier (pair.py);
    return their summaries, each timed over the steady steps that ran while both trained, and
    the summed tokens/s (None if either measured none)."""
    # on the device DDP's two ranks use: on GPUs, each copy on its own one of DDP's two GPUs
    # (both on the first GPU, they would share it, and DDP could beat its "ceiling")
    device = spec.resolved_device()
    half = spec.replace(strategy="single", world_size=1, batch_size=spec.batch_size // 2,
                        mesh=None, options=(), device=device)
    summaries = while_both_trained(run_pair(
        [half.replace(seed=spec.seed + k, first_gpu=spec.first_gpu + (k if device == "cuda" else 0))
         for k in range(2)], launch))
    speeds = [s["tokens_per_s"] for s in summaries]
    return {"summaries": summaries,
            "tokens_per_s": sum(speeds) if all(v is not None for v in speeds) else None}


def efficiency_against_pair(ddp_summary: dict, pair: dict) -> float | None:
    """DDP's tokens/s over the two independent runs' sum (1.0: communication cost nothing)."""
    if ddp_summary.get("tokens_per_s") is None or pair["tokens_per_s"] is None:
        return None
    return ddp_summary["tokens_per_s"] / pair["tokens_per_s"]


def without_view(spec) -> dict:
    """``spec`` (data parallel), one rank with the same global batch, and :func:`independent_pair`
    (half the batch each, seeds ``seed`` and ``seed + 1``), run one after the other with
    ``launch().wait()``: the same steps, and no live view for any of them. Drift between the
    runs counts as noise."""
    one = spec.replace(strategy="single", world_size=1, mesh=None, options=())
    ddp = launch(spec).wait()
    solo = launch(one).wait()
    return {"ddp": ddp, "one": solo, "pair": independent_pair(spec)}


def without_view_lines(quiet: dict, panel_speedup: float | None) -> str:
    """What :func:`without_view` measured, in words: the speedup without a live view beside the
    one the panels measured (``panel_speedup``), and DDP's share of the independent pair's
    ceiling; "not measured" where a run has no steady step."""
    ddp, one, pair = (quiet["ddp"]["tokens_per_s"], quiet["one"]["tokens_per_s"],
                      quiet["pair"]["tokens_per_s"])
    if ddp is None or one is None or pair is None:
        return tr("A run without a live view measured no steady tokens/s: nothing to compare.")
    panels = tr("not measured") if panel_speedup is None else f"{panel_speedup:.2f}×"
    share = efficiency_against_pair(quiet["ddp"], quiet["pair"])
    lines = [tr("without a live view: DDP on 2 ranks {ddp:,.0f} tokens/s, one rank {one:,.0f} "
                "tokens/s, speedup {speedup:.2f}× (the panels above, each with its live view: "
                "{panels})", ddp=ddp, one=one, speedup=ddp / one, panels=panels),
             tr("two independent runs of {sequences} sequences, started together behind a "
                "barrier: {tokens_per_s:,.0f} tokens/s together, over the steady steps that "
                "ran while both trained ({first} and {second})",
                sequences=quiet["pair"]["summaries"][0]["batch_size"], tokens_per_s=pair,
                first=quiet["pair"]["summaries"][0]["steps_together"],
                second=quiet["pair"]["summaries"][1]["steps_together"])]
    if share > 1:
        lines.append(tr("DDP on 2 ranks: {tokens_per_s:,.0f} tokens/s = {share:.2f} of that "
                        "ceiling (above 1.0: run-to-run noise on a shared machine)",
                        tokens_per_s=ddp, share=share))
    else:
        lines.append(tr("DDP on 2 ranks: {tokens_per_s:,.0f} tokens/s = {share:.2f} of that "
                        "ceiling", tokens_per_s=ddp, share=share))
    return "\n".join(lines)


def view_gap_line(quiet: dict, panel_speedup: float | None, view_cost: dict | None) -> str:
    """The panels' speedup against the one :func:`without_view` measured, set beside what the
    DDP panel's live view was measured to use during its run (``RunPanel.view_cost``: its
    kernel thread's CPU and the browser's drawing time; the DDP run's ranks, one thread each).
    The words are chosen from the numbers: a view that took a share of the ranks' CPU time can
    explain a lower speedup up to about that share, and a speedup that is not lower says nothing
    against the view. (Why a browser's report can be missing: the kernel handles messages from
    the front end in order, so under Run All they wait behind the queued cells; ipywidgets' docs,
    "Asynchronous Widgets".)"""
    ddp, one = quiet["ddp"]["tokens_per_s"], quiet["one"]["tokens_per_s"]
    if panel_speedup is None or ddp is None or one is None or not view_cost \
            or not view_cost.get("wall_s"):
        return tr("The two speedups cannot be compared: one of them, or the view's cost, was not "
                  "measured.")
    without = ddp / one
    diff = panel_speedup / without - 1
    browser = view_cost.get("browser_draw_s")
    used = view_cost["kernel_cpu_s"] + (browser or 0.0)
    world_size = quiet["ddp"]["world_size"]
    on_cpu = quiet["ddp"].get("device", "cpu").split(":")[0] == "cpu"   # "cuda:0" too
    # CPU ranks run one thread each, on a core each where there are enough (else they share the
    # usable ones); GPU ranks' host threads share this machine's usable cores
    usable = usable_cpu_cores()
    cores = min(world_size, usable) if on_cpu else usable
    share = used / (view_cost["wall_s"] * cores)
    of_cores = (tr("of {ranks} cores (one per rank)", ranks=world_size)
                if on_cpu and cores == world_size else
                tr("of this machine's {cores} usable cores", cores=cores))
    spare = usable - world_size if on_cpu else 0   # cores the view's thread can run on alone
    parts = [tr("The panels' speedup is {pct:.0f} % lower than the one without a view.",
                pct=-100 * diff) if diff < -0.005 else
             tr("The panels' speedup is {pct:.0f} % higher than the one without a view.",
                pct=100 * diff) if diff > 0.005 else
             tr("The panels' speedup is the same as the one without a view, to 0.5 %."),
             tr("During its run the DDP panel's view used {kernel:.2f} CPU-s in the kernel and "
                "{browser:.2f} s of drawing in the browser: {share:.1%} {of_cores} over the "
                "run's wall time (the browser's layout and messages are not counted).",
                kernel=view_cost["kernel_cpu_s"], browser=browser, share=share, of_cores=of_cores)
             if browser is not None else
             tr("During its run the DDP panel's view used {kernel:.2f} CPU-s in the kernel, "
                "{share:.1%} {of_cores} over the run's wall time. The browser's drawing "
                "time was not "
                "reported (nothing has drawn the view, or, under Run All, the browser's report "
                "waits until the queued cells have run), and its layout and messages are not "
                "counted.", kernel=view_cost["kernel_cpu_s"], share=share, of_cores=of_cores)]
    if not on_cpu:
        parts.append(tr("These ranks computed on GPUs: the view's CPU time competes with their "
                        "host-side work only, not with the GPUs' compute."))
    elif diff >= -0.005:
        parts.append(tr("It is not lower: nothing here says the view slowed DDP down."))
    elif -diff <= share and spare > 0:
        parts.append(tr("The view's measured share is as large as the difference, but this "
                        "process may use {usable} cores for {ranks} ranks: the view's thread can "
                        "run on a spare one, so it need not have taken that time from the ranks.",
                        usable=usable, ranks=world_size))
    elif -diff <= share:
        parts.append(tr("The view's measured share is as large as the difference: it can "
                        "account for all of it."))
    else:
        parts.append(tr("The difference is larger than the view's measured share. The rest is "
                        "in something not measured here: the browser's work that is not counted, "
                        "or the variation from one run to the next on a shared machine."))
    parts.append(tr("Run this cell again for a second speedup without any view, and compare."))
    return " ".join(parts)


def half_batch_line(quiet: dict) -> str:
    """One rank's median steady step with the whole batch against an independent run's (half the
    batch, run beside its twin: the mean of the pair's two medians), in words chosen from the
    ratio: near 2 or above, halving the batch halved the step, and communication and sharing
    decide the rest; well below 2, costs that do not shrink with the batch (launching each
    operation, Python; lesson 01c) or sharing cap the speedup whatever communication costs."""
    whole = quiet["one"].get("step_time_s")
    halves = [s.get("step_time_s") for s in quiet["pair"]["summaries"]]
    if whole is None or None in halves:
        return tr("Half-batch step against whole-batch step: not measured (no steady step).")
    half = statistics.fmean(halves)
    values = dict(whole=whole * 1e3, half=half * 1e3, ratio=whole / half)
    if values["ratio"] > 2.1:
        return tr("one rank's step with the whole batch took {whole:.0f} ms, an independent run's "
                  "with half of it {half:.0f} ms: halving the batch made a step {ratio:.2f}× "
                  "shorter, more than 2×, so a half batch ran faster per token here", **values)
    if values["ratio"] >= 1.8:
        return tr("one rank's step with the whole batch took {whole:.0f} ms, an independent run's "
                  "with half of it {half:.0f} ms: halving the batch made a step {ratio:.2f}× "
                  "shorter, close to 2×, so what is left to decide the speedup is communication "
                  "(the next line)", **values)
    return tr("one rank's step with the whole batch took {whole:.0f} ms, an independent run's "
              "with half of it {half:.0f} ms: halving the batch made a step only {ratio:.2f}× "
              "shorter, so costs that do not shrink with the batch (launching each operation, "
              "Python; lesson 01c) or sharing the machine cap the speedup well below 2× here, "
              "whatever communication costs", **values)


def gap_per_step(ddp_summary: dict, pair: dict) -> dict | None:
    """DDP's step against the independent runs', like for like (medians over steady steps, in
    seconds): DDP's slowest-rank step, a DDP rank's compute and its wait at the all-reduce (means
    over ranks), the independent runs' step (the mean of their two medians: they do not
    communicate, so all of it is compute) and how far those two differ from each other."""
    pair_steps = [s["step_time_s"] for s in pair["summaries"]]
    if ddp_summary.get("step_time_s") is None or None in pair_steps:
        return None
    independent = statistics.fmean(pair_steps)
    compute, comm = ddp_summary.get("compute_s"), ddp_summary.get("comm_s")
    return {"ddp_step_s": ddp_summary["step_time_s"], "ddp_compute_s": compute,
            "ddp_comm_s": comm, "independent_step_s": independent,
            "independent_spread_s": max(pair_steps) - min(pair_steps),
            "extra_compute_s": None if compute is None else compute - independent}


def explain_gap(ddp_summary: dict, pair: dict) -> str:
    """Where DDP's time per step went compared with the independent runs, in words chosen from
    the measured numbers."""
    g = gap_per_step(ddp_summary, pair)
    if g is None:
        return tr("No steady step times were measured, so the steps cannot be compared.")
    ms = {k: (None if v is None else v * 1e3) for k, v in g.items()}
    if g["ddp_comm_s"] is None or g["ddp_compute_s"] is None:
        return tr("Median steady step: DDP {ddp:.0f} ms (its slowest rank), the independent runs "
                  "{independent:.0f} ms on average. This strategy's communication time is not "
                  "measured, so the step is not split.", ddp=ms["ddp_step_s"],
                  independent=ms["independent_step_s"])
    head = tr(
        "Median steady step: DDP {ddp:.0f} ms (its slowest rank); a DDP rank, on average, "
        "computed {compute:.0f} ms and waited {comm:.0f} ms at the all-reduce (that wait includes "
        "waiting for the other rank to get there). The independent runs: {independent:.0f} ms per "
        "step on average, all of it compute; they differed from each other by {spread:.0f} ms.",
        ddp=ms["ddp_step_s"], compute=ms["ddp_compute_s"], comm=ms["ddp_comm_s"],
        independent=ms["independent_step_s"], spread=ms["independent_spread_s"])
    extra, wait, spread = g["extra_compute_s"], g["ddp_comm_s"], g["independent_spread_s"]
    compute_words = (tr("a DDP rank computed {ms:.0f} ms more per step than an independent run",
                        ms=ms["extra_compute_s"]) if extra >= 0 else
                     tr("a DDP rank computed {ms:.0f} ms less per step than an independent run",
                        ms=-ms["extra_compute_s"]))
    if max(extra, wait) <= spread:
        return head + " " + tr(
            "Both differences, {compute} and the wait of {comm:.0f} ms, are within how much the "
            "two independent runs differed: here they cannot be told apart from run-to-run "
            "variation.", compute=compute_words, comm=ms["ddp_comm_s"])
    if wait >= extra:
        return head + " " + tr(
            "Most of DDP's extra time per step was the wait at the all-reduce ({comm:.0f} ms; "
            "{compute}).", comm=ms["ddp_comm_s"], compute=compute_words)
    return head + " " + tr(
        "Most of DDP's extra time per step was compute beyond the independent runs' ({extra:+.0f} "
        "ms, against {comm:.0f} ms of waiting) for the same work: DDP's own work during backward "
        "counts there (copying gradients into buckets; on CPU ranks the overlapped all-reduce "
        "also runs on the same cores), not measured separately here.",
        extra=ms["extra_compute_s"], comm=ms["ddp_comm_s"])


def matmul_rate_line(spec, world_size: int = 2) -> str:
    """Whether one rank's smaller matrix products ran at a lower rate here: the FLOP/s of
    ``spec``'s linear-layer matmuls at the whole batch's height against a data-parallel rank's
    (the batch split over ``world_size``), both measured now on the run's device (one CPU thread, or a GPU), best of 3 rounds
    (:func:`gpututor.measure.matmul.measure_matmul_flops`). The code picks the words."""
    one = spec.replace(strategy="single", world_size=1, mesh=None, options=())
    whole = measure_matmul_flops(one, 1)
    part = measure_matmul_flops(one, world_size)
    ratio = part / whole
    micro = one.batch_size // one.grad_accum          # the rows of one micro-batch's matmuls
    values = dict(whole=whole / 1e9, part=part / 1e9, rows=micro * one.seq_len,
                  part_rows=micro // world_size * one.seq_len, ratio=ratio)
    if ratio < 0.95:
        return tr("matmuls {part_rows} rows tall (a rank's share) ran at {part:.1f} GFLOP/s, "
                  "{rows} rows tall (one rank's whole batch) at {whole:.1f}: the smaller pieces "
                  "ran at {ratio:.0%} of the rate, so each rank got less done per second of its "
                  "device's time here", **values)
    if ratio > 1.05:
        return tr("matmuls {part_rows} rows tall (a rank's share) ran at {part:.1f} GFLOP/s, "
                  "{rows} rows tall (one rank's whole batch) at {whole:.1f}: the smaller pieces "
                  "ran faster ({ratio:.0%} of the rate), so they cost no efficiency here", **values)
    return tr("matmuls {part_rows} rows tall (a rank's share) ran at {part:.1f} GFLOP/s, {rows} "
              "rows tall (one rank's whole batch) at {whole:.1f}: within 5 % of each other "
              "({ratio:.0%}), so the smaller pieces cost little here", **values)


def speedups(quiet: dict, panel_speedup: float | None) -> dict:
    """Each bar of lesson 00's speedup figure, over one rank's tokens/s without a live view: the
    ideal (the world size), the independent pair (two ranks that never talk), DDP without a
    view; and the panels' speedup (``panel_speedup``: DDP's panel over the one-rank panel, both
    drawn live); None where not measured."""
    one, ddp, pair = (quiet["one"]["tokens_per_s"], quiet["ddp"]["tokens_per_s"],
                      quiet["pair"]["tokens_per_s"])
    ratio = lambda v: None if v is None or not one else v / one
    return {"ideal": float(quiet["ddp"]["world_size"]), "independent pair": ratio(pair),
            "DDP, no live view": ratio(ddp), "panels (both runs with live views)": panel_speedup}


def speedup_verdict(quiet: dict, panel_speedup: float | None) -> tuple[str, str]:
    """``(headline, tone)``: what the runs without a live view showed about N ranks against one,
    in one sentence chosen from the measured speedups (:func:`speedups`): how far from the ideal
    (at or above it, a share of it, about one rank's speed, or slower), and where the shortfall
    is (DDP level with the pair that never talks: communication cost at most about 5 %; else
    the larger of the pair's own shortfall, there without any communication, and DDP's gap to the
    pair). ``tone``: "good" from 75 % of the ideal, "bad" at about one rank's speed or below."""
    s = speedups(quiet, panel_speedup)
    ddp, pair, ideal = s["DDP, no live view"], s["independent pair"], s["ideal"]
    if ddp is None or pair is None:
        return tr("A run measured no steady tokens/s: no speedup to report."), "mixed"
    n = int(ideal)
    if ddp >= ideal:
        return tr("Without a live view, {n} ranks trained {ddp:.2f}× as fast as one: at or above "
                  "the ideal {n}×", n=n, ddp=ddp), "good"
    if ddp >= 0.95 * pair:
        where = tr("DDP reached {share:.0%} of two runs that never talk ({pair:.2f}×): "
                   "communication cost at most about 5 % here", share=ddp / pair, pair=pair)
    elif ideal - pair >= pair - ddp:
        where = tr("most of the shortfall is there without any communication: two runs that never "
                   "talk reached {pair:.2f}× (the ranks share this machine, or half a batch does not "
                   "run twice as fast)", pair=pair)
    else:
        where = tr("most of the shortfall is what DDP adds to two runs that never talk ({pair:.2f}×): "
                   "its all-reduce and the work around it", pair=pair)
    if ddp > 1.1:
        return tr("Without a live view, {n} ranks trained {ddp:.2f}× as fast as one, {share:.0%} of "
                  "the ideal {n}×; {where}", n=n, ddp=ddp, share=ddp / ideal, where=where), \
            "good" if ddp >= 0.75 * ideal else "mixed"
    if ddp >= 0.9:
        return tr("Without a live view, {n} ranks were about as fast as one ({ddp:.2f}×); {where}",
                  n=n, ddp=ddp, where=where), "bad"
    return tr("Without a live view, {n} ranks were slower than one ({ddp:.2f}×); {where}", n=n,
              ddp=ddp, where=where), "bad"


def panel_verdict(speedup: float | None, world_size: int) -> tuple[str, str]:
    """``(headline, tone)`` for the panels' speedup (each run drawn live): how it compares with
    the ideal, in words chosen from the value; the sections after it measure why."""
    if speedup is None:
        return tr("The panels measured no steady tokens/s: no speedup to report."), "mixed"
    tone = "good" if speedup >= 0.75 * world_size else "mixed" if speedup > 1.1 else "bad"
    if speedup >= world_size:
        return tr("With their live views, {n} ranks ran {speedup:.2f}× as fast as one, at or above "
                  "the ideal {n}×; the next sections measure how", n=world_size,
                  speedup=speedup), tone
    return tr("With their live views, {n} ranks ran {speedup:.2f}× as fast as one (the ideal is "
              "{n}×); the next sections measure what took the rest", n=world_size,
              speedup=speedup), tone
