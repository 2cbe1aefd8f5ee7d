"""An *emulated* interconnect: make each collective take as long as it would on a slower link.

On a laptop the "devices" are processes sharing memory, so communication is nearly free and
data parallel looks better than it would on real hardware. With ``RunSpec.options``
``link_gbps`` (bandwidth, GB/s per direction) and ``link_latency_us``, every collective that a
data-parallel strategy starts is delayed, after it really completes, by the time the ring
algorithm needs on such a link (the α-β cost model of Thakur et al. 2005, "Optimization of
collective communication operations in MPICH" [ref: thakur2005-cost-model]; the ring's 2(n-1)
steps of S/n bytes [ref: patarasuk2009-ring]):

    all-reduce of S bytes on n ranks:  2(n-1) · (α + S / (n·B))

(B: the bandwidth, bytes per second; Thakur et al. write a message as α + nβ, β = 1/B.)

A rank's link is **one channel**: transfers take turns on it. DDP's comm hooks and the bucketed
version hand each bucket's delay to a thread of its own (:meth:`EmulatedLink.then_delay`), so
backward goes on meanwhile and two buckets can reach the link at the same moment; each transfer
is queued behind the one still on the link (a "busy until" time, :meth:`EmulatedLink.occupy`),
so two buckets take the sum of their times, not the longer one.

Measured numbers stay measured: the record's ``comm_busy_s`` is the real time plus exactly this
delay, and ``emulated_comm_s`` says how much of it was added. Plots label such runs "emulated".

**One scaling rule for every lesson** (01b's offload link, 02's and 04's collectives):
:func:`scaled_link` takes a link of the catalogue (``gpututor.catalog.LINKS``: its bandwidth and
latency, one home) and stretches *both* by the ratio of the reference system's achieved FLOP/s
(:data:`REFERENCE`, :func:`reference_flops`) to the FLOP/s one rank of *this* machine achieved
in a real training step of the lesson's model (a 1-rank run's ``achieved_flops``: achieved
against achieved, never a peak against an achieved rate). A byte and a message then cost as many
FLOPs here as they do there, so small (latency-bound) and large (bandwidth-bound) messages keep
their real weight against compute.
"""
from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field

import torch

from .. import checks
from ..catalog import get_gpu, get_link
from ..formulas import collective_seconds, ring_allreduce_seconds

# The real system an emulated link stands for: an A100 at 40 % of its bf16 peak (datasheet
# peak: gpututor.catalog). 40 % is this project's assumption of a well-tuned large training run:
# PaLM reports 46.2 % MFU (Chowdhery et al. 2022, §4.1) [ref: chowdhery2022-mfu] and
# Megatron-LM 52 % of the A100's peak on 3072 GPUs (Narayanan et al. 2021, abstract)
# [ref: narayanan2021-throughput].
REFERENCE = {"gpu": "A100-80GB", "precision": "bf16", "fraction_of_peak": 0.4}


class _LinkClock:
    """When the link is free again (``time.monotonic()``), guarded by a lock: the callbacks that
    delay transfers run on several threads."""

    def __init__(self):
        self.lock, self.busy_until = threading.Lock(), 0.0


