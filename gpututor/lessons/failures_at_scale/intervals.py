"""Lesson 12's checkpoint intervals at scale: a save time measured here, scaled to a large job's
state per GPU (a fixed cost fitted to saves of two sizes, and the bytes at the rate a larger
write to this disk was measured at, :mod:`.measured`), and for one job
the intervals and the work lost (the formulas of :mod:`gpututor.plan.interruptions`), as a row
the notebook prints. The notebook imports these, not the formulas its exercises ask the learner
to write. It also gives a job's MTBF for the notebook (:func:`mtbf_hours`), and the section's
tables and verdicts (``(headline, details, tone)`` for :func:`gpututor.i18n.show_verdict`), each
chosen from the numbers a test can feed it.
"""
from __future__ import annotations

from ...formulas import DAY, HOUR, MB
from ...i18n import not_measured, tr
from ...plan.interruptions import (FailureRecord, daly_interval, job_mtbf_s, lost_gpu_hours_per_day,
                                   young_interval)

# δ/M below which the save counts as small against the MTBF: there Daly's interval is within
# 5 % of Young's (their ratio is 1 − (2/3)·√(δ/2M) + δ/(18M), 0.953 at δ/M = 0.01)
SMALL = 0.01


def save_cost_fit(small: tuple[float, float], large: tuple[float, float]) -> dict:
    """A save's cost as a fixed part plus a part per byte, from two saves ``(bytes, seconds)``
    of different sizes: ``per_byte_s`` the slope between them (None where the larger save was
    not slower: the per-byte part is then lost in the noise), ``fixed_s`` what is left of the
    larger save, and ``fixed_share`` its share of the larger save."""
    (b1, t1), (b2, t2) = sorted((small, large))
    if b2 <= b1:
        raise ValueError(f"two saves of different sizes are needed, not {b1:g} and {b2:g} bytes")
    if t2 <= t1:
        return {"fixed_s": t2, "per_byte_s": None, "fixed_share": None, "bytes": b2, "seconds": t2}
    per_byte = (t2 - t1) / (b2 - b1)
    fixed = max(t2 - per_byte * b2, 0.0)
    return {"fixed_s": fixed, "per_byte_s": per_byte, "fixed_share": fixed / t2, "bytes": b2,
            "seconds": t2}


def at_measured_rate(fit: dict, disk: dict, state_bytes: float) -> float:
    """Seconds to save ``state_bytes``: the fit's fixed part (:func:`save_cost_fit`; the whole
    larger save where it found no per-byte part) plus the bytes at the rate ``disk``
    (:func:`.measured.write_rate`) measured for one of as many writers as the saves had ranks.
    That the rate holds beyond the file measured is an assumption."""
    return fit["fixed_s"] + state_bytes / disk["bytes_per_s"]


def at_scale(fit: dict, state_bytes: float) -> float:
    """Seconds to save ``state_bytes`` by :func:`save_cost_fit`'s ``fit``: its fixed part plus
    its per-byte part times ``state_bytes``. Where the fit found no per-byte part, the whole
    larger save is taken as per byte (its rate: an upper bound)."""
    if fit["per_byte_s"] is None:
        return state_bytes * fit["seconds"] / fit["bytes"]
    return fit["fixed_s"] + fit["per_byte_s"] * state_bytes


