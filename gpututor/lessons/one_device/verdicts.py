"""Lesson 01b's verdicts: what each result cell measured, one sentence chosen from the numbers,
with the figures behind it as details, and the rows of the tables beside them. Each verdict
returns ``(headline, details, tone)`` for ``gpututor.i18n.show_verdict``; none measures anything
(``tests/lessons/one_device`` feeds them numbers).

Beside this run's attention times stands one published figure, labelled as such: FlashAttention's
kernel on an A100 (:data:`FLASH_ATTENTION_A100`), the GPU result a CPU run can reverse.
"""
from __future__ import annotations

from ...catalog import get_link
from ...formulas import activation_bytes_per_layer
from ...i18n import tr
from ...parallel.link import REFERENCE, reference_flops, scaled_link

# Dao et al. 2022, Figure 2 (left): forward + backward of attention in GPT-2 medium (sequence
# 1024, head dimension 64, 16 heads, batch 64) on an A100, standard attention against
# FlashAttention [ref: dao2022-flops]. Published, not measured here.
FLASH_ATTENTION_A100 = {"seq_len": 1024, "standard_ms": 41.7, "flash_ms": 7.3}
# selective recomputation "saves little" below this share of what forward keeps
LITTLE = 0.25


def flash_attention_ratio() -> float:
    """FlashAttention's time over standard attention's in :data:`FLASH_ATTENTION_A100`."""
    return FLASH_ATTENTION_A100["flash_ms"] / FLASH_ATTENTION_A100["standard_ms"]


