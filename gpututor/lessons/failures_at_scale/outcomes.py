"""Lesson 12's runs as the learner reads them: a table of each set of runs (sections 1 and 2) and
the verdict chosen from their numbers for sections 1, 2, 3 and 5 (checkpoints, resharded resumes,
the restart, the hang). Each verdict is ``(headline, details, tone)`` for
:func:`gpututor.i18n.show_verdict`: one sentence chosen from the numbers, the rest folded.
Nothing here launches a run: it reads run summaries, so a test can feed it numbers.
"""
from __future__ import annotations

from ...formulas import MB, bytes_per_value, optimizer_state_bytes
from ...i18n import not_measured, ntr, tr

# an asynchronous save that keeps training waiting for at most this share of it hid most of it
HIDDEN = 0.5


def state_bytes(params: int | None) -> float | None:
    """The training state a checkpoint holds: fp32 weights and AdamW's two fp32 moments per
    parameter (12 bytes; gradients are not saved). None where the run recorded no parameters."""
    if params is None:
        return None
    return params * (bytes_per_value("fp32") + optimizer_state_bytes("adamw"))


def written(run: dict) -> float | None:
    """All the bytes a run's ranks wrote in one save (None if a rank's were not measured)."""
    per_rank = run["checkpoint"]["bytes_per_rank"]
    return None if not per_rank or None in per_rank else float(sum(per_rank))


def saves_measured_table(runs: dict[str, dict]) -> tuple[list[str], list[list[str]]]:
    """``(columns, rows)`` for :func:`gpututor.i18n.show_table`: per run (name -> summary with a
    ``checkpoint`` section), the MB each rank wrote, their sum and its share of the whole state,
    the whole save and the part training waited for (median over saves, slowest rank), and the
    median training step."""
    columns = [tr("run"), tr("MB written per rank"), tr("MB in all"), tr("whole state (MB)"),
               tr("written / whole state"), tr("save (seconds)"), tr("training waited (seconds)"),
               tr("median step (seconds)")]
    rows = []
    for name, run in runs.items():
        saved, total, state = run["checkpoint"], written(run), state_bytes(run["params"])
        rows.append([name, " / ".join(not_measured(b, ".2f", MB) for b in saved["bytes_per_rank"]),
                     not_measured(total, ".1f", MB), not_measured(state, ".1f", MB),
                     not_measured(None if total is None or not state else total / state, ".1%"),
                     not_measured(saved["save_s"], ".2f"), not_measured(saved["blocked_s"], ".2f"),
                     not_measured(run["step_time_s"], ".2f")])
    return columns, rows


def waited_share(run: dict) -> float | None:
    """The share of a save training waited for (blocked over the whole save), or None."""
    saved = run["checkpoint"]
    if saved["blocked_s"] is None or not saved["save_s"]:
        return None
    return saved["blocked_s"] / saved["save_s"]


def tolerance(rtol: float) -> str:
    """``rtol`` as the lesson writes it ("1e-5", not Python's "1e-05")."""
    mantissa, exponent = f"{rtol:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def span(low: str, high: str) -> str:
    """"low to high", or one value where both read the same."""
    return low if low == high else tr("{low} to {high}", low=low, high=high)