@dataclass(frozen=True)
class EmulatedLink:
    bandwidth: float   # bytes per second, per direction
    latency: float     # seconds per message (α)
    clock: _LinkClock = field(default_factory=_LinkClock, compare=False, repr=False)

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

    def send_seconds(self, nbytes: int) -> float:
        """One point-to-point message of ``nbytes``: ``α + S/B`` (B: :attr:`bandwidth`)."""
        return collective_seconds("send", nbytes, 2, self.bandwidth, self.latency)

    def options(self) -> tuple:
        """The ``RunSpec.options`` that make a run's collectives wait for this link."""
        return (("link_gbps", self.bandwidth / 1e9), ("link_latency_us", self.latency * 1e6))

    def occupy(self, seconds: float) -> float:
        """Put a transfer of ``seconds`` on the link, after the ones already on it, and return
        when it ends (``time.monotonic()``): transfers serialize on one channel."""
        with self.clock.lock:
            start = max(time.monotonic(), self.clock.busy_until)
            self.clock.busy_until = start + seconds
            return self.clock.busy_until

    def delay_allreduce(self, nbytes: int, world: int, meter, device=None) -> None:
        """Once the all-reduce just issued on ``device`` has really completed, wait until the
        emulated link has carried it (after any transfer already on the link: :meth:`occupy`);
        record the link time it added (``allreduce_seconds``, not the time spent queueing).

        The blocking form, for a caller that waits for its collective anyway (the naive
        version, tensor parallel). On CUDA, NCCL's collectives return when the work is queued,
        not done: the current stream, which waits for the collective, is synchronised first, so
        the delay comes after the real transfer and the caller waits through it (nothing more
        is queued until the sleep ends). On CPU (gloo) the work is done already."""
        if device is not None and torch.device(device).type == "cuda":
            torch.cuda.current_stream(device).synchronize()
        self._carry(nbytes, world, meter)

    def _carry(self, nbytes: int, world: int, meter) -> None:
        """Occupy the link for one ring all-reduce of ``nbytes`` and sleep until it ends."""
        seconds = self.allreduce_seconds(nbytes, world)
        ends = self.occupy(seconds)
        with self.clock.lock:       # two transfers may add at once
            meter.emulated_s += seconds
        time.sleep(max(0.0, ends - time.monotonic()))

    def then_delay(self, future: torch.futures.Future, nbytes: int, world: int, meter,
                   device=None):
        """A future that completes once the link has carried ``future``'s work on ``device``:
        ``allreduce_seconds`` after that work is done, or after the transfer ahead of it on the
        link, whichever is later.

        The delay runs on a thread of its own (one per transfer; :meth:`occupy` queues them on
        the one channel), never in the caller: NCCL completes its futures when the work is
        queued, and a ``then`` callback on a completed future runs at once in the thread that
        adds it, which in DDP's comm hook is backward's. A delay there would stall backward for
        every bucket, so nothing emulated could overlap it. Here the hook returns at once and
        backward goes on while the link carries the bucket; whoever waits for the returned
        future (DDP at the end of backward) waits for the link. On CUDA the link's thread
        waits, on a stream of its own, for the collective's work before the delay starts."""
        cuda = device is not None and torch.device(device).type == "cuda"
        delayed = _device_future(device) if cuda else torch.futures.Future()

        def carry(fut):
            try:
                with _link_stream(fut, device) if cuda else contextlib.nullcontext():
                    self._carry(nbytes, world, meter)
                    delayed.set_result(fut.value())
            except BaseException as error:   # the waiter sees it, not a dead thread
                delayed.set_exception(error)

        future.add_done_callback(lambda fut: threading.Thread(
            target=carry, args=(fut,), name="gpututor-emulated-link", daemon=True).start())
        return delayed


def _device_future(device) -> torch.futures.Future:
    """A future that may hold tensors on ``device`` (a CUDA one: its waiters' streams wait for
    the stream its result was set on)."""
    return torch.futures.Future(devices=[torch.device(device)])


@contextlib.contextmanager
def _link_stream(future: torch.futures.Future, device):
    """On the link's thread: make ``device`` current and a side stream of its own current (so
    as not to wait for backward's compute too), block until ``future``'s CUDA work is done
    (``wait()`` makes the current stream wait for it; then that stream is synchronised), and
    stay on that stream while the delay runs and the result is set (its events, recorded on
    this stream, are then already complete)."""
    device = torch.device(device)
    with torch.cuda.device(device):
        stream = torch.cuda.Stream(device)
        with torch.cuda.stream(stream):
            future.wait()
            stream.synchronize()
            yield


LINK_OPTIONS = {
    "link_gbps": checks.number_in(1e-6, 10_000),
    "link_latency_us": checks.number_in(0, 1e6),
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


def reference_flops() -> float:
    """The achieved FLOP/s of :data:`REFERENCE`: its datasheet peak times the fraction."""
    return get_gpu(REFERENCE["gpu"]).peak(REFERENCE["precision"]) * REFERENCE["fraction_of_peak"]


def scaled_link(name: str, here_flops: float) -> EmulatedLink:
    """The catalogue's link ``name`` as this machine should feel it: bandwidth divided and latency
    multiplied by ``reference_flops() / here_flops`` (``here_flops``: the FLOP/s one rank here
    achieved in a training step, e.g. a 1-rank run's ``achieved_flops``)."""
    checks.number_where("here_flops", here_flops, lambda v: v > 0, "the FLOP/s a rank here "
                        "achieved (> 0), e.g. a 1-rank run's summary['achieved_flops']")
    real, reference = get_link(name), reference_flops()
    return EmulatedLink(equivalent_bandwidth(reference, real.bandwidth, here_flops),
                        equivalent_latency(reference, real.latency, here_flops))