def memory_verdict(rows: list[dict]) -> tuple[str, str, str]:
    """How what forward keeps grew as the longest sequence doubled, per way of computing
    attention: T² (×4) or T (×2), whichever each growth is nearer to (``attention_costs`` rows)."""
    at = {(r["way"], r["seq_len"]): r for r in rows}
    longest = max(r["seq_len"] for r in rows)
    grew = {way: at[(way, longest)]["saved_bytes"] / at[(way, longest // 2)]["saved_bytes"]
            for way in ("naive", "tiled")}
    mb = {way: at[(way, longest)]["saved_bytes"] / 1e6 for way in ("naive", "tiled", "sdpa")}
    details = tr("at T = {T}: naive keeps {naive:.1f} MB, tiled {tiled:.2f} MB, sdpa {sdpa:.2f} MB",
                 T=longest, **mb)
    words = dict(T=longest, naive=grew["naive"], tiled=grew["tiled"], naive_mb=mb["naive"],
                 tiled_mb=mb["tiled"])
    if abs(grew["naive"] - 4) < abs(grew["naive"] - 2) and abs(grew["tiled"] - 2) < abs(grew["tiled"] - 4):
        return tr("Doubling T to {T} multiplied what ordinary attention keeps for backward by "
                  "{naive:.1f} (as T² would) and what the tiled way keeps by {tiled:.1f} (as T "
                  "would): {naive_mb:.1f} MB against {tiled_mb:.2f} MB", **words), details, "good"
    return tr("Doubling T to {T} multiplied what ordinary attention keeps for backward by {naive:.1f} "
              "and what the tiled way keeps by {tiled:.1f} (×4 would be T², ×2 would be T)",
              **words), details, "mixed"


def time_verdict(rows: list[dict], flops: dict[int, dict], calls: dict) -> tuple[str, str, str]:
    """Whether the tiled way was slower than the naive one at the longest sequence although it
    computes fewer FLOPs there; ``flops``: ``attention_flops`` per sequence length, ``calls``:
    ``operator_calls`` at the longest."""
    at = {(r["way"], r["seq_len"]): r for r in rows}
    longest = max(r["seq_len"] for r in rows)
    naive = at[("naive", longest)]["seconds"]
    words = dict(T=longest, tiled=at[("tiled", longest)]["seconds"] / naive,
                 sdpa=at[("sdpa", longest)]["seconds"] / naive)
    lines = []
    for length, counted in flops.items():
        ratio = {part: counted["tiled"][part] / counted["naive"][part]
                 for part in ("forward", "backward", "total")}
        lines.append(tr("T = {T}: the tiled way computes {computed} of the {tiles} tiles of 64 x 64; "
                        "its matmul FLOPs are {forward:.2f}x the naive way's in forward, "
                        "{backward:.2f}x in backward, {total:.2f}x in all", T=length,
                        computed=counted["tiles"]["computed"], tiles=counted["tiles"]["all"], **ratio))
    for way, c in calls.items():
        lines.append(tr("T = {T}, {way}, profiled: {calls:,} operator calls; {aten_ms:.0f} ms inside "
                        "the operators (matmuls {mm_ms:.0f} ms) of {wall_ms:.0f} ms, {outside_ms:.0f} "
                        "ms outside them", T=longest, way=tr(way), calls=c["aten_calls"],
                        aten_ms=c["aten_s"] * 1e3, mm_ms=c["matmul_s"] * 1e3,
                        wall_ms=c["wall_s"] * 1e3, outside_ms=(c["wall_s"] - c["aten_s"]) * 1e3))
    fewer = flops[longest]["tiled"]["total"] < flops[longest]["naive"]["total"]
    if words["tiled"] > 1 and fewer:
        lines.append(tr("The tiled way makes far more operator calls (per tile a slice of each input, "
                        "a mask, a few small matmuls, an exponential), each with a fixed cost, so its "
                        "matmuls are a smaller part of its time; what ran outside the operators is "
                        "Python's loop over the tiles and the profiler's own bookkeeping."))
        return tr("At T = {T} the tiled way took {tiled:.2f}× ordinary attention's time although it "
                  "computes fewer FLOPs (SDPA: {sdpa:.2f}×): its many small operator calls cost more "
                  "than the FLOPs it skips", **words), "\n".join(lines), "bad"
    if words["tiled"] > 1:
        return tr("At T = {T} the tiled way took {tiled:.2f}× ordinary attention's time (SDPA: "
                  "{sdpa:.2f}×)", **words), "\n".join(lines), "bad"
    if fewer:
        return tr("At T = {T} the tiled way took {tiled:.2f}× ordinary attention's time (SDPA: "
                  "{sdpa:.2f}×): as fast or faster, the FLOPs it skips outweigh its many small "
                  "operator calls", **words), "\n".join(lines), "good"
    return tr("At T = {T} the tiled way took {tiled:.2f}× ordinary attention's time (SDPA: "
              "{sdpa:.2f}×): as fast or faster", **words), "\n".join(lines), "good"


def recomputation_rows(rec: list[dict]) -> list[list[str]]:
    """One row per recomputation policy: MB kept for backward, the share less than none, the
    step's ms and its ms more than none."""
    none = next(r for r in rec if r["policy"] == "none")
    return [[tr(r["policy"]), f"{r['saved_bytes'] / 1e6:.1f}",
             f"{1 - r['saved_bytes'] / none['saved_bytes']:.0%}", f"{r['seconds'] * 1e3:.0f}",
             f"{(r['seconds'] - none['seconds']) * 1e3:+.0f}"] for r in rec]


def recomputation_verdict(rec: list[dict]) -> tuple[str, str, str]:
    """Which policy kept the least for backward, at what time; and whether the matmul-outputs
    variant saved more than the paper's selective policy, and cost less time than full."""
    by = {r["policy"]: r for r in rec}
    none = by["none"]
    least = min(rec, key=lambda r: r["saved_bytes"])
    words = dict(policy=tr(least["policy"]), mb=least["saved_bytes"] / 1e6,
                 less=1 - least["saved_bytes"] / none["saved_bytes"],
                 extra=(least["seconds"] - none["seconds"]) * 1e3)
    headline = (tr("{policy} kept the least for backward: {mb:.1f} MB, {less:.0%} less than none, "
                   "for {extra:.0f} ms more a step", **words) if words["extra"] > 0 else
                tr("{policy} kept the least for backward: {mb:.1f} MB, {less:.0%} less than none, "
                   "and its step was not slower here ({extra:+.0f} ms)", **words))
    details = []
    if {"matmul-outputs", "selective", "full"} <= set(by):
        variant, selective, full = by["matmul-outputs"], by["selective"], by["full"]
        details.append(tr("matmul-outputs kept more than selective: the T × T scores it saves are "
                          "the tensors the paper's policy drops")
                       if variant["saved_bytes"] > selective["saved_bytes"] else
                       tr("matmul-outputs kept no more than selective"))
        details.append(tr("matmul-outputs cost more time than full recomputation: torch's selective "
                          "checkpoint contexts look at every operation of the block to decide "
                          "whether to save it (this run does not time that apart)")
                       if variant["seconds"] > full["seconds"] else
                       tr("matmul-outputs cost no more time than full recomputation"))
    return headline, "\n".join(details), "good"


def selective_verdict(count: dict, n_layer: int, kept: dict[str, int]) -> tuple[str, str, str]:
    """Korthikanti et al.'s count of what a layer keeps (``count``: ``seq_len``, ``micro_batch``,
    ``d_model``, ``n_head``), in the paper's case (16-bit, dropout) and in this model's (fp32, no
    dropout): the attention core's share, which selective recomputation drops, beside the share
    it saved in the run (``kept``: bytes per policy)."""
    cases = {"16-bit, dropout (the paper's assumptions, this model's sizes)": dict(bytes_per_value=2, dropout=True),
             "fp32, no dropout (this model)": dict(bytes_per_value=4, dropout=False)}
    share, lines = {}, []
    for case, values in cases.items():
        none, selective = (activation_bytes_per_layer(**count, recompute=p, **values)
                           for p in ("none", "selective"))
        share[case] = 1 - selective / none
        lines.append(tr("{case}: {layers} layers keep {mb:.1f} MB by the count; the attention core "
                        "is {core:.0%} of it, what selective recomputation drops", case=tr(case),
                        layers=n_layer, mb=n_layer * none / 1e6, core=share[case]))
    lines.append(tr("measured in this run: none kept {none:.1f} MB in all (with the embeddings, the "
                    "head and the logits, which the per-layer count leaves out)",
                    none=kept["none"] / 1e6))
    words = dict(core=share["fp32, no dropout (this model)"],
                 measured=1 - kept["selective"] / kept["none"])
    if words["core"] < LITTLE:
        return tr("In this model the attention core is {core:.0%} of what a layer keeps by the "
                  "count: selective recomputation saves little here (measured: {measured:.0%} of "
                  "what forward kept)", **words), "\n".join(lines), "mixed"
    return tr("In this model the attention core is {core:.0%} of what a layer keeps by the count: "
              "selective recomputation saves much of it (measured: {measured:.0%} of what forward "
              "kept)", **words), "\n".join(lines), "good"


def adam8bit_verdict(apart: list[dict]) -> tuple[str, str, str]:
    """Whether 8-bit Adam's weights stayed within the package test's bounds of fp32 Adam's after
    the test's steps and after the lesson's (``apart_by_steps`` rows), and how the distance grew,
    beside the yardstick (fp32 Adam at twice the learning rate)."""
    eight = {r["steps"]: r for r in apart if r["name"] == "Adam, 8-bit state"}
    yard = {r["steps"]: r for r in apart if r["name"] != "Adam, 8-bit state"}
    short, long = min(eight), max(eight)
    words = dict(short=short, long=long, grew=eight[long]["apart"] / eight[short]["apart"])
    details = tr("from {short} to {long} steps the distance grew x{eight:.1f} for 8-bit Adam, "
                 "x{yard:.1f} for the yardstick (fp32 Adam at twice the learning rate), which is "
                 "{where} the bounds after {short} steps", short=short, long=long,
                 eight=words["grew"], yard=yard[long]["apart"] / yard[short]["apart"],
                 where=tr("within") if yard[short]["within"] else tr("outside"))
    if eight[short]["within"] and eight[long]["within"]:
        return tr("8-bit Adam's weights stayed within the test's bounds of fp32 Adam's after {short} "
                  "and after {long} steps", **words), details, "good"
    if eight[short]["within"]:
        return tr("8-bit Adam's weights stayed within the test's bounds after {short} steps, not "
                  "after {long}: the distance grew ×{grew:.1f}", **words), details, "mixed"
    return tr("8-bit Adam's weights were outside the test's bounds of fp32 Adam's already after "
              "{short} steps", **words), details, "bad"


def offload_verdict(off: dict, link) -> tuple[str, str, str]:
    """How much of the offloaded step the emulated link took (``offload_costs`` with ``link``):
    most of it (half or more) or less; the details price one latency per copied tensor and a
    16-bit model's half as many bytes."""
    emulated = off["offloaded, emulated link"]
    share = emulated["emulated_s"] / emulated["step_s"]
    half = 2 * link.send_seconds(emulated["bytes_per_step"]["to_host"] // 2)   # 16-bit: half the bytes
    compute = emulated["step_s"] - emulated["emulated_s"]
    details = "\n".join([
        tr("the emulation sleeps once per direction, as for one flat buffer; OffloadedAdam copies "
           "{tensors} tensors each way, and one latency per copy would add {extra_ms:.0f} ms a step",
           tensors=emulated["tensors"], extra_ms=2 * (emulated["tensors"] - 1) * link.latency * 1e3),
        tr("with 16-bit parameters and gradients the emulated link would take {half_ms:.0f} ms a step "
           "instead of {link_ms:.0f} ms: {half_share:.0%} of such a step instead of {share:.0%}",
           half_ms=half * 1e3, link_ms=emulated["emulated_s"] * 1e3,
           half_share=half / (compute + half), share=share)])
    words = dict(share=share, link_ms=emulated["emulated_s"] * 1e3, step_ms=emulated["step_s"] * 1e3)
    if share >= 0.5:
        return tr("The emulated PCIe link took most of the offloaded step: {link_ms:.0f} of "
                  "{step_ms:.0f} ms ({share:.0%}); this batch computes too little per parameter to "
                  "pay for 8 bytes of copies per parameter", **words), details, "bad"
    return tr("The emulated PCIe link took {share:.0%} of the offloaded step ({link_ms:.0f} of "
              "{step_ms:.0f} ms): less than the compute", **words), details, "good"


def capacity_verdict(fits: list[dict], capacity: int) -> tuple[str, str, str]:
    """The largest model size that fits ``capacity`` without the levers and with all of them
    (``largest_that_fits`` rows; its first configuration is "without")."""
    names = list(dict.fromkeys(r["name"] for r in fits))
    largest = {n: [r for r in fits if r["name"] == n and r["fits"]] for n in names}
    without, levers = (largest[n][-1] if largest[n] else None for n in (names[0], names[-1]))
    words = dict(mb=capacity / 1e6)
    if without is None and levers is None:
        return tr("Nothing fits {mb:.0f} MB, with or without the levers", **words), "", "bad"
    if without is None:
        return tr("Without the levers nothing fits {mb:.0f} MB; with all of them the {size} model "
                  "does ({millions:.2f} M parameters)", size=tr(levers["model_size"]),
                  millions=levers["parameters"] / 1e6, **words), "", "good"
    if levers is None:
        return tr("Without the levers the {size} model fits {mb:.0f} MB; with all of them nothing does",
                  size=tr(without["model_size"]), **words), "", "bad"
    words.update(before=tr(without["model_size"]), before_m=without["parameters"] / 1e6,
                 after=tr(levers["model_size"]), after_m=levers["parameters"] / 1e6,
                 ratio=levers["parameters"] / without["parameters"])
    if levers["parameters"] > without["parameters"]:
        return tr("The largest model that fits {mb:.0f} MB grew from {before} ({before_m:.2f} M "
                  "parameters) to {after} ({after_m:.2f} M) with the levers: ×{ratio:.1f} the "
                  "parameters", **words), "", "good"
    return tr("The levers did not let a larger model fit {mb:.0f} MB: {before} ({before_m:.2f} M "
              "parameters) either way", **words), "", "bad"


def apart_rows(apart: list[dict]) -> list[list[str]]:
    """One row per ``apart_by_steps`` row: steps, optimizer, distance and cosine to fp32 Adam's
    weights, whether within the test's bounds, and the two final losses."""
    return [[str(r["steps"]), tr(r["name"]), f"{r['apart']:.3f}", f"{r['cosine']:.3f}",
             tr("within") if r["within"] else tr("outside"), f"{r['loss']:.4f}",
             f"{r['reference_loss']:.4f}"] for r in apart]


def offload_rows(off: dict) -> list[list[str]]:
    """One row per ``offload_costs`` way: its median step (ms) and the part the emulated link
    added (ms)."""
    return [[tr(name), f"{r['step_s'] * 1e3:.0f}", f"{r['emulated_s'] * 1e3:.0f}"]
            for name, r in off.items()]


def emulation_rows(here_flops: float, name: str = "pcie4") -> list[list[str]]:
    """What the emulated link ``name`` (a ``gpututor.catalog`` link) is, beside an A100 and here:
    the reference's FLOP/s against this machine's (``here_flops``), and the link's bandwidth and
    latency from the catalogue against the ones ``scaled_link`` gives here."""
    real, link = get_link(name), scaled_link(name, here_flops)
    return [[tr("FLOP/s in a training step"),
             tr("{gpu}: {tflops:.0f} TFLOP/s ({fraction:.0%} of its {precision} peak)",
                gpu=REFERENCE["gpu"], tflops=reference_flops() / 1e12,
                fraction=REFERENCE["fraction_of_peak"], precision=REFERENCE["precision"]),
             tr("{gflops:.1f} GFLOP/s (measured)", gflops=here_flops / 1e9)],
            [tr("{link}: bandwidth", link=name), f"{real.bandwidth / 1e9:.1f} GB/s",
             f"{link.bandwidth / 1e6:.1f} MB/s"],
            [tr("{link}: latency", link=name), f"{real.latency * 1e6:.0f} µs",
             f"{link.latency * 1e3:.0f} ms"]]