def saves_measured_verdict(runs: dict[str, dict], cores: int | None) -> tuple[str, str, str]:
    """What the asynchronous saves of ``runs`` showed: whether training waited for at most
    :data:`HIDDEN` of each (the rest written beside the next steps), for more in every run, or
    for more in some only. Details: where the writer threads ran (``cores``: the usable CPU
    cores, where the ranks are CPU processes), and each asynchronous save's whole time against
    the synchronous save of the same strategy and model, where the runs hold one."""
    asynchronous = {n: r for n, r in runs.items() if r["spec"]["checkpoint_async"]}
    shares = [s for s in map(waited_share, asynchronous.values()) if s is not None]
    details = [where_the_write_runs(next(iter(runs.values()))["device"], cores)]
    for name, run in asynchronous.items():
        same = [r for r in runs.values() if not r["spec"]["checkpoint_async"]
                and r["strategy"] == run["strategy"] and r["model_size"] == run["model_size"]]
        if same and None not in (run["checkpoint"]["save_s"], same[0]["checkpoint"]["save_s"]):
            a, s = run["checkpoint"]["save_s"], same[0]["checkpoint"]["save_s"]
            details.append(tr("{name}: the asynchronous save took {a:.2f} s in all, longer than "
                              "the synchronous one's {s:.2f} s" if a > s else
                              "{name}: the asynchronous save took {a:.2f} s in all, no longer "
                              "than the synchronous one's {s:.2f} s", name=name, a=a, s=s))
    details = "\n".join(details)
    if not shares:
        return tr("Training's wait for the asynchronous saves was not measured in this run"), \
            details, "mixed"
    words = dict(span=span(f"{min(shares):.0%}", f"{max(shares):.0%}"))
    if max(shares) <= HIDDEN:
        return tr("Training waited for {span} of each asynchronous save: the rest of the write "
                  "ran in the background", **words), details, "good"
    if min(shares) > HIDDEN:
        return tr("Training waited for {span} of each asynchronous save: most of each save was "
                  "not hidden", **words), details, "bad"
    return tr("Training waited for {span} of an asynchronous save: some layouts hid most of the "
              "save, others did not", **words), details, "mixed"


def where_the_write_runs(device: str, cores: int | None) -> str:
    """Where an asynchronous save's write runs, for ranks on ``device`` (a run's recorded
    device: "cpu", "cuda:0", ...)."""
    if str(device).startswith("cuda"):
        return tr("the ranks run on GPUs: an asynchronous save keeps training waiting while it "
                  "copies the pieces to CPU memory (and for its set-up), and the write then runs "
                  "on the CPU while the GPUs compute")
    return tr("the ranks are CPU processes: an asynchronous save's writer threads share this "
              "machine's {cores} usable CPU cores with the ranks", cores=cores)


def largest_difference(losses: list[float], reference: list[float]) -> float | None:
    """The largest relative difference between ``losses`` and ``reference``, step for step
    (None where there is no step to compare)."""
    pairs = list(zip(losses, reference))
    return max((abs(a - b) / abs(b) for a, b in pairs), default=None)


def resumed_table(full: list[float], legs: dict[str, dict],
                  rtol: float) -> tuple[list[str], list[list[str]]]:
    """``(columns, rows)``: each run continued from a checkpoint (``legs``: label -> summary
    with ``first_step`` and ``losses``) against the uninterrupted run's losses ``full``."""
    columns = [tr("continued as"), tr("steps"), tr("largest relative difference"),
               tr("within rtol {rtol}", rtol=tolerance(rtol))]
    rows = []
    for label, leg in legs.items():
        first, worst = leg["first_step"], largest_difference(leg["losses"], full[leg["first_step"]:])
        rows.append([label, f"{first}–{first + len(leg['losses']) - 1}", not_measured(worst, ".1e"),
                     tr("not measured") if worst is None else tr("yes") if worst <= rtol else tr("no")])
    return columns, rows


def resumed_verdict(full: list[float], legs: dict[str, dict], rtol: float) -> tuple[str, str, str]:
    """Whether every continued run reproduced the uninterrupted run's losses within ``rtol``."""
    worst = {label: largest_difference(leg["losses"], full[leg["first_step"]:])
             for label, leg in legs.items()}
    off = [label for label, w in worst.items() if w is None or w > rtol]
    if not off:
        return tr("Each continued run matches the uninterrupted run's losses within rtol {rtol}, "
                  "step for step", rtol=tolerance(rtol)), "", "good"
    return tr("{off} of {n} continued runs do not match the uninterrupted run's losses within rtol "
              "{rtol}: {labels}", off=len(off), n=len(legs), rtol=tolerance(rtol),
              labels="; ".join(off)), "", "bad"


