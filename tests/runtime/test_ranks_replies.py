"""Persistent ranks: every reply names its request, so no reply is ever taken for another
request's; ``gather`` reads every rank's reply before it raises; the ceiling on how many ranks a
group may have here; a cell's output kept within its limit while it is written. (``%ranks
start``'s checks before the live group stops: test_ranks.py, beside the other magics.)"""
from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from multiprocessing import Pipe
from types import SimpleNamespace

import pytest
import torch

import gpututor
from gpututor.runtime.ranks import checks
from gpututor.runtime.ranks.replies import replies

SLOW = ("import time\n"
        "class Slow:   # pickling it takes a while: the rank is busy sending it\n"
        "    def __reduce__(self):\n"
        "        time.sleep({seconds})\n"
        "        return (int, ())\n")




def test_a_value_no_rank_can_send_names_every_rank_and_later_cells_get_their_own_replies():
    """The issue's reproduction: gather raised on rank 0's reply and left rank 1's in its pipe,
    and from then on every run() showed the output of the request before it."""
    with gpututor.ranks(2) as g:
        g.run("import threading; lock = threading.Lock()")
        with pytest.raises(RuntimeError) as failed:
            g.gather("lock")
        message = str(failed.value)
        assert message.startswith("Could not gather 'lock': rank 0: its value cannot be sent (")
        assert "; rank 1: its value cannot be sent (" in message
        assert message.count("cannot pickle '_thread.lock' object") == 2
        assert "restarted" not in message and g.names[1] == ["lock", "threading"]
        for code, values in [("rank", ["0", "1"]), ("rank + 10", ["10", "11"]),
                             ("'x' * (rank + 1)", ["'x'", "'xx'"])]:
            assert [o.value for o in g.run(code).outcomes] == values
        assert g.gather("rank") == [0, 1]


def test_a_reply_left_in_a_ranks_pipe_is_read_and_dropped_by_the_next_request():
    with gpututor.ranks(2) as g:
        g.run("x = rank")
        g._conns[0].send_bytes(pickle.dumps(("get", 999, "x")))   # a request nobody waits for
        assert g._conns[0].poll(60)                                 # its reply is in the pipe
        assert [o.value for o in g.run("x + 5").outcomes] == ["5", "6"]
        assert not g._conns[0].poll(0)
        assert g.gather("x") == [0, 1]


class SilentRank:
    """A rank's process as ``replies`` sees it: alive (its sentinel never becomes ready)."""

    def __init__(self):
        self.sentinel, self._write_end = os.pipe()
        self.exitcode = None

    def join(self, timeout=None) -> None:
        pass

    def close(self) -> None:
        os.close(self.sentinel), os.close(self._write_end)


def test_a_reply_that_arrives_after_its_request_timed_out_is_dropped():
    ours, theirs = Pipe()
    rank = SilentRank()
    try:
        pending = {0}
        assert list(replies([ours], [rank], pending, 1, time.monotonic() + 0.2)) == []
        assert pending == {0}                                 # request 1 timed out
        theirs.send_bytes(pickle.dumps(("done", 1, "late")))   # ... and its reply comes now
        theirs.send_bytes(pickle.dumps(("done", 2, "fresh")))
        pending = {0}
        got = list(replies([ours], [rank], pending, 2, time.monotonic() + 30))
        assert got == [(0, ("done", 2, "fresh"))] and pending == set() and not ours.poll(0)
        theirs.send_bytes(pickle.dumps(("died", None, "it exited with code 9")))
        pending = {0}   # a death ends any request
        assert list(replies([ours], [rank], pending, 3, time.monotonic() + 30)) == [
            (0, ("died", None, "it exited with code 9"))]
    finally:
        ours.close(), theirs.close(), rank.close()


