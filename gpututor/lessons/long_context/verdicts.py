"""What lesson 10's runs showed, in words chosen from their numbers: one verdict per result
(``(headline, details, tone)`` for ``show_verdict``), and the rows of its tables. Nothing here
launches or draws: the tests feed numbers
(tests/lessons/long_context/test_long_context_verdicts.py)."""
from __future__ import annotations

import statistics

from ...i18n import not_measured, tr
from ...parallel.context_parallel import ring_slowdown

# a growth factor within this share of the sequence's own factor reads as "in step with" it
IN_STEP = 0.05
# two step times closer than this share (or the runs' step-to-step spread, if larger: see
# step_spread) read as "about the same"
SAME_STEP = 0.05


def step_spread(times: list[float]) -> float:
    """How far a run's steady steps lie apart: the range of their middle half (75th minus 25th
    percentile), which one step slowed by the machine does not stretch; 0 for fewer than two."""
    if len(times) < 2:
        return 0.0
    low, _, high = statistics.quantiles(times, n=4, method="inclusive")
    return high - low
SPLIT_LABELS = {"contiguous": "contiguous", "zigzag": "zig-zag"}   # shown through tr()


def split_label(split: str) -> str:
    """How a split's key ("zigzag") is written for the learner ("zig-zag")."""
    return tr(SPLIT_LABELS.get(split, split))


def _mb(value, digits: int = 1) -> str:
    return not_measured(value, f",.{digits}f", 1e6)


def _pace(growth: float, factor: float) -> str:
    """How a growth factor compares with the sequence's own factor."""
    if growth > factor * (1 + IN_STEP):
        return tr("faster than the sequence")
    if growth < factor * (1 - IN_STEP):
        return tr("slower than the sequence")
    return tr("in step with the sequence")


def growth_verdict(by: dict, lengths, one: str = "one process",
                   cp: str = "cp=2, per rank") -> tuple[str, str, str]:
    """Section 1: how rank 0's activations grew over the last two lengths, one process against
    a cp rank (``by[(layout, T)]``: bytes). "In step with the sequence" within :data:`IN_STEP`
    of the lengths' ratio. Tone "good" where the cp rank's grew more slowly than one process's."""
    shorter, longer = lengths[-2], lengths[-1]
    factor = longer / shorter
    grew = {layout: by[(layout, longer)] / by[(layout, shorter)] for layout in (one, cp)}
    headline = tr("From T = {shorter} to T = {longer} (x{factor:g}), one process's activations "
                  "grew x{one:.2f}, {one_pace}; a cp=2 rank's x{cp:.2f}, {cp_pace}",
                  shorter=shorter, longer=longer, factor=factor, one=grew[one], cp=grew[cp],
                  one_pace=_pace(grew[one], factor), cp_pace=_pace(grew[cp], factor))
    details = "\n".join(
        [tr("T = {T}: one process keeps {one:.1f} MB, a cp=2 rank {cp:.1f} MB ({share:.0%})",
            T=T, one=by[(one, T)] / 1e6, cp=by[(cp, T)] / 1e6, share=by[(cp, T)] / by[(one, T)])
         for T in lengths]
        + [tr("x{factor:g} is in step with the sequence (linear in T), x{square:g} its square; "
              "within {band:.0%} of x{factor:g} reads as in step", factor=factor,
              square=factor ** 2, band=IN_STEP)])
    tone = "good" if grew[cp] < grew[one] * (1 - IN_STEP) else "mixed"
    return headline, details, tone


def ring_check_verdict(worst: dict, tolerance: float = 1e-12) -> tuple[str, str, str]:
    """Section 2: ring attention against full attention, ``worst[world]`` the largest difference
    of any rank's output or gradient (float64); equal within ``tolerance``."""
    details = "\n".join(tr("{world} ranks: largest difference {worst:.1e}", world=w, worst=d)
                        for w, d in worst.items())
    worlds = tr(" and ").join(str(w) for w in worst)
    largest = max(worst.values())
    if largest <= tolerance:
        return tr("On {worlds} ranks, every rank's output and q, k, v gradients equal full "
                  "attention's (largest difference {worst:.1e}, float64)", worlds=worlds,
                  worst=largest), details, "good"
    return tr("Ring attention differs from full attention by up to {worst:.1e}, more than "
              "float64 rounding ({tolerance:.0e})", worst=largest, tolerance=tolerance), \
        details, "bad"


