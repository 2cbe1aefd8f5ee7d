"""Lesson 09's runs as the learner reads them: each set of results as a table (``(columns,
rows)`` for ``show_table``) and, where it has one, a verdict (``(headline, details, tone)`` for
``show_verdict``) whose words are chosen from the numbers.

- one rank (section 1) and the sharded runs under a capacity (section 3): :func:`held_table`,
  :func:`capped_table`, :func:`capped_verdict`, :func:`setup_table`, :func:`setup_verdict`;
- rank grids and layouts (sections 4-6): :func:`grid_table`, :func:`equal_table`,
  :func:`equal_verdict`, :func:`bytes_table`, :func:`bytes_verdict`, :func:`rank_table`;
- sequence parallel (section 7): :func:`sp_table`, :func:`sp_verdict`.

The planner's results (sections 8 and 9) are in :mod:`.plans`. Nothing here launches or draws.
"""
from __future__ import annotations

import torch

from ...formulas import MB
from ...i18n import language, not_measured, tr
from ..common.devices import shares_cores

# a relative loss difference from one process below this reads as rounding: the same numbers,
# summed in another order (fp32 gives about 1e-7 to 1e-6 over this lesson's few steps)
SAME_AS_ONE_PROCESS = 1e-5


def _mb(value) -> str:
    """Bytes as MB with two decimals, or "not measured" for None."""
    return not_measured(value, ".2f", MB)


def names_of(names) -> str:
    """``["a", "b", "c"]`` as "a, b and c" (in the notebook's language)."""
    names = list(names)
    return names[0] if len(names) == 1 else tr(", ").join(names[:-1]) + tr(" and ") + names[-1]


def largest(values) -> float | None:
    """The largest of per-rank ``values`` that were measured, or None if none was."""
    measured = [v for v in values if v is not None]
    return max(measured) if measured else None


def relative_difference(run: dict, reference: dict) -> float:
    """The largest relative difference of ``run``'s losses from ``reference``'s, step by step."""
    return max(abs(a - b) / abs(b) for a, b in zip(run["losses"], reference["losses"]))


def out_of_memory_words(failure) -> str | None:
    """The out-of-memory error a run failed with, in the notebook's language, from its fields
    (rank, step, phase, bytes held against the capacity, and by category); None when the run
    failed otherwise, and in English, where the error's own message already says it.
    ``failure``: the ``RunFailed`` that ``wait()`` raised."""
    error = getattr(failure, "error", None)
    if error is None or not hasattr(error, "categories") or language() == "en":
        return None
    names = {"params": "parameters", "grads": "gradients", "optimizer": "optimizer state",
             "buffers": "buffers"}
    state = {name: error.categories.get(name, 0) for name in ("params", "grads", "optimizer")}
    if error.categories.get("buffers"):
        state["buffers"] = error.categories["buffers"]
    held = tr(", ").join(f"{tr(names[name])} {nbytes / MB:.1f} MB" for name, nbytes in state.items())
    return tr("rank {rank} ran out of memory at step {step} ({phase}): it would hold {held_mb:.1f} MB, "
              "capacity {capacity_mb:.1f} MB; held by category: {held}, activations and the "
              "step's other tensors {rest_mb:.1f} MB",
              rank=error.rank, step=error.step, phase=tr(error.phase), held_mb=error.held / MB,
              capacity_mb=error.capacity / MB, held=held,
              rest_mb=(error.held - sum(state.values())) / MB)


def failure_words(failure) -> str:
    """What a failed run says, in the notebook's language where it is an out-of-memory error."""
    return out_of_memory_words(failure) or str(failure).splitlines()[0]


# ---- sections 1 to 3: one rank, then sharded under a capacity --------------------------------

def held_table(single: dict) -> tuple[list, list]:
    """What one rank held between steps, by category, and its peak during a step."""
    held = {c: single["mem_by_category"][c][0] for c in ("params", "grads", "optimizer",
                                                          "activations")}
    label = {"params": tr("parameters ({n:,} of them)", n=single["params"]),
             "grads": tr("gradients"), "optimizer": tr("optimizer state"),
             "activations": tr("activations")}
    rows = [[label[c], _mb(b)] for c, b in held.items()]
    rows.append([tr("peak during a step (everything alive)"), _mb(single["peak_mem_bytes"][0])])
    return [tr("one rank holds"), tr("MB")], rows