def test_a_rank_that_dies_during_gather_restarts_the_group_naming_the_lost_names():
    with gpututor.ranks(2) as g:
        pids = list(g.pids)
        g.run("import os\nclass Die:\n    def __reduce__(self):\n        os._exit(5)\n"
              "value = Die() if rank == 0 else 41")
        with pytest.raises(RuntimeError) as failed:
            g.gather("value")
        message = str(failed.value)
        assert message.startswith("Could not gather 'value': rank 0: it died (it exited with "
                                  "code 5).")
        assert "rank 1" not in message.split("\n")[0]   # rank 1 sent its value
        assert "The group was restarted (2 fresh ranks" in message
        assert "Lost: rank 0: Die, os, value; rank 1: Die, os, value" in message
        assert set(g.pids).isdisjoint(pids) and g.names == {0: [], 1: []}
        assert [o.value for o in g.run("rank").outcomes] == ["0", "1"]


def test_a_gather_that_times_out_restarts_the_group_saying_which_ranks_did_not_answer():
    with gpututor.ranks(2) as g:
        g.run(SLOW.format(seconds=20) + "value = Slow() if rank == 1 else 40")
        with pytest.raises(RuntimeError) as failed:
            g.gather("value", timeout=1)
        message = str(failed.value)
        assert message.startswith("Could not gather 'value': rank 1: no answer within 1 s.")
        assert "Lost: rank 0: Slow, time, value; rank 1: Slow, time, value" in message
        assert [o.value for o in g.run("rank").outcomes] == ["0", "1"]
    with pytest.raises(ValueError, match=r"timeout=0 is invalid: allowed is seconds in"):
        g.gather("value", timeout=0)


def test_an_interrupt_during_gather_restarts_the_group(interruptible):
    with gpututor.ranks(2) as g:
        g.run(SLOW.format(seconds=60) + "value = Slow()")
        timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt) as stopped:
            g.gather("value", timeout=120)
        timer.join()
        message = str(stopped.value)
        assert message.startswith("Interrupted while the ranks were sending 'value'.")
        assert "Lost: rank 0: Slow, time, value; rank 1: Slow, time, value" in message
        assert [o.value for o in g.run("rank").outcomes] == ["0", "1"]


def test_the_ceiling_on_cpu_ranks_is_four_per_usable_core(monkeypatch):
    assert checks.cpu_ceiling() == 4 * gpututor.hardware.usable_cpu_cores()
    monkeypatch.setattr(checks, "usable_cpu_cores", lambda: 1)
    with pytest.raises(ValueError, match=r"world_size=5 is invalid on CPU here \(this process may "
                                         r"use 1 core\(s\), .*\): allowed is 1 to 4$"):
        gpututor.ranks(5, device="cpu")
    assert checks.check_group(4, device="cpu")[1] == "cpu"   # 4 on one core: allowed
    monkeypatch.setattr(checks, "usable_cpu_cores", lambda: 2)
    with pytest.raises(ValueError, match=r"world_size=9 is invalid on CPU here .*: allowed is 1 "
                                         r"to 8$"):
        gpututor.ranks(9, device="cpu")


def test_on_cuda_a_group_has_at_most_one_rank_per_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(ValueError, match=r"world_size=3 is invalid with device='cuda': this "
                                         r"machine has 2 GPU\(s\)"):
        gpututor.ranks(3, device="cuda")
    monkeypatch.setattr(checks, "usable_cpu_cores", lambda: 2)   # auto: 3 ranks go to the CPU
    assert checks.check_group(3, device="auto")[1] == "cpu"


def test_a_cell_that_prints_50_mb_keeps_at_most_the_output_limit_while_it_runs():
    """Run in this process, as a rank runs it: the kept text stays within OUTPUT_LIMIT while the
    cell prints (before, every write was kept and the cap applied only when sending)."""
    import tracemalloc
    from gpututor.runtime.ranks.rank import OUTPUT_LIMIT, run_cell
    code = "for i in range(50):\n    print(chr(65 + i % 26) * 1_000_000)"   # 50 distinct MB
    interrupts = SimpleNamespace(busy=False, raised=False)
    tracemalloc.start()
    try:
        reply = run_cell(code, 1, {}, False, interrupts)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reply["error"] is None
    assert peak < 10_000_000, f"{peak:,} bytes at the peak"   # one line at a time, not 50 MB
    text = reply["text"]
    assert text[0] == ("stdout", "A" * OUTPUT_LIMIT)
    assert text[1:] == [("stderr", f"\n[{50 * 1_000_001 - OUTPUT_LIMIT:,} characters of output "
                                   "not shown]\n")]