def slowdown_rows(seq_len: int, sizes=(2, 4, 8)) -> list[dict]:
    """Section 3: for each ring size, the ring's time over evenly shared work per split, for
    what ``ring_forward`` computes (rectangles) and what a kernel that skips masked pairs would."""
    return [{"n": n, **{f"{split}_{counted}": ring_slowdown(seq_len, n, split, counted=counted)
                        for split in ("contiguous", "zigzag")
                        for counted in ("computed", "visible")}} for n in sizes]


def slowdown_table(rows: list[dict]) -> tuple[list[str], list[list]]:
    """``(columns, rows)`` of :func:`slowdown_rows` for ``show_table``."""
    columns = [tr("ranks"), tr("contiguous, computed (×)"), tr("zig-zag, computed (×)"),
               tr("contiguous, visible (×)"), tr("zig-zag, visible (×)")]
    keys = ("contiguous_computed", "zigzag_computed", "contiguous_visible", "zigzag_visible")
    return columns, [[r["n"], *(f"{r[k]:.2f}" for k in keys)] for r in rows]


def slowdown_verdict(rows: list[dict]) -> tuple[str, str, str]:
    """Section 3: whether zig-zag kept this package's ring at evenly shared work's time on every
    ring size (within 0.5 %), and how much longer contiguous took."""
    sizes = tr(", ").join(str(r["n"]) for r in rows)
    contiguous = [r["contiguous_computed"] for r in rows]
    zigzag = max(r["zigzag_computed"] for r in rows)
    details = tr("×: how many times longer the ring takes than the same work shared evenly "
                 "(busiest rank over the mean, step by step); computed: the rectangles "
                 "ring_forward runs; visible: the pairs a kernel that skips masked ones would run")
    if zigzag <= 1.005:
        return tr("On {sizes} ranks zig-zag keeps this package's ring at the time of evenly "
                  "shared work; contiguous takes x{low:.2f} to x{high:.2f}", sizes=sizes,
                  low=min(contiguous), high=max(contiguous)), details, "good"
    return tr("On {sizes} ranks zig-zag leaves this package's ring up to x{zigzag:.2f} the time "
              "of evenly shared work; contiguous takes x{low:.2f} to x{high:.2f}", sizes=sizes,
              zigzag=zigzag, low=min(contiguous), high=max(contiguous)), details, "mixed"


def losses_verdict(runs: dict, reference: str, rtol: float = 1e-4) -> tuple[str, str, str]:
    """Section 4: whether every run (``{name: summary}``) had ``reference``'s loss at every
    step, within a relative ``rtol``."""
    want = runs[reference]["losses"]
    worst = {name: max(abs(a - b) / abs(b) for a, b in zip(s["losses"], want))
             for name, s in runs.items() if name != reference}
    details = "\n".join(tr("{name}: {steps} steps, largest relative difference {worst:.0e}",
                           name=tr(name), steps=len(runs[name]["losses"]), worst=w)
                        for name, w in worst.items())
    largest = max(worst.values())
    lengths = {len(s["losses"]) for s in runs.values()}
    if largest <= rtol and len(lengths) == 1:
        return tr("Every run had {reference}'s loss at every step (within a relative {rtol:.0e}): "
                  "context parallel trains the same model", reference=tr(reference),
                  rtol=rtol), details, "good"
    return tr("A run's losses differ from {reference}'s by more than a relative {rtol:.0e}",
              reference=tr(reference), rtol=rtol), details, "bad"