def capped_table(outcomes: dict, capacity: float) -> tuple[list, list]:
    """One row per layout run under ``capacity``: ``outcomes`` maps its name to its summary, or
    to the ``RunFailed`` it raised."""
    rows = []
    for name, outcome in outcomes.items():
        if isinstance(outcome, dict):
            peak = largest(outcome["peak_mem_bytes"])
            rows.append([name, tr("finished"), _mb(peak),
                         tr("not measured") if peak is None else f"{peak / capacity:.0%}"])
        else:
            ran_out = hasattr(getattr(outcome, "error", None), "categories")
            rows.append([name, tr("out of memory") if ran_out else tr("failed"),
                         tr("not measured"), tr("not measured")])
    return [tr("layout"), tr("outcome"), tr("largest peak per rank (MB)"),
            tr("of the capacity ({mb:.1f} MB)", mb=capacity / MB)], rows


def capped_verdict(outcomes: dict, capacity: float, world_size: int) -> tuple[str, str, str]:
    """Whether the layouts of ``outcomes`` (as :func:`capped_table` takes them) fit ``capacity``
    on ``world_size`` ranks: all of them, some, or none."""
    fit = [n for n, o in outcomes.items() if isinstance(o, dict)]
    failed = [n for n in outcomes if n not in fit]
    floor = tr("While a block runs forward or backward, its whole parameters are gathered on "
               "every rank: one block's size is a floor that sharding cannot go below.")
    failures = [f"{n}: {failure_words(outcomes[n])}" for n in failed]
    if not failed:
        peak = largest(largest(outcomes[n]["peak_mem_bytes"]) for n in fit)
        words = dict(n=world_size, names=names_of(fit), capacity=capacity / MB)
        headline = tr("Sharded over {n} ranks, {names} fit in {capacity:.1f} MB per rank",
                      **words) if peak is None else \
            tr("Sharded over {n} ranks, {names} fit: largest peak per rank {peak:.1f} MB of "
               "{capacity:.1f} MB", peak=peak / MB, **words)
        return (headline, tr("Each rank keeps 1/{n} of the parameters, gradients and optimizer "
                             "state; the figure below shows each rank's bytes by category.",
                             n=world_size), "good")
    if fit:
        return (tr("Sharded over {n} ranks, {fit} fit and {failed} did not", n=world_size,
                   fit=names_of(fit), failed=names_of(failed)),
                "\n".join(failures + [floor]), "mixed")
    return (tr("Sharded over {n} ranks, no layout fit the capacity: {names} failed",
               n=world_size, names=names_of(failed)), "\n".join(failures + [floor]), "bad")


def setup_table(runs: dict, whole_params: float) -> tuple[list, list]:
    """Each run's largest setup peak per rank, and its share of ``whole_params`` (the bytes of
    the whole model's parameters)."""
    rows = []
    for name, s in runs.items():
        setup = largest(s["setup_peak_mem_bytes"])
        rows.append([name, _mb(setup),
                     tr("not measured") if setup is None else f"{setup / whole_params:.0%}"])
    return [tr("run"), tr("setup peak per rank (MB)"),
            tr("of the whole model's parameters")], rows


def setup_verdict(single: dict, sharded: dict) -> tuple[str, str, str]:
    """Whether any sharded rank held as many bytes as the whole model's parameters while its
    model was being built (``single``: the one-process run; ``sharded``: name -> summary)."""
    whole = single["mem_by_category"]["params"][0]
    shares = {n: largest(s["setup_peak_mem_bytes"]) for n, s in sharded.items()}
    shares = {n: v / whole for n, v in shares.items() if v is not None}
    if not shares:
        return (tr("No sharded run measured a setup peak: nothing to set beside one process's."),
                "", "mixed")
    name = max(shares, key=shares.get)
    one = largest(single["setup_peak_mem_bytes"])
    details = "" if one is None else tr("One process, which builds the whole model: {share:.0%} "
                                        "of its parameter bytes.", share=one / whole)
    if shares[name] < 1:
        return (tr("No sharded rank ever held the whole model while being set up: at most "
                   "{share:.0%} of its parameter bytes", share=shares[name]), details, "good")
    return (tr("A {name} rank held {share:.0%} of the whole model's parameter bytes while being "
               "set up: as much as the whole model, or more", name=name, share=shares[name]),
            details, "bad")


# ---- sections 4 to 6: rank grids and layouts ---------------------------------------------------