def async_at_scale(sync_at_scale_s: float, sync_s: float, blocked_s: float, save_s: float,
                   slowdown: float | None) -> dict:
    """An asynchronous save at scale, from one measured beside a synchronous save of the same
    state: its blocked time (``blocked_s``) and its whole save (``save_s``, the write ``W``)
    keep their ratios to the synchronous save (``sync_s``, measured; ``sync_at_scale_s``, that
    save at scale: an assumption), and the steps beside the write are slower by ``slowdown``
    (:func:`.measured.steps_beside_writes`: steps beside a write against steps without one, in
    one run; counted as 0 where they were not slower). ``W`` is wall time: the steps beside it
    run at ``1/(1+s)`` of their speed, so the work lost in it is ``W − W/(1+s) = s·W/(1+s)``,
    and training loses ``delta_s = blocked + s·W/(1+s)`` per save. Where it was not measured
    (None), the slowdown is not counted."""
    blocked = sync_at_scale_s * blocked_s / sync_s
    write = sync_at_scale_s * save_s / sync_s
    if slowdown is None:
        slowed = 0.0
    else:
        slowdown = max(slowdown, 0.0)
        slowed = slowdown * write / (1 + slowdown)
    return {"blocked_s": blocked, "write_s": write, "slowdown": slowdown,
            "slowed_s": slowed, "delta_s": blocked + slowed}


def mtbf_hours(n_gpus: int, per_gpu_hour: float) -> float:
    """Mean hours between interruptions of a job on ``n_gpus`` GPUs (``job_mtbf_s`` in hours)."""
    return job_mtbf_s(n_gpus, per_gpu_hour) / HOUR


def interval_row(n_gpus: int, per_gpu_hour: float, save_s: float, restart_s: float,
                 write_s: float = 0.0) -> dict:
    """One job on ``n_gpus`` GPUs interrupted ``per_gpu_hour`` times per GPU-hour, whose saves
    block training ``save_s`` seconds (``δ``) and, when asynchronous, are written in ``write_s``
    (``W``). Its MTBF (``M``), ``δ/M`` and whether that is small (:data:`SMALL`), Young's and
    Daly's intervals, the interval used (Young's, or ``W`` where Young's is shorter: saves
    would queue), the GPU-hours lost per day at it and their share of the job's, the share a
    failure during the write adds (``W/M``), and the GPU-hours lost when saving every hour
    (None where an hour is shorter than the write)."""
    mtbf = job_mtbf_s(n_gpus, per_gpu_hour)
    young = young_interval(save_s, mtbf)
    interval = max(young, write_s)

    def lost(every: float):
        return lost_gpu_hours_per_day(every, save_s, mtbf, n_gpus, restart_s, write_s)

    at_best = lost(interval)
    return {"n_gpus": n_gpus, "mtbf_s": mtbf, "save_s": save_s, "save_over_mtbf": save_s / mtbf,
            "small": save_s / mtbf < SMALL, "young_s": young,
            "daly_s": daly_interval(save_s, mtbf), "write_s": write_s, "queues": young < write_s,
            "interval_s": interval, "lost": at_best, "share": at_best / (24 * n_gpus),
            "write_share": write_s / mtbf, "hourly": lost(HOUR) if HOUR >= write_s else None}


def beyond(row: dict, value, spec: str) -> str:
    """``value`` of ``row`` formatted, or "beyond the model" where the row's first-order share
    lost is 1 or more (more GPU-hours than the job has)."""
    return tr("beyond the model") if row["share"] >= 1 else format(value, spec)


def mtbf_table(per_gpu_hour: float, sizes) -> tuple[list[str], list[list[str]]]:
    """``(columns, rows)``: for each job size (GPUs), interruptions per day and the mean hours
    between them at ``per_gpu_hour``."""
    columns = [tr("GPUs"), tr("interruptions per day"), tr("mean time between interruptions (h)")]
    return columns, [[f"{n:,}", f"{DAY / job_mtbf_s(n, per_gpu_hour):,.3g}",
                      f"{mtbf_hours(n, per_gpu_hour):,.1f}"] for n in sizes]