def runs_table(runs: dict) -> tuple[list[str], list[list]]:
    """Section 4: one row per run (``{name: summary}``): final loss, tokens/s, MB a rank sends
    per step (ring all-reduce counted 2(n−1)/n), rank 0's activations."""
    columns = [tr("run"), tr("final loss"), tr("tokens/s"), tr("sent per step (MB)"),
               tr("rank 0 activations (MB)")]
    rows = [[tr(name), f"{s['final_loss']:.5f}",
             tr("not measured") if s["tokens_per_s"] is None else f"{s['tokens_per_s']:,.0f}",
             _mb(s["comm_wire_bytes_per_step"], 2), _mb(s["mem_by_category"]["activations"][0])]
            for name, s in runs.items()]
    return columns, rows


def split_speed_verdict(zigzag: dict, contiguous: dict, zigzag_times: list,
                        contiguous_times: list, expected: dict) -> tuple[str, str, str]:
    """Section 4: zig-zag's median steady step against contiguous's (summaries and their steady
    step times, seconds), weighed against the noise: a difference within the larger of the two
    runs' step-to-step spreads (:func:`step_spread`) and :data:`SAME_STEP` of the
    shorter step reads as "about the same". ``expected``: :func:`.runs.expected_step_ratio`."""
    z, c = zigzag["step_time_s"], contiguous["step_time_s"]
    same_bytes = zigzag["comm_bytes_per_step"] == contiguous["comm_bytes_per_step"]
    details = [tr("the two cp runs sent the same bytes per step: {mb} MB", mb=_mb(
                  zigzag["comm_bytes_per_step"], 3)) if same_bytes else
               tr("the two cp runs sent different bytes per step: zig-zag {zigzag} MB, "
                  "contiguous {contiguous} MB", zigzag=_mb(zigzag["comm_bytes_per_step"], 3),
                  contiguous=_mb(contiguous["comm_bytes_per_step"], 3)),
               tr("FLOPs predict contiguous x{expected:.2f} zig-zag's step: the attention core "
                  "is {share:.0%} of a zig-zag rank's FLOPs, and the ring's x{core:.2f} applies "
                  "to that part alone", expected=expected["ratio"],
                  share=expected["attention_share"], core=expected["attention_ratio"])]
    if z is None or c is None or not zigzag_times or not contiguous_times:
        return tr("A cp run had no steady step: no step times to compare"), "\n".join(details), \
            "mixed"
    spread = {name: step_spread(t) for name, t in (("zigzag", zigzag_times),
                                                    ("contiguous", contiguous_times))}
    band = max(*spread.values(), SAME_STEP * min(z, c))
    ratio = c / z
    details = [tr("median steady step (each step timed by its slowest rank): zig-zag {z:.0f} ms "
                  "over {nz} steps, contiguous {c:.0f} ms over {nc}; the runs ran one after the "
                  "other", z=z * 1e3, c=c * 1e3, nz=len(zigzag_times), nc=len(contiguous_times)),
               tr("step-to-step spread (the range of the middle half of the steady steps): "
                  "zig-zag {z:.0f} ms, contiguous {c:.0f} ms; a difference within the larger of "
                  "the two and {tol:.0%} reads as about the same", z=spread["zigzag"] * 1e3,
                  c=spread["contiguous"] * 1e3, tol=SAME_STEP)] + details
    words = dict(ratio=ratio, expected=expected["ratio"], band=band * 1e3)
    if abs(c - z) <= band:
        return tr("Zig-zag and contiguous steps took about the same time here (x{ratio:.2f}, "
                  "within these runs' noise of {band:.0f} ms); FLOPs predict x{expected:.2f}",
                  **words), "\n".join(details), "mixed"
    if ratio > 1:
        return tr("Zig-zag's steps were faster here: contiguous took x{ratio:.2f} their time; "
                  "FLOPs predict x{expected:.2f}", **words), "\n".join(details), "good"
    return tr("Zig-zag's steps were slower here: contiguous took x{ratio:.2f} their time, where "
              "FLOPs predict x{expected:.2f}", **words), "\n".join(details), "bad"


