"""``%load_ext gpututor`` gives a notebook the ranks' magics:

    %ranks start 4 [--device cpu|cuda|auto] [--timeout SECONDS]   start 4 live ranks
    %%ranks [0,2 | all] [--no-collectives] [--timeout SECONDS]    run the cell on them
    %ranks status | %ranks restart | %ranks stop
    xs = %ranks gather x                                          x of every rank, in the kernel

A cell's output is one column per rank (``view.py``). ``--no-collectives`` refuses every built-in
collective while the cell runs (an exercise builds its own from ``dist.send``/``recv``);
``--timeout`` bounds how long the cell may wait, after which the waiting ranks are named and the
group restarts. ``%ranks start`` checks the new request (the number of ranks, ``--device``,
``--timeout``: ``checks.py``) before it stops the live group, so a typo loses no names. The
group belongs to the shell that loaded the extension.
"""
from __future__ import annotations

from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

from ...checks import InvalidValue
from ...i18n import say, tr
from .checks import check_group, check_timeout, cpu_ceiling
from .group import CellInterrupted, RankGroup

USAGE = ("%ranks start N [--device D] [--timeout S] | %ranks status | %ranks restart | "
         "%ranks stop | %ranks gather NAME | %%ranks [RANKS] [--no-collectives] [--timeout S]")


def _options(words: list[str], flags: set[str], valued: set[str], what: str) -> dict:
    """``--flag`` and ``--name value`` options out of ``words`` (the rest under ``"args"``)."""
    args: list[str] = []
    found: dict = {"args": args}
    i = 0
    while i < len(words):
        word = words[i]
        if word in flags:
            found[word] = True
        elif word in valued:
            if i + 1 >= len(words):
                raise ValueError(f"{word} needs a value: {USAGE}")
            found[word], i = words[i + 1], i + 1
        elif word.startswith("--"):
            raise InvalidValue("option", word, tuple(sorted(flags | valued)), why=f"for {what}")
        else:
            args.append(word)
        i += 1
    return found


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidValue("timeout", text, "seconds in [1, 3600]") from None
    return check_timeout(value)


def parse_ranks(text: str, world_size: int) -> list[int] | None:
    """``"all"`` -> None; ``"0,2"`` -> [0, 2]; anything else: ``ValueError`` saying what is allowed."""
    allowed = (f"ranks 0 to {world_size - 1} (this group has {world_size}), one or "
               "several separated by commas (such as 0,2), or all")
    if text == "all":
        return None
    try:
        chosen = [int(part) for part in text.split(",")]
    except ValueError:
        raise InvalidValue("ranks", text, allowed) from None
    if not all(0 <= r < world_size for r in chosen):
        raise InvalidValue("ranks", text, allowed)
    return chosen


@magics_class
class RanksMagics(Magics):
    """``%ranks`` (start, status, restart, stop, gather) and ``%%ranks`` (run a cell)."""

    group: RankGroup | None = None

    @line_cell_magic
    def ranks(self, line: str, cell: str | None = None):
        words = line.split()
        if cell is not None:
            return self._cell(words, cell)
        if not words:
            raise ValueError(f"%ranks needs a command: {USAGE}")
        command, rest = words[0], words[1:]
        if command == "start":
            return self._start(rest)
        if command == "stop":
            self.stop()
            say("The ranks are stopped: no process or temp file of theirs is left.")
            return None
        if command == "gather":
            if len(rest) != 1:
                raise ValueError(f"%ranks gather needs one name, got {' '.join(rest)!r}")
            return self._running().gather(rest[0])
        if command == "status":
            print(self.group.status() if self.group is not None and self.group.running
                  else tr("The ranks are not running."))
            return None
        if command == "restart":
            group = self._running()
            group.restart()
            say("The group was restarted ({n} fresh ranks, in {seconds:.1f} s); every "
                     "rank's names are gone.", n=group.world_size, seconds=group.started_s)
            return None
        raise InvalidValue("command", command, f"start, status, restart, stop, gather ({USAGE})")

    def _start(self, words: list[str]) -> None:
        options = _options(words, set(), {"--device", "--timeout"}, "%ranks start")
        args = options["args"]
        if len(args) > 1:
            raise ValueError(f"%ranks start takes one number of ranks, got {' '.join(args)!r}")
        text = args[0] if args else "4"
        try:
            world_size = int(text)
        except ValueError:
            raise InvalidValue("world_size", text, "a whole number of ranks (at most "
                               f"{cpu_ceiling()} on this machine's CPU)") from None
        timeout = _seconds(options["--timeout"]) if "--timeout" in options else 30.0
        device = options.get("--device", "auto")
        check_group(world_size, device=device, timeout=timeout)   # a typo keeps the live group
        self.stop()
        self.group = RankGroup(world_size, device=device, timeout=timeout)
        say("{n} ranks started on {device} in {seconds:.2f} s: run a cell on them with "
                 "%%ranks.", n=world_size, device=self.group.device,
                 seconds=self.group.started_s)

    def _cell(self, words: list[str], code: str):
        options = _options(words, {"--no-collectives"}, {"--timeout"}, "%%ranks")
        group = self._running()
        args = options["args"]
        if len(args) > 1:
            raise InvalidValue("ranks", " ".join(args), "one list without spaces, such as 0,2")
        chosen = parse_ranks(args[0], group.world_size) if args else None
        timeout = _seconds(options["--timeout"]) if "--timeout" in options else None
        try:
            result = group.run(code, ranks=chosen, timeout=timeout,
                               no_collectives=options.get("--no-collectives", False))
        except CellInterrupted as stopped:
            display(stopped.result)
            raise KeyboardInterrupt from None
        display(result)
        return None

    def _running(self) -> RankGroup:
        if self.group is None or not self.group.running:
            raise RuntimeError(tr("The ranks are not running: start them with %ranks start N "
                                  "or gpututor.ranks(N)."))
        return self.group

    def stop(self) -> None:
        if self.group is not None:
            self.group.stop()
            self.group = None


def register(shell) -> None:
    """Register the magics on ``shell`` (once)."""
    if not any(isinstance(m, RanksMagics) for m in shell.magics_manager.registry.values()):
        shell.register_magics(RanksMagics(shell))


def unregister(shell) -> None:
    """Stop the magics' ranks (the magics stay registered, as IPython cannot drop them)."""
    for magics in shell.magics_manager.registry.values():
        if isinstance(magics, RanksMagics):
            magics.stop()