def rate_verdict(record: FailureRecord, per_gpu_hour: float, sizes) -> tuple[str, str, str]:
    """How often the largest job of ``sizes`` is interrupted at ``record``'s rate; the rate's
    derivation and the GPUs' share of it as details."""
    years = 1 / per_gpu_hour / (365 * 24)
    details = tr("{unexpected} unexpected interruptions of every cause in {days} days on {gpus:,} "
                 "GPUs = {rate:.2e} per GPU-hour; the GPUs caused {gpu_share:.1%} of them, one per "
                 "{gpu_years:.1f} GPU-years", unexpected=record.unexpected, days=record.days,
                 gpus=record.gpus, rate=per_gpu_hour, gpu_share=record.gpu_share,
                 gpu_years=years / record.gpu_share)
    return tr("At Llama 3's rate, one interruption per {years:.1f} GPU-years, a job on {n:,} GPUs "
              "is interrupted every {hours:,.1f} hours on average", years=years, n=max(sizes),
              hours=mtbf_hours(max(sizes), per_gpu_hour)), details, "mixed"


def saves_table(saves: dict[str, dict], disk: dict, state_bytes: float,
                save_s: float) -> tuple[list[str], list[list[str]]]:
    """``(columns, rows)``: each measured save (label -> a run's ``checkpoint`` section: its
    largest rank's bytes and seconds), the write that measured the disk's rate (``disk``, from
    :func:`.measured.write_rate`: its bytes per writer), and ``state_bytes`` per GPU at the
    fixed cost plus that rate (``save_s``)."""
    columns = [tr("save"), tr("MB per rank"), tr("seconds")]
    rows = [[label, not_measured(max((b for b in saved["bytes_per_rank"] if b is not None),
                                     default=None), ".2f", MB), not_measured(saved["save_s"], ".3f")]
            for label, saved in saves.items()]
    rows.append([tr("{writers} files written at once, synced (measured)", writers=disk["writers"]),
                 f"{disk['bytes'] / MB:,.0f}", f"{disk['seconds']:.3f}"])
    return columns, rows + [[tr("{gb:g} GB per GPU: fixed part + the measured rate",
                                gb=state_bytes / 1e9), f"{state_bytes / MB:,.0f}", f"{save_s:,.0f}"]]


def fit_sentence(fit: dict, smaller_bytes: float, disk: dict, state_bytes: float,
                 save_s: float) -> str:
    """What :func:`save_cost_fit` found on saves of ``smaller_bytes`` and ``fit["bytes"]`` per
    rank, how far its slope alone would have to be extrapolated to ``state_bytes``, and the
    measured write (``disk``) that prices the bytes instead (``save_s``)."""
    words = dict(gb=state_bytes / 1e9, save=save_s, low=smaller_bytes / MB, high=fit["bytes"] / MB,
                 factor=state_bytes / fit["bytes"], mb=disk["bytes"] / MB, writers=disk["writers"],
                 seconds=disk["seconds"], rate=disk["bytes_per_s"] / MB, fixed=fit["fixed_s"],
                 left=state_bytes / disk["bytes"])
    measured = tr("Measured instead: {writers} files of {mb:,.0f} MB written at once to this disk "
                  "and synced took {seconds:.2f} s, {rate:,.0f} MB/s for each writer; {gb:g} GB at "
                  "that rate plus the fixed {fixed:.3f} s take {save:,.0f} s. That is still "
                  "{left:,.0f}× the file written: it assumes the disk keeps this rate up to "
                  "{gb:g} GB.", **words)
    if fit["per_byte_s"] is None:
        return tr("Fitted on saves of {low:.2f} and {high:.2f} MB per rank: the larger save was "
                  "not slower, so the cost per byte is lost in the noise there; the fixed part is "
                  "taken as the whole larger save.", **words) + " " + measured
    words.update(per_mb=fit["per_byte_s"] * MB, rate_mb=1 / fit["per_byte_s"] / MB,
                 share=fit["fixed_share"], fitted=at_scale(fit, state_bytes))
    return tr("Fitted on saves of {low:.2f} and {high:.2f} MB per rank: {fixed:.3f} s fixed + "
              "{per_mb:.4f} s per MB ({rate_mb:.0f} MB/s); the fixed part is {share:.0%} of the "
              "larger save. Its slope alone would put {gb:g} GB at {fitted:,.0f} s, an "
              "extrapolation {factor:,.0f}× beyond the larger save, which holds only if the "
              "write rate stays what it was at a few MB.", **words) + " " + measured