def tp_cp_table(runs: dict) -> tuple[list[str], list[list]]:
    """Section 5: rank 0's parameters and activations and the MB a rank sends per step, per run
    (``{name: summary}``)."""
    columns = [tr("run"), tr("rank 0 parameters (MB)"), tr("rank 0 activations (MB)"),
               tr("sent per step (MB)")]
    return columns, [[name, _mb(s["mem_by_category"]["params"][0], 2),
                      _mb(s["mem_by_category"]["activations"][0]),
                      _mb(s["comm_wire_bytes_per_step"], 2)] for name, s in runs.items()]


def tp_cp_verdict(tp: dict, cp: dict) -> tuple[str, str, str]:
    """Section 5: whether cp=2 kept less, about as much or more of the activations on rank 0
    than tp=2 (within :data:`IN_STEP`), with what it paid in parameters."""
    act = {name: s["mem_by_category"]["activations"][0] for name, s in (("tp", tp), ("cp", cp))}
    params = {name: s["mem_by_category"]["params"][0] for name, s in (("tp", tp), ("cp", cp))}
    details = tr("a cp rank holds every weight whole, a tp rank only its share of the weights tp "
                 "splits: parameters {cp} MB against {tp} MB", cp=_mb(params["cp"], 2),
                 tp=_mb(params["tp"], 2))
    if None in act.values():
        return tr("A run did not measure its activations: nothing to compare"), details, "mixed"
    words = dict(cp=act["cp"] / 1e6, tp=act["tp"] / 1e6)
    if act["cp"] < act["tp"] * (1 - IN_STEP):
        return tr("On rank 0, cp=2 kept fewer activations than tp=2: {cp:.1f} MB against "
                  "{tp:.1f} MB", **words), details, "good"
    if act["cp"] > act["tp"] * (1 + IN_STEP):
        return tr("On rank 0, cp=2 kept more activations than tp=2: {cp:.1f} MB against "
                  "{tp:.1f} MB", **words), details, "bad"
    return tr("On rank 0, cp=2 and tp=2 kept about as many activations: {cp:.1f} MB and "
              "{tp:.1f} MB", **words), details, "mixed"


def _op(name: str) -> str:
    """An aten operator's name as a reader looks it up ("aten.x.default" -> "x")."""
    return name.removeprefix("aten.").removesuffix(".default")


def torch_cp_outcome(record: dict) -> tuple[str, str, str] | str:
    """Section 6: torch's ``context_parallel`` on these ranks. Where it ran, a verdict
    ``(headline, details, tone)``; where it did not, a note (a string) saying what is and is not
    available here and why, from what torch raised and the SDPA operators it handles."""
    device = tr("GPU") if record.get("device") == "cuda" else tr("CPU")
    ops = ", ".join(_op(o) for o in record["sdpa_ops"])
    ring = None if record["ring_ops"] is None else [_op(o) for o in record["ring_ops"]]
    method = record["rotate_method"] or tr("not known")
    if record["ran"]:
        details = tr("SDPA ran {ops}; torch's default exchange of keys and values: {method}",
                     ops=ops, method=method)
        if record["max_difference"] <= 1e-5:
            return tr("torch's context_parallel ran on these {device} ranks and equals full "
                      "attention within {difference:.1e}", device=device,
                      difference=record["max_difference"]), details, "good"
        return tr("torch's context_parallel ran on these {device} ranks but differs from full "
                  "attention by {difference:.1e}", device=device,
                  difference=record["max_difference"]), details, "bad"
    error = record["error"].split(":")[0]
    if ring is not None and not {_op(o) for o in record["sdpa_ops"]} <= set(ring):
        return tr("torch's context_parallel is not available on these {device} ranks: SDPA ran "
                  "{ops} here, and torch's context_parallel handles only {ring} (it raised "
                  "{error}). The from-scratch ring of sections 2 to 4 runs on any device; torch's "
                  "default exchange of keys and values: {method}.", device=device, ops=ops,
                  ring=", ".join(ring), error=error, method=method)
    return tr("torch's context_parallel did not run on these {device} ranks: {error}. The "
              "from-scratch ring of sections 2 to 4 runs on any device; torch's default exchange "
              "of keys and values: {method}.", device=device, error=record["error"][:200],
              method=method)