def grid_table(grid) -> tuple[list, list]:
    """A :class:`~gpututor.parallel.mesh.RankGrid`'s groups: one row per dim."""
    return ([tr("dim"), tr("ranks per group"), tr("groups (ranks equal in every other dim)")],
            [[dim, grid.degree(dim), "  ".join(str(g) for g in grid.groups(dim))]
             for dim in grid.dims])


def grid_name(mesh: dict) -> str:
    """``{"dp": 2, "tp": 2}`` as "dp=2 × tp=2"."""
    return " × ".join(f"{d}={n}" for d, n in mesh.items())


def equal_table(runs: dict, meshes: dict, single: dict) -> tuple[list, list]:
    """Each layout's grid and its largest relative loss difference from one process."""
    return ([tr("layout"), tr("grid"), tr("largest relative loss difference from one process")],
            [[name, grid_name(meshes[name]), f"{relative_difference(s, single):.1e}"]
             for name, s in runs.items()])


def equal_verdict(differences: dict, details: str = "") -> tuple[str, str, str]:
    """Whether every layout of ``differences`` (name -> largest relative loss difference from
    one process) trained like one process, up to rounding (:data:`SAME_AS_ONE_PROCESS`);
    ``details`` go first in the details."""
    worst = max(differences.values())
    rounding = tr("A relative difference of about 1e-7 to 1e-6 is fp32 rounding: the same "
                  "numbers summed in another order, equal up to summation order, not bit for bit. "
                  "This lesson compares losses; tests/parallel/test_composed.py also compares "
                  "every layout's final weights (assert_close), training with SGD: AdamW divides "
                  "by the square root of a small variance, which magnifies those rounding "
                  "differences to about 1e-4 in the weights.")
    lines = "\n".join(line for line in (details, rounding) if line)
    if worst < SAME_AS_ONE_PROCESS:
        subject = names_of(differences) if len(differences) == 1 else tr("every layout")
        return (tr("Up to rounding, {subject} trained like one process: largest relative loss "
                   "difference {worst:.1e}", subject=subject, worst=worst), lines, "good")
    apart = [n for n, d in differences.items() if d >= SAME_AS_ONE_PROCESS]
    return (tr("{names} differed from one process by up to {worst:.1e}: more than the {same:.0e} "
               "this lesson reads as rounding", names=names_of(apart), worst=worst,
               same=SAME_AS_ONE_PROCESS), lines, "bad")


def _sent(s: dict) -> str:
    sent = s.get("comm_wire_bytes_per_step")
    return "0.00" if s["world_size"] == 1 and sent is None else _mb(sent)


def bytes_table(runs: dict) -> tuple[list, list]:
    """The parameter bytes on each rank, and the bytes each rank sent per step, per layout."""
    world = max(s["world_size"] for s in runs.values())
    rows = []
    for name, s in runs.items():
        params = list(s["mem_by_category"]["params"]) + [None] * (world - s["world_size"])
        rows.append([name] + [_mb(p) if r < s["world_size"] else "-" for r, p in enumerate(params)]
                    + [_sent(s)])
    columns = [tr("layout"), tr("parameters on rank 0 (MB)")]
    columns += [tr("rank {rank}", rank=r) for r in range(1, world)]
    return columns + [tr("sent per rank per step (MB)")], rows


def bytes_verdict(single: dict, runs: dict) -> tuple[str, str, str]:
    """Which layout of ``runs`` holds the fewest parameter bytes on its fullest rank, against
    ``single``'s; which sends the fewest bytes, among those measured."""
    whole = single["mem_by_category"]["params"][0]
    held = {n: largest(s["mem_by_category"]["params"]) for n, s in runs.items()}
    held = {n: v for n, v in held.items() if v is not None}
    sent = {n: s["comm_wire_bytes_per_step"] for n, s in runs.items()
            if s.get("comm_wire_bytes_per_step") is not None}
    unmeasured = [n for n in runs if n not in sent]
    lines = []
    if sent:
        least = min(sent, key=sent.get)
        lines.append(tr("Of the bytes sent that were measured, {name} sends the fewest: {mb:.2f} "
                        "MB per rank per step.", name=least, mb=sent[least] / MB))
    if unmeasured:
        lines.append(tr("Bytes sent not measured for {names}: torch's own collectives run there, "
                        "unmetered.", names=names_of(unmeasured)))
    if not held:
        return tr("No layout measured its parameter bytes per rank."), "\n".join(lines), "mixed"
    fewest = min(held, key=held.get)
    return (tr("{name} holds the fewest parameter bytes per rank: at most {mb:.2f} MB, {share:.0%} "
               "of one process's", name=fewest, mb=held[fewest] / MB, share=held[fewest] / whole),
            "\n".join(lines), "mixed")


