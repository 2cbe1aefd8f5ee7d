"""An *emulated* interconnect: make each collective take as long as it would on a slower link.

On a laptop the "devices" are processes sharing memory, so communication is nearly free and
data parallel looks better than it would on real hardware. With ``RunSpec.options``
``link_gbps`` (bandwidth, GB/s per direction) and ``link_latency_us``, every collective that a
data-parallel strategy starts is delayed, after it really completes, by the time the ring
algorithm needs on such a link (the α-β model, e.g. Thakur et al. 2005, "Optimization of
collective communication operations in MPICH"):

    all-reduce of S bytes on n ranks:  2(n-1) · (α + S / (n·β))

Measured numbers stay measured: the record's ``comm_busy_s`` is the real time plus exactly this
delay, and ``emulated_comm_s`` says how much of it was added. Plots label such runs "emulated".
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ..formulas import ring_allreduce_seconds


@dataclass(frozen=True)
class EmulatedLink:
    bandwidth: float   # bytes per second, per direction
    latency: float     # seconds per message (α)

    @classmethod
    def from_spec(cls, spec) -> "EmulatedLink | None":
        gbps = spec.option("link_gbps")
        if gbps is None:
            return None
        return cls(float(gbps) * 1e9, float(spec.option("link_latency_us", 10.0)) * 1e-6)

    def allreduce_seconds(self, nbytes: int, world: int) -> float:
        """Ring all-reduce time: n-1 reduce-scatter steps and n-1 all-gather steps
        (``gpututor.formulas.ring_allreduce_seconds``)."""
        return ring_allreduce_seconds(nbytes, world, self.bandwidth, self.latency)

    def delay_allreduce(self, nbytes: int, world: int, meter, device=None) -> None:
        """Once the all-reduce just issued on ``device`` has really completed, sleep as long as
        the emulated link needs for it; record the addition.

        On CUDA, NCCL's collectives (and their futures' callbacks) return when the work is
        queued, not done: the current stream, which waits for the collective, is synchronised
        first, so the delay comes after the real transfer and the device waits through it
        (nothing more is queued until the sleep ends). On CPU (gloo) the work is done already."""
        if device is not None and torch.device(device).type == "cuda":
            torch.cuda.current_stream(device).synchronize()
        seconds = self.allreduce_seconds(nbytes, world)
        time.sleep(seconds)
        meter.emulated_s += seconds

    def then_delay(self, future: torch.futures.Future, nbytes: int, world: int, meter,
                   device=None):
        """A future that completes ``allreduce_seconds`` after ``future``'s work on ``device``
        does (inside a ``then`` callback the current stream waits for that work: torch.futures
        docs)."""
        def wait(fut):
            self.delay_allreduce(nbytes, world, meter, device)
            return fut.value()
        return future.then(wait)

LINK_OPTIONS = {
    "link_gbps": lambda v: isinstance(v, (int, float)) and 1e-6 <= v <= 10_000,
    "link_latency_us": lambda v: isinstance(v, (int, float)) and 0 <= v <= 1e6,
}
LINK_ALLOWED = {"link_gbps": "GB/s in [1e-6, 10000]", "link_latency_us": "µs in [0, 1e6]"}


def equivalent_bandwidth(device_flops: float, link_bytes_per_s: float, here_flops: float) -> float:
    """The link bandwidth that gives *this* machine the compute-to-communication ratio a real
    device has on a real link: FLOP per byte stays the same, so both scale by here/device."""
    return link_bytes_per_s * here_flops / device_flops


def equivalent_latency(device_flops: float, latency_s: float, here_flops: float) -> float:
    """The per-message latency that costs *this* machine as many FLOPs as ``latency_s`` costs the
    real device: time stretches by device/here (the inverse of the bandwidth's scaling), so a
    latency-bound message weighs as much against compute here as it does there."""
    return latency_s * device_flops / here_flops
