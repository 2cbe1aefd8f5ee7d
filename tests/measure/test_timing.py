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
