"""What a rank prints reaches the notebook and the command line, prefixed with the rank.

In a rank started by :func:`gpututor.launch`, ``sys.stdout`` and ``sys.stderr`` become
:class:`RankOutput` streams: each line goes to the parent over the rank's record pipe (warnings too:
``warnings`` writes to ``sys.stderr``). Output that C++ code writes straight to the file
descriptors (a library's own warnings) is not caught. A rank that floods output is throttled, not
blocked: past a budget of bytes per second its lines are dropped and counted, and the count is
sent once the budget has refilled, so training never waits for a notebook to draw text.

A rank's Python stack can also be asked for: :func:`dump_stack_on_request` makes ``SIGUSR1``
write it to a file the parent reads when it reports that the rank stopped answering.
"""
from __future__ import annotations

import faulthandler
import io
import signal
import threading
import time

RATE_BYTES_PER_S = 20_000
BURST_BYTES = 100_000
STACK_SIGNAL = signal.SIGUSR1


class RecordPipe:
    """A rank's own pipe to the kernel: ``put(message)`` sends one message, whole.

    One pipe per rank, written by this rank only: a lock of this process keeps the threads that
    print from interleaving a message (no named semaphore shared between processes, none left in
    /dev/shm), and a rank killed in the middle of a message is, for the kernel, the end of this
    rank's pipe and of nothing else."""

    def __init__(self, writer):
        self._writer, self._lock = writer, threading.Lock()

    def put(self, message) -> None:
        with self._lock:
            self._writer.send(message)


class RankOutput(io.TextIOBase):
    """A text stream that sends whole lines to ``records`` (a :class:`RecordPipe`) as
    ``("output", rank, {...})``."""

    def __init__(self, records, rank: int, stream: str, rate: float = RATE_BYTES_PER_S,
                 burst: float = BURST_BYTES):
        self.records, self.rank, self.stream = records, rank, stream
        self.rate, self.burst, self.tokens, self.refilled = rate, burst, burst, time.monotonic()
        self.dropped_lines = self.dropped_bytes = 0
        self._buffer, self._lock = "", threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            self._buffer += text
            *lines, self._buffer = self._buffer.split("\n")
            for line in lines:
                self._send(line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._buffer:
                self._send(self._buffer)
                self._buffer = ""
            self._report_dropped()

    def _send(self, line: str) -> None:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.refilled) * self.rate)
        self.refilled = now
        size = len(line) + 1
        if size > self.tokens:
            self.dropped_lines += 1
            self.dropped_bytes += size
            return
        self.tokens -= size
        self._report_dropped()
        self.records.put(("output", self.rank, {"stream": self.stream, "text": line}))

    def _report_dropped(self) -> None:
        if self.dropped_lines:
            self.records.put(("output", self.rank, {"stream": self.stream, "text": (
                f"[{self.dropped_lines} lines ({self.dropped_bytes:,} bytes) of this rank's "
                f"output dropped: more than {self.rate:,.0f} bytes/s]")}))
            self.dropped_lines = self.dropped_bytes = 0


def dump_stack_on_request(path: str):
    """On ``SIGUSR1``, write every thread's Python stack to ``path`` (returns the open file)."""
    target = open(path, "w")   # kept open for the rank's life: faulthandler writes to its fd
    faulthandler.register(STACK_SIGNAL, file=target, all_threads=True, chain=False)
    return target


def main_thread_stack(text: str) -> list[str]:
    """The frames (innermost first) of the thread that received the signal (the rank's main
    thread), from faulthandler's dump."""
    frames, current = [], False
    for line in text.splitlines():
        if line.startswith("Current thread"):
            current = True
        elif line.startswith("Thread "):
            current = False
        elif current and line.strip().startswith("File "):
            frames.append(line.strip())
    return frames