def intervals_table(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """``(columns, rows)`` of :func:`interval_row` rows: ``δ/M``, Young's and Daly's intervals,
    the GPU-hours lost per day at Young's and their share of the job, and saving every hour."""
    columns = [tr("GPUs"), "δ/M", tr("Young's interval (h)"), tr("Daly's interval (h)"),
               tr("lost per day at Young's (GPU-hours)"), tr("share of the job"),
               tr("lost per day saving hourly (GPU-hours)")]
    return columns, [[f"{r['n_gpus']:,}", f"{r['save_over_mtbf']:.2g}", f"{r['young_s'] / HOUR:,.2f}",
                      f"{r['daly_s'] / HOUR:,.2f}", beyond(r, r["lost"], ",.1f"),
                      beyond(r, r["share"], ".1%"), not_measured(r["hourly"], ",.1f")]
                     for r in rows]


def intervals_verdict(rows: list[dict], save_s: float, fit_text: str) -> tuple[str, str, str]:
    """What Young's interval loses across the job sizes of ``rows`` (smallest to largest) with
    saves of ``save_s``: the smallest and largest job's share where the first-order model holds
    at both, else where it stops holding. Details: ``fit_text`` and how far Daly's interval is
    from Young's."""
    rows = sorted(rows, key=lambda r: r["n_gpus"])
    details = [fit_text]
    far = [r for r in rows if not r["small"]]
    details += [tr("{n:,} GPUs: δ/M = {ratio:.2g}, not small: Daly's interval is {shorter:.0%} shorter "
                   "than Young's, and the first-order model is only a guide", n=r["n_gpus"],
                   ratio=r["save_over_mtbf"], shorter=1 - r["daly_s"] / r["young_s"]) for r in far] \
        or [tr("δ/M is below 0.01 at every size: Daly's interval is within 5 % of Young's")]
    details = "\n".join(details)
    held = [r for r in rows if r["share"] < 1]
    small, large = rows[0], rows[-1]
    words = dict(save=save_s, small=small["n_gpus"], low=small["share"], large=large["n_gpus"],
                 high=large["share"])
    if len(held) == len(rows):
        return tr("With saves of {save:,.0f} s, at Young's interval a job on {small:,} GPUs loses "
                  "{low:.1%} of its time and one on {large:,} GPUs {high:.1%}", **words), details, "mixed"
    if held:
        return tr("With saves of {save:,.0f} s, at Young's interval a job on {small:,} GPUs loses "
                  "{low:.1%} of its time; from {beyond:,} GPUs on, the first-order model does not "
                  "hold (it would lose more than the job has)", beyond=rows[len(held)]["n_gpus"], **words), \
            details, "bad"
    return tr("With saves of {save:,.0f} s, the first-order model holds at none of these sizes: "
              "each job would lose more than it has", **words), details, "bad"


def slowdown_sentence(scaled: dict, beside: dict) -> str:
    """How much slower the asynchronous run's steps beside a write were than its steps with
    none (``beside``: :func:`.measured.steps_beside_writes`, each group with its middle half;
    ``scaled``: :func:`async_at_scale`'s, for the seconds it adds at scale), and whether that
    stands out of the step-to-step variation (counted) or not (counted as 0)."""
    seconds = lambda v: tr("not measured") if v is None else f"{v:.3f} s"
    spread = lambda q: tr("not measured") if q is None else f"{q[0]:.3f}–{q[1]:.3f} s"
    words = dict(a=seconds(beside["beside_s"]), c=seconds(beside["clean_s"]),
                 n_a=len(beside["beside"]), n_c=len(beside["clean"]),
                 q_a=spread(beside.get("beside_quartiles")),
                 q_c=spread(beside.get("clean_quartiles")), n_p=len(beside.get("partial", ())))
    groups = tr("median step of the asynchronous fsdp run with at least half of it beside a "
                "write {a} ({n_a} steps, middle half {q_a}), with none {c} ({n_c} steps, middle "
                "half {q_c}), in the same run ({n_p} steps partly beside a write left out)",
                **words)
    if beside["slowdown"] is None:
        return tr("{groups}: one of the two has no step, so slower steps beside the write are "
                  "not measured and not counted", groups=groups)
    if beside.get("counted", beside["slowdown"]) > 0:
        return tr("{groups}: the steps beside a write were {slow:.1%} slower, above the middle "
                  "half of the steps with none, {extra:,.0f} s more per save at scale, counted "
                  "in the asynchronous δ", groups=groups, slow=beside["slowdown"],
                  extra=scaled["slowed_s"])
    return tr("{groups}: the difference ({slow:+.1%}) is within the step-to-step variation "
              "(the median step beside a write is not above the upper quartile of the steps "
              "with none), not counted (0)", groups=groups, slow=beside["slowdown"])


def save_ways_table(rows: dict[str, dict]) -> tuple[list[str], list[list[str]]]:
    """``(columns, rows)``: one job saved in several ways (label -> :func:`interval_row`): what a
    save blocks, ``δ/M``, the write after it, the interval used and what it loses."""
    n = next(iter(rows.values()))["n_gpus"]
    columns = [tr("{n:,} GPUs, saves", n=n), tr("training lost per save, δ (seconds)"), "δ/M",
               tr("write, W (seconds)"), tr("saves every (min)"), tr("lost per day (GPU-hours)"),
               tr("share of the job")]
    return columns, [[label, f"{r['save_s']:,.0f}", f"{r['save_over_mtbf']:.2g}",
                      f"{r['write_s']:,.0f}", f"{r['interval_s'] / 60:,.0f}",
                      beyond(r, r["lost"], ",.0f"), beyond(r, r["share"], ".1%")]
                     for label, r in rows.items()]


def save_ways_verdict(sync: dict, asynchronous: dict, slowdown: str) -> tuple[str, str, str]:
    """Which of two saves measured here loses less at scale (:func:`interval_row` rows), or that
    the model prices neither (a share lost of 1 or more). Details: ``slowdown``
    (:func:`slowdown_sentence`) and whether the asynchronous writes queue."""
    w, m = asynchronous["write_s"], asynchronous["write_share"]
    details = [slowdown, tr(
        "the asynchronous write takes {write:,.0f} s, less than Young's interval: saves do not "
        "queue; failures during the write cost {extra:.1%} of the job (W/M, counted)"
        if not asynchronous["queues"] else
        "the asynchronous write takes {write:,.0f} s, more than Young's interval: saves would "
        "queue, so it saves every {write:,.0f} s; failures during the write cost {extra:.1%} of "
        "the job (W/M, counted)", write=w, extra=m)]
    words = dict(a=asynchronous["share"], s=sync["share"], n=sync["n_gpus"])
    if max(sync["share"], asynchronous["share"]) >= 1:
        return tr("Of the two saves measured here, the model prices neither at {n:,} GPUs: one of "
                  "them would lose more than the job has", **words), "\n".join(details), "mixed"
    if asynchronous["lost"] < sync["lost"]:
        details.append(tr("the blocked time it saves outweighs the slower steps beside its write "
                          "and the failures during it"))
        return tr("Of the two saves measured here, the asynchronous one loses less at {n:,} GPUs: "
                  "{a:.1%} of the job's time against {s:.1%}", **words), "\n".join(details), "good"
    if sync["lost"] < asynchronous["lost"]:
        details.append(tr("the slower steps beside the asynchronous save's write and the failures "
                          "during it cost more than the blocked time it saves"))
        return tr("Of the two saves measured here, the synchronous one loses less at {n:,} GPUs: "
                  "{s:.1%} of the job's time against {a:.1%}", **words), "\n".join(details), "mixed"
    return tr("The two saves measured here lose the same at {n:,} GPUs: {s:.1%} of the job's time",
              **words), "\n".join(details), "mixed"
