"""What every widget that starts runs and follows them shares (the run panel, the sharding board):
Run and Stop buttons, one background thread that follows the run(s), redraws throttled to what
the front end can afford, and a Stop that returns at once.

A button callback must return at once, or the kernel handles no further widget messages and
Stop never fires (docs/architecture.md, "What the launcher guards against"): the work runs on
the thread, and Stop hands ``run.stop`` to a thread of its own.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

import ipywidgets as W

from ..i18n import tr

UPDATE_INTERVAL_S = 1.0      # at most 1 redraw per second (and the first step at once)


class Follower:
    """Run and Stop buttons and the thread behind them. A widget subclasses it and defines
    ``run()`` (the Run button) and ``stop()`` (the Stop button, called with ``wait=False``)."""

    def __init__(self, run_label: str = "Run"):
        self.run_button = W.Button(description=tr(run_label), button_style="success", icon="play")
        self.stop_button = W.Button(description=tr("Stop"), button_style="danger", icon="stop",
                                    disabled=True)
        self.run_button.on_click(lambda _: self.run())
        self.stop_button.on_click(lambda _: self.stop(wait=False))
        self._thread: threading.Thread | None = None

    def run(self, wait: bool = False):   # pragma: no cover - every widget defines its own
        raise NotImplementedError

    def stop(self, wait: bool = True) -> None:   # pragma: no cover
        raise NotImplementedError

    @property
    def busy(self) -> bool:
        """True while the thread follows a run."""
        return self._thread is not None and self._thread.is_alive()

    def start_following(self, target: Callable, *args, name: str) -> None:
        """Disable Run, enable Stop, and run ``target(*args)`` on the widget's thread; the buttons
        come back when it returns, however it ends."""
        self.run_button.disabled, self.stop_button.disabled = True, False

        def guarded():
            try:
                target(*args)
            finally:
                self.buttons_idle()

        self._thread = threading.Thread(target=guarded, daemon=True, name=name)
        self._thread.start()

    def buttons_idle(self) -> None:
        """Run enabled, Stop disabled: nothing is running."""
        self.run_button.disabled, self.stop_button.disabled = False, True

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread (``timeout`` seconds at most); True when it has ended."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.busy

    @staticmethod
    def stop_in_background(run) -> None:
        """``run.stop()`` on a thread of its own: the caller (a button) returns at once."""
        threading.Thread(target=run.stop, name="gpututor-stop", daemon=True).start()

    @staticmethod
    def follow(run, draw: Callable[[], None], ready: Callable[[], bool] = lambda: False,
               on_record: Callable[[dict], None] | None = None,
               interval: float = UPDATE_INTERVAL_S) -> None:
        """Iterate ``run``'s records until it ends (``RunFailed`` propagates), calling
        ``on_record`` for each; ``draw()`` at once the first time ``ready()`` is true (the first
        complete step: the learner is waiting for it), else at most every ``interval`` s."""
        last, readied = 0.0, False
        for record in run:
            if on_record is not None:
                on_record(record)
            now_ready = not readied and ready()
            if now_ready or time.monotonic() - last >= interval:
                draw()
                last, readied = time.monotonic(), readied or now_ready
