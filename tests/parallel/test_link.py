"""The emulated link is one channel: transfers that arrive together take turns on it.

gloo runs a future's callbacks on its worker threads (two by default), so two buckets of DDP or
of the bucketed version can reach the link's delay at once; the link must queue the second
behind the first (their delays add up), not sleep through both at the same time."""
import threading
import time

import pytest
import torch

from gpututor.measure.timing import CommMeter
from gpututor.parallel.link import EmulatedLink

# 1 MB/s and 50 ms per message: on 2 ranks an all-reduce is 2 x (50 ms + S / 2 MB/s)
LINK = dict(bandwidth=1e6, latency=0.05)
SIZES = (100_000, 200_000)          # 0.2 s and 0.3 s of link time


def test_occupy_queues_each_transfer_behind_the_one_on_the_link():
    link = EmulatedLink(**LINK)
    now = time.monotonic()
    first = link.occupy(1.0)
    second = link.occupy(2.0)              # arrives while the first is on the link
    assert first >= now + 1.0
    assert second == pytest.approx(first + 2.0)   # starts when the first ends, not now
    later = EmulatedLink(**LINK)           # every link has its own clock
    assert later.occupy(1.0) < second


def test_two_transfers_from_two_threads_take_the_sum_of_their_times():
    """Two threads, as gloo's two workers, delay one transfer each at the same moment: together
    they take at least the sum of their times, where two channels would take the longer one
    (sleep never returns early: a lower bound, not a race)."""
    link, meter = EmulatedLink(**LINK), CommMeter()
    seconds = [link.allreduce_seconds(n, 2) for n in SIZES]
    ended, start = {}, threading.Barrier(len(SIZES))

    def transfer(index):
        start.wait()
        link.delay_allreduce(SIZES[index], 2, meter)
        ended[index] = time.monotonic()

    began = time.monotonic()
    threads = [threading.Thread(target=transfer, args=(i,)) for i in range(len(SIZES))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert max(ended.values()) - began >= sum(seconds) * 0.999
    assert meter.emulated_s == pytest.approx(sum(seconds))   # link time, not time queued


def test_futures_completed_on_two_threads_are_delayed_one_after_the_other():
    """The same through ``then_delay``, the path DDP's hook and the bucketed version take: two
    futures completed by two threads at once; the later delayed one completes no earlier than
    the sum of their link times after they started."""
    link, meter = EmulatedLink(**LINK), CommMeter()
    seconds = [link.allreduce_seconds(n, 2) for n in SIZES]
    sources = [torch.futures.Future() for _ in SIZES]
    ended = {}
    delayed = [link.then_delay(f, n, 2, meter).then(
        lambda fut, i=i: ended.setdefault(i, time.monotonic())) for i, (f, n) in
        enumerate(zip(sources, SIZES))]
    start = threading.Barrier(len(SIZES))
    began = time.monotonic()

    def complete(i):
        start.wait()
        sources[i].set_result(torch.ones(1))

    threads = [threading.Thread(target=complete, args=(i,)) for i in range(len(SIZES))]
    for t in threads:
        t.start()
    for f in delayed:
        f.wait()
    for t in threads:
        t.join()
    assert max(ended.values()) - began >= sum(seconds) * 0.999


def test_then_delay_returns_at_once_for_a_future_already_completed():
    """NCCL completes its futures when the work is queued, so DDP's comm hook gets a completed
    one: the hook must return at once (backward goes on) and the delay run elsewhere, or every
    bucket would stall backward. A completed future, here on the CPU, stands for it."""
    link, meter = EmulatedLink(**LINK), CommMeter()
    seconds = link.allreduce_seconds(SIZES[1], 2)          # 0.3 s
    done = torch.futures.Future()
    done.set_result(torch.ones(1))
    began = time.monotonic()
    delayed = link.then_delay(done, SIZES[1], 2, meter)
    returned = time.monotonic() - began
    assert returned < seconds / 10, f"then_delay took {returned:.3f} s to return"
    assert not delayed.done()
    assert torch.equal(delayed.wait(), torch.ones(1))
    assert time.monotonic() - began >= seconds * 0.999
    assert meter.emulated_s == pytest.approx(seconds)


def test_then_delay_passes_the_collectives_error_on():
    link, meter = EmulatedLink(**LINK), CommMeter()
    failed = torch.futures.Future()
    failed.set_exception(RuntimeError("the peer closed the connection"))
    with pytest.raises(RuntimeError, match="the peer closed the connection"):
        link.then_delay(failed, SIZES[0], 2, meter).wait()