def rank_table(grid, run: dict) -> tuple[list, list]:
    """Each rank of ``grid``: its index along every dim, and the parameter bytes it held in
    ``run``."""
    params = run["mem_by_category"]["params"]
    return ([tr("rank")] + list(grid.dims) + [tr("parameters (MB)")],
            [[r] + [grid.index(r, d) for d in grid.dims] + [_mb(params[r])]
             for r in range(grid.world_size)])


def ran_on(run: dict, cores: int) -> str:
    """What ``run``'s ranks ran on, from its recorded device (and the usable CPU ``cores``)."""
    n = run["world_size"]
    if torch.device(run["device"]).type == "cuda":
        return tr("The {n} ranks ran on one GPU each.", n=n)
    if shares_cores(run["device"], n, cores):
        return tr("The {n} ranks were {n} CPU processes sharing this machine's {cores} cores: "
                  "the run's times measure that sharing.", n=n, cores=cores)
    return tr("The {n} ranks were {n} CPU processes on this machine.", n=n)


# ---- section 7: sequence parallel -------------------------------------------------------------

def sp_table(runs: dict, formula: dict, single: dict) -> tuple[list, list]:
    """tp=2 without and with sequence parallel: ``runs`` and ``formula`` (Korthikanti's
    activation bytes) keyed by the ``sequence_parallel`` option."""
    label = {False: "tp=2", True: tr("tp=2 + sequence parallel")}
    return ([tr("layout"), tr("activations per rank, measured (MB)"),
             tr("by Korthikanti's formula (MB)"), tr("sent per rank per step (MB)"),
             tr("largest relative loss difference from one process")],
            [[label[sp], _mb(s["mem_by_category"]["activations"][0]), _mb(formula[sp]),
              _mb(s.get("comm_wire_bytes_per_step")), f"{relative_difference(s, single):.1e}"]
             for sp, s in runs.items()])


def sp_verdict(runs: dict, formula: dict) -> tuple[str, str, str]:
    """Whether sequence parallel lowered rank 0's measured activations, what it sent in
    exchange, and whether Korthikanti's formula moved the same way."""
    off, on = (runs[sp]["mem_by_category"]["activations"][0] for sp in (False, True))
    if off is None or on is None:
        return tr("Activations per rank were not measured: nothing to compare."), "", "mixed"
    sent_off, sent_on = (runs[sp].get("comm_wire_bytes_per_step") for sp in (False, True))
    if sent_off is None or sent_on is None:
        sent = tr("Bytes sent: not measured.")
    elif sent_on >= sent_off:
        sent = tr("In exchange it sent {mb:.2f} MB more per rank per step: the parameter "
                  "gradients' all-reduce and the two boundary all-gathers described above.",
                  mb=(sent_on - sent_off) / MB)
    else:
        sent = tr("It sent {mb:.2f} MB less per rank per step.", mb=(sent_off - sent_on) / MB)
    a, b = formula[False] / MB, formula[True] / MB
    moved = tr("Korthikanti's formula moved the same way, {a:.2f} to {b:.2f} MB.", a=a, b=b) \
        if (formula[True] < formula[False]) == (on < off) else \
        tr("Korthikanti's formula moved the other way, {a:.2f} to {b:.2f} MB.", a=a, b=b)
    counts = tr("It counts what Megatron keeps (fp32 here); this implementation also keeps the "
                "gathered inputs of the split layers, so the two columns need not match.")
    details = "\n".join([sent, moved, counts])
    if on < off:
        return (tr("Sequence parallel cut each rank's measured activations by {mb:.2f} MB "
                   "({share:.0%})", mb=(off - on) / MB, share=(off - on) / off),
                tr("The difference is the layer norms' inputs, now split over the two ranks "
                   "instead of held whole by each.") + "\n" + details, "good")
    return (tr("Sequence parallel did not lower the measured activations per rank here: "
               "{on:.2f} MB against {off:.2f} MB", on=on / MB, off=off / MB), details, "bad")