def restart_verdict(summary: dict, reference: list[float], rtol: float) -> tuple[str, str, str]:
    """What the restarted run's records show (``summary``: its ``failures``, ``attempts``,
    ``steps``, ``losses`` and its spec's ``checkpoint_every``): which rank failed and where,
    the checkpoint it restarted from, how many steps it ran twice (and, where a later save had
    started before the failure, that it was not yet committed), and whether its losses from
    there equal the uninterrupted run's (``reference``) within ``rtol``."""
    if not summary["failures"]:
        return tr("No rank failed: the injected fault did not fire, so nothing restarted"), "", "bad"
    failure = summary["failures"][0]
    rank, step, resumed = failure["rank"], failure["step"], failure["resumed_from"]
    details = [tr("the error: {error}", error=failure["error"]),
               tr("{attempts} attempts; the run finished {steps} steps",
                  attempts=summary["attempts"], steps=summary["steps"])]
    if resumed is None:
        return tr("Rank {rank} failed at step {step}, and the run did not restart", rank=rank,
                  step=step), "\n".join(details), "bad"
    every = summary["spec"]["checkpoint_every"]
    due = step // every * every   # the last save started before the failing step
    if due > resumed:
        details.append(tr("step {due}'s save had started before the failure but was not yet "
                          "committed (renamed from its staging folder), so the restart took step "
                          "{resumed}'s, the newest committed one", due=due, resumed=resumed))
    worst = largest_difference(summary["losses"][resumed:], reference[resumed:])
    details.append(tr("largest relative difference from step {start} on: {worst}", start=resumed,
                      worst=not_measured(worst, ".1e")))
    details = "\n".join(details)
    lost = step - resumed
    again = tr("lost no step") if lost == 0 else ntr("ran {n} step twice", "ran {n} steps twice", lost)
    words = dict(rank=rank, step=step, resumed=resumed, again=again)
    if worst is not None and worst <= rtol:
        return tr("Rank {rank} failed at step {step}; the run restarted from step {resumed}'s "
                  "checkpoint, {again}, and matched the uninterrupted run's losses from there",
                  **words), details, "good"
    return tr("Rank {rank} failed at step {step}; the run restarted from step {resumed}'s "
              "checkpoint and {again}, but its losses from there do not match the uninterrupted "
              "run's within rtol {rtol}", rtol=tolerance(rtol), **words), details, "bad"


STACK = "\n\n--- what rank "   # where a hang report's stack of the silent rank begins


def hang_outcome(failure, hung_rank: int, seconds: float, timeout: float,
                 device: str) -> tuple[str, str, str, str]:
    """``(headline, details, tone, report)`` for a run in which ``hung_rank`` was made to hang:
    ``failure`` is the ``RunFailed`` it ended with (None if it finished). The headline says
    whether the report names that rank; the details hold what the waiting rank's line is on
    ``device`` (the spec's resolved device) and the silent rank's stack, folded; ``report`` is
    the report without that stack and without the waiting rank's traceback ("" where none)."""
    if failure is None:
        return tr("The run finished: rank {rank} did not hang (unexpected)", rank=hung_rank), \
            "", "bad", ""
    report = str(failure).split("\n\n--- traceback of")[0]
    report, _, stack = report.partition(STACK)
    details = [waiting_rank_line(report, failure.rank, device)]
    if stack:
        details += [(STACK + stack).strip()]
    words = dict(named=failure.failed_rank, rank=hung_rank, step=failure.step, seconds=seconds,
                 timeout=timeout)
    if failure.failed_rank == hung_rank:
        return tr("The report names rank {rank}, the rank that hung, at step {step}; the run ended "
                  "{seconds:.1f} s after it started (timeout {timeout:g} s)", **words), \
            "\n".join(details), "good", report
    return tr("The report names rank {named}, not rank {rank}, which was made to hang; the run "
              "ended {seconds:.1f} s after it started (timeout {timeout:g} s)", **words), \
        "\n".join(details), "bad", report


def waiting_rank_line(report: str, rank: int, device: str) -> str:
    """What the line of ``rank`` (the rank that gave up waiting) in a hang ``report`` is, from
    what the report says (NCCL's watchdog aborting it) and the device the run resolved to."""
    if "SIGABRT" in report:
        return tr("rank {rank} ran on a GPU: NCCL's watchdog aborts a rank whose collective timed "
                  "out, so its line says it exited with code -6 (SIGABRT)", rank=rank)
    if device == "cuda":
        return tr("rank {rank} ran on a GPU: its line is the error NCCL raised in it when its "
                  "collective timed out", rank=rank)
    return tr("rank {rank} ran on a CPU: its line is gloo's timeout in a receive, inside DDP's "
              "all-reduce hook", rank=rank)
