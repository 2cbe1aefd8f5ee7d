"""DeviceMark: spans on the device's own timeline. On CUDA (mocked here) two events on the
stream, read only when asked, never a host clock around work the host merely queued."""
from __future__ import annotations

import time

import pytest
import torch

from gpututor.measure.timing import DeviceMark


class FakeEvent:
    """Records when the 'device' reaches it: here a time set by the test, not the host clock."""
    device_now = 0.0
    made = []

    def __init__(self, enable_timing=False):
        assert enable_timing
        self.at, self.synced = None, False
        FakeEvent.made.append(self)

    def record(self):
        self.at = FakeEvent.device_now

    def synchronize(self):
        self.synced = True

    def elapsed_time(self, other):   # milliseconds, as torch.cuda.Event
        return (other.at - self.at) * 1e3


def test_cuda_marks_read_events_on_the_device_timeline(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    FakeEvent.device_now = 1.0
    start = DeviceMark(torch.device("cuda", 0))
    FakeEvent.device_now = 1.25          # the device got there 0.25 s later; the host, at once
    end = DeviceMark(torch.device("cuda", 0))
    assert end.seconds_since(start) == pytest.approx(0.25)
    assert end.event.synced and not start.event.synced   # waits for the later event only


def test_cpu_marks_are_the_host_clock():
    start = DeviceMark(torch.device("cpu"))
    time.sleep(0.02)
    assert DeviceMark(torch.device("cpu")).seconds_since(start) >= 0.02


def test_phases_on_cuda_wait_for_nothing_until_read(monkeypatch):
    """A phase boundary must not synchronize (that removes the overlap DDP and FSDP show):
    on CUDA the phases are marks, read once when the step has finished."""
    from gpututor.config import RunSpec
    from gpututor.measure.timing import StepContext
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: pytest.fail("synchronized"))
    ctx = StepContext(RunSpec(device="cpu"), 0, 1, torch.device("cuda", 0))
    ctx.reset()
    FakeEvent.device_now = 0.0
    with ctx.phase("forward"):
        FakeEvent.device_now = 0.1
    with ctx.phase("backward"):
        FakeEvent.device_now = 0.3
    assert ctx.phases == {}                          # nothing read, nothing waited for
    assert ctx.read_phases() == pytest.approx({"forward": 0.1, "backward": 0.2})


def test_phases_on_cpu_are_read_at_once():
    from gpututor.config import RunSpec
    from gpututor.measure.timing import StepContext
    ctx = StepContext(RunSpec(device="cpu"), 0, 1, torch.device("cpu"))
    ctx.reset()
    with ctx.phase("forward"):
        time.sleep(0.01)
    assert ctx.phases["forward"] >= 0.01


class FakeWork:
    """An async collective's handle whose future runs its callbacks when the test says."""

    def __init__(self):
        self.callbacks = []

    def get_future(self):
        return self

    def then(self, callback):
        self.callbacks.append(callback)

    def complete(self):
        for callback in self.callbacks:
            callback(self)


def streams(monkeypatch, current: str):
    """torch.cuda's streams, faked: the current one is "default" or a side stream."""
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: current)
    monkeypatch.setattr(torch.cuda, "default_stream", lambda device=None: "default")


def test_cuda_collective_timer_sync_is_waited_async_is_not_known(monkeypatch):
    from gpututor.measure.timing import CollectiveTimer, CommMeter
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    streams(monkeypatch, "default")
    meter = CommMeter(world_size=2)
    timer = CollectiveTimer(meter, torch.device("cuda", 0))
    FakeEvent.device_now = 0.0

    def blocking():
        FakeEvent.device_now = 0.5   # the stream waited for it
    timer.run("all_reduce", 100, blocking)
    timer.flush()
    assert meter.busy_s == pytest.approx(0.5) and meter.exposed_s == pytest.approx(0.5)
    assert not meter.exposed_unknown

    work = FakeWork()
    timer.run("all_gather", 100, lambda: work)
    FakeEvent.device_now = 0.8
    work.complete()              # its callback marks the end on the device timeline
    FakeEvent.device_now = 2.0   # later host time does not count
    timer.flush()
    assert meter.busy_s == pytest.approx(0.5 + 0.3)
    assert meter.exposed_unknown   # how much compute waited for it: not measured -> comm_s None


def test_a_blocking_collective_on_a_side_stream_overlaps_compute(monkeypatch):
    """FSDP2 issues its all-gathers and reduce-scatters synchronously but on its own streams:
    only that stream waits, so the collective's time is busy time and how much compute waited
    for it is not known (comm_s None), never counted as all waited-for."""
    from gpututor.measure.timing import CollectiveTimer, CommMeter
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    streams(monkeypatch, "fsdp all-gather stream")
    meter = CommMeter(world_size=2)
    timer = CollectiveTimer(meter, torch.device("cuda", 0))
    FakeEvent.device_now = 0.0

    def blocking():
        FakeEvent.device_now = 0.5
    timer.run("all_gather", 100, blocking)
    timer.flush()
    assert meter.busy_s == pytest.approx(0.5) and meter.exposed_s == 0.0
    assert meter.exposed_unknown
