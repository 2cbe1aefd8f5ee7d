"""What hardware offers: GPUs (memory, peak FLOP/s, memory bandwidth) and links between them.

Every number carries its source. Peaks are *dense* (no structured sparsity): NVIDIA's
datasheets print the sparse figure for Ampere and later with a footnote, so we halve it and say
so. Link bandwidths are per GPU and per direction (what one rank can send while it receives as
much), the quantity the ring formulas of ``gpututor.formulas`` need.

Latencies (α) are not datasheet values: they are an assumed order of magnitude for one message
of a collective; measure yours with ``python -m gpututor bench comm`` and pass it in.

Add your own device, link or price with :func:`add_gpu`, :func:`add_link`, :func:`set_price`
(they go into the tables below, for this process).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from . import checks
from .checks import InvalidValue

GB = 1e9     # the planner's unit, as in the ZeRO paper and datasheets: 10^9 bytes
TFLOPS = 1e12


@dataclass(frozen=True)
class GPU:
    """One accelerator. FLOP/s are dense peaks; ``None`` where the format is not supported."""

    name: str
    memory_bytes: float
    peak_flops: dict            # precision ("fp32", "bf16", "fp16", "fp8") -> dense FLOP/s or None
    memory_bandwidth: float     # bytes/s
    links: tuple                # names in LINKS this GPU typically has
    source: str
    price_per_hour: Optional[float] = None   # per GPU-hour, in price_currency, only if you set one
    price_source: str = ""
    price_currency: str = "USD"
    cuda_names: tuple = ()      # exactly what torch.cuda.get_device_name() reports for it

    def peak(self, precision: str) -> float:
        """Dense peak FLOP/s for ``precision``; ValueError if this GPU has no such format."""
        checks.choice("precision", precision, tuple(self.peak_flops))
        value = self.peak_flops[precision]
        if value is None:
            supported = [p for p, v in self.peak_flops.items() if v]
            why = FP8_NOT_LISTED.get(self.name) if precision == "fp8" else None
            raise InvalidValue("precision", precision, supported,
                               f"on gpu={self.name!r}: " + (why or f"it has no {precision} units"))
        return value


@dataclass(frozen=True)
class Link:
    """An interconnect: bandwidth per GPU per direction (bytes/s) and per-message latency."""

    name: str
    bandwidth: float
    latency: float
    source: str


def _gpu(name, memory_gb, fp32, bf16, fp16, bandwidth_gbs, links, source, cuda_names=(),
         fp8=None) -> GPU:
    peaks = {"fp32": fp32 * TFLOPS, "bf16": bf16 and bf16 * TFLOPS, "fp16": fp16 * TFLOPS,
             "fp8": fp8 and fp8 * TFLOPS}
    return GPU(name, memory_gb * GB, peaks, bandwidth_gbs * GB, tuple(links), source,
               cuda_names=tuple(cuda_names))


GPUS: dict[str, GPU] = {g.name: g for g in (
    _gpu("V100-32GB", 32, 15.7, None, 125, 900, ("nvlink2", "pcie3"),
         "NVIDIA Tesla V100 datasheet (SXM2): FP32 15.7, tensor FP16 125 TFLOPS, 32 GB HBM2 "
         "at 900 GB/s; no bf16",
         ("Tesla V100-SXM2-32GB",)),
    _gpu("A100-40GB", 40, 19.5, 312, 312, 1555, ("nvlink3", "pcie4"),
         "NVIDIA A100 Tensor Core GPU datasheet (SXM 40GB): FP32 19.5, BF16/FP16 tensor 312 "
         "TFLOPS dense (624 with sparsity), HBM2 1,555 GB/s",
         ("NVIDIA A100-SXM4-40GB",)),
    _gpu("A100-80GB", 80, 19.5, 312, 312, 2039, ("nvlink3", "pcie4"),
         "NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB): FP32 19.5, BF16/FP16 tensor 312 "
         "TFLOPS dense, HBM2e 2,039 GB/s",
         ("NVIDIA A100-SXM4-80GB",)),
    _gpu("H100-80GB", 80, 67, 989.5, 989.5, 3350, ("nvlink4", "pcie5"),
         "NVIDIA H100 Tensor Core GPU datasheet (SXM): FP32 67, BF16/FP16 tensor 1,979 TFLOPS "
         "with sparsity -> 989.5 dense, HBM3 3.35 TB/s; FP8 tensor 3,958 with sparsity -> "
         "1,979 dense",   # [ref: nvidia-h100-datasheet-sxm] [ref: nvidia-h100-datasheet-fp8]
         ("NVIDIA H100 80GB HBM3",), fp8=1979),
    _gpu("H100-PCIe-80GB", 80, 51, 756, 756, 2000, ("pcie5",),
         "NVIDIA H100 Tensor Core GPU datasheet (PCIe): FP32 51, BF16/FP16 tensor 1,513 TFLOPS "
         "with sparsity -> 756 dense, HBM2e 2 TB/s; FP8 tensor 3,026 with sparsity -> 1,513 "
         "dense",   # [ref: nvidia-h100-datasheet-fp8]
         ("NVIDIA H100 PCIe",), fp8=1513),
    _gpu("H200-141GB", 141, 67, 989.5, 989.5, 4800, ("nvlink4", "pcie5"),
         "NVIDIA H200 Tensor Core GPU datasheet (SXM): FP32 67, BF16/FP16 tensor 1,979 TFLOPS "
         "with sparsity -> 989.5 dense, 141 GB HBM3e at 4.8 TB/s; FP8 tensor 3,958 with "
         "sparsity -> 1,979 dense",   # [ref: nvidia-h200-datasheet-fp8]
         ("NVIDIA H200",), fp8=1979),
    _gpu("L4-24GB", 24, 30.3, 121, 121, 300, ("pcie4",),
         "NVIDIA L4 Tensor Core GPU datasheet: FP32 30.3, BF16/FP16 tensor 242 TFLOPS with "
         "sparsity -> 121 dense, 24 GB GDDR6 at 300 GB/s; PCIe Gen4 x16, no NVLink; FP8 "
         "tensor 485 with sparsity -> 242.5 dense",   # [ref: nvidia-l4-datasheet-fp8]
         ("NVIDIA L4",), fp8=242.5),
    _gpu("L40S-48GB", 48, 91.6, 362, 362, 864, ("pcie4",),
         "NVIDIA L40S datasheet: FP32 91.6, BF16/FP16 tensor 733 TFLOPS with sparsity -> 362 "
         "dense, 48 GB GDDR6 at 864 GB/s; PCIe Gen4 x16, no NVLink; FP8 tensor 1,466 with "
         "sparsity -> 733 dense",   # [ref: nvidia-l40s-datasheet-fp8]
         ("NVIDIA L40S",), fp8=733),
    _gpu("A10-24GB", 24, 31.2, 125, 125, 600, ("pcie4",),
         "NVIDIA A10 Tensor Core GPU datasheet: FP32 31.2, BF16/FP16 tensor 250 TFLOPS with "
         "sparsity -> 125 dense, 24 GB GDDR6 at 600 GB/s; PCIe Gen4 x16 (AWS's A10G is a "
         "different part with its own figures: pass --peak-flops for it)",
         ("NVIDIA A10",)),
    _gpu("T4-16GB", 16, 8.1, None, 65, 320, ("pcie3",),
         "NVIDIA T4 Tensor Core GPU datasheet: FP32 8.1, mixed FP16/FP32 65 TFLOPS, 16 GB "
         "GDDR6 at 320 GB/s; PCIe Gen3 x16; no bf16",
         ("Tesla T4",)),
    _gpu("RTX4090-24GB", 24, 82.6, 165.2, 165.2, 1008, ("pcie4",),
         "NVIDIA Ada Lovelace architecture whitepaper, RTX 4090: FP32 82.6, BF16/FP16 tensor "
         "with FP32 accumulate 165.2 TFLOPS dense, 24 GB GDDR6X at 1,008 GB/s; no NVLink",
         ("NVIDIA GeForce RTX 4090",)),
)}

# FP8 (float8_e4m3fn / e5m2 tensor cores): Hopper (H100, H200) and Ada (L4, L40S, RTX 4090)
# have them; Ampere (A100, A10), Volta (V100) and Turing (T4) do not [ref: nvidia-a100-whitepaper-formats]
# (their fp8 peak is None, and a plan in fp8 on them is refused, naming the GPU). The RTX 4090
# has FP8 units, but the tables we found disagree on its dense rate with FP32 accumulation
# (330.3 or 660.6 TFLOPS): it is left out, with this reason, rather than guessed.
FP8_NOT_LISTED = {"RTX4090-24GB": "it has FP8 units, but its dense FP8 rate with FP32 "
                                  "accumulation is not in the catalogue (tables disagree: 330.3 "
                                  "or 660.6 TFLOPS); give yours with add_gpu(..., peak_tflops="
                                  "{'fp8': ...})"}

_ALPHA = "latency: assumed order of magnitude, not a datasheet value"
LINKS: dict[str, Link] = {link.name: link for link in (
    Link("pcie3", 15.75 * GB, 10e-6, "PCIe 3.0 x16: 8 GT/s x 16 lanes, 128b/130b encoding = "
         f"15.75 GB/s per direction (PCI-SIG PCIe 3.0 base spec); {_ALPHA}"),
    Link("pcie4", 31.5 * GB, 10e-6, "PCIe 4.0 x16: 16 GT/s x 16 lanes = 31.5 GB/s per direction "
         f"(PCI-SIG PCIe 4.0 base spec); {_ALPHA}"),
    Link("pcie5", 63.0 * GB, 10e-6, "PCIe 5.0 x16: 32 GT/s x 16 lanes = 63 GB/s per direction "
         f"(PCI-SIG PCIe 5.0 base spec); {_ALPHA}"),
    Link("nvlink2", 150 * GB, 5e-6, "NVLink 2 (V100 datasheet: 300 GB/s total) = 150 GB/s per "
         f"direction; {_ALPHA}"),
    Link("nvlink3", 300 * GB, 5e-6, "NVLink 3 (A100 datasheet: 600 GB/s total) = 300 GB/s per "
         f"direction; {_ALPHA}"),
    Link("nvlink4", 450 * GB, 5e-6, "NVLink 4 (H100/H200 datasheets: 900 GB/s total) = 450 GB/s "
         f"per direction; {_ALPHA}"),
    Link("ib-hdr", 25 * GB, 10e-6, "InfiniBand HDR, one 200 Gb/s port per GPU (NVIDIA "
         f"ConnectX-6 datasheet) = 25 GB/s per direction; {_ALPHA}"),
    Link("ib-ndr", 50 * GB, 10e-6, "InfiniBand NDR, one 400 Gb/s port per GPU (NVIDIA "
         f"ConnectX-7 datasheet) = 50 GB/s per direction; {_ALPHA}"),
    # between sites or on commodity clusters, where local SGD and DiLoCo are used (lesson 13)
    Link("eth-10g", 1.25 * GB, 30e-6, "10 Gigabit Ethernet (IEEE 802.3ae), one port per GPU: "
         f"10 Gb/s = 1.25 GB/s per direction; {_ALPHA}"),
    Link("eth-25g", 3.125 * GB, 30e-6, "25 Gigabit Ethernet (IEEE 802.3by), one port per GPU: "
         f"25 Gb/s = 3.125 GB/s per direction; {_ALPHA}"),
    Link("eth-100g", 12.5 * GB, 30e-6, "100 Gigabit Ethernet (IEEE 802.3ba), one port per GPU: "
         f"100 Gb/s = 12.5 GB/s per direction; {_ALPHA}"),
)}

# Example prices, USD per GPU-hour, on demand, each with its source and date. Prices move and
# differ several-fold between providers: use your own quote, ``set_price(name, price)``, in your
# currency after ``set_currency`` (below).
# - A100 80GB, H100 SXM, H200 SXM: the middle of the "specialty cloud" ranges listed by a public
#   comparison (mercatus-ai.com, "Cloud GPU pricing", May 2026: A100 80GB $1.10-1.50, H100 SXM
#   $2.50-3.50, H200 SXM $3.50-4.50).
# - T4: the middle of the one-GPU on-demand listings ($0.35 and $0.53) on computeprices.com's
#   "Tesla T4 GPU" page (last checked there 8 April 2026).
# - V100: not priced. No citable list price of a V100 was found (aimultiple.com's "Cloud GPU
#   Rental Price Index", 20 May 2026, reports the V100 leaving the hyperscalers' price sheets and
#   only single listings left); a plan for it says "not priced" until you set one.
_SPECIALTY = ("example: middle of the specialty-cloud on-demand range, mercatus-ai.com "
              "'Cloud GPU pricing' (May 2026); set your own")
EXAMPLE_PRICES = {"A100-80GB": 1.30, "H100-80GB": 3.00, "H200-141GB": 4.00, "T4-16GB": 0.44}
EXAMPLE_PRICE_SOURCES = {
    "A100-80GB": _SPECIALTY, "H100-80GB": _SPECIALTY, "H200-141GB": _SPECIALTY,
    "T4-16GB": ("example: middle of the one-GPU on-demand listings ($0.35, $0.53), "
                "computeprices.com 'Tesla T4 GPU' (checked 8 April 2026); set your own"),
}
NOT_PRICED = {"V100-32GB": "not priced: no citable V100 list price found (aimultiple.com 'Cloud "
                           "GPU Rental Price Index', 20 May 2026: the V100 is leaving the price "
                           "sheets); pass price_per_hour or set_price"}


# ---- money: prices and costs in the learner's currency -----------------------------------------
# The example prices above are US dollars. Another currency needs either prices given in it
# (set_price after set_currency) or a rate, units per US dollar, with its source: rates move
# daily, so none is built in.
CURRENCY_SYMBOLS = {"USD": "$", "CNY": "¥", "EUR": "€", "GBP": "£", "JPY": "¥", "INR": "₹"}
_money = {"currency": "USD", "per_usd": 1.0, "rate_source": "US dollars: no conversion"}


def set_currency(currency: str, per_usd: Optional[float] = None, source: str = "given") -> None:
    """Show prices and costs in ``currency`` (in this process). ``per_usd``: its units per US
    dollar (with ``source``), to convert the US-dollar example prices; without it, only prices
    you give in ``currency`` (:func:`set_price`, ``price_per_hour=``) are known."""
    checks.choice("currency", currency, tuple(CURRENCY_SYMBOLS))
    if currency == "USD":
        per_usd, source = 1.0, "US dollars: no conversion"
    elif per_usd is not None:
        checks.positive("per_usd", per_usd)
    _money.update(currency=currency, per_usd=per_usd, rate_source=source)


def currency() -> str:
    """The currency prices and costs are in (``"USD"`` unless :func:`set_currency` said)."""
    return _money["currency"]


def money(amount: float) -> str:
    """``amount`` in the current currency, e.g. ``"$1,234"`` or ``"¥8,900"``."""
    return f"{CURRENCY_SYMBOLS[_money['currency']]}{amount:,.0f}"


def price_text(price_per_hour: float) -> str:
    """A price per GPU-hour in the current currency, e.g. ``"$3"`` or ``"¥21.6"``."""
    return f"{CURRENCY_SYMBOLS[_money['currency']]}{price_per_hour:g}"


def _convert(price: float, from_currency: str, source: str) -> tuple[Optional[float], str]:
    """``price`` in ``from_currency`` -> the current currency, through the US dollar."""
    here = _money["currency"]
    if from_currency == here:
        return price, source
    if from_currency == "USD" and _money["per_usd"] is not None:
        return price * _money["per_usd"], (f"{source}; converted at {_money['per_usd']:g} {here} "
                                            f"per USD ({_money['rate_source']})")
    return None, (f"no price in {here}: the known one is {price:g} {from_currency}; give "
                  f"set_currency({here!r}, per_usd=..., source=...) or a price in {here}")


def get_gpu(name_or_gpu) -> GPU:
    """A catalogue entry by name (a :class:`GPU` passes through); ValueError names the choices."""
    if isinstance(name_or_gpu, GPU):
        return name_or_gpu
    checks.choice("gpu", name_or_gpu, tuple(GPUS))
    return GPUS[name_or_gpu]


def gpu_for_cuda_name(cuda_name: str) -> Optional[GPU]:
    """The entry whose ``cuda_names`` holds exactly ``cuda_name``, else None. Exact, not a
    substring: an "NVIDIA H100 PCIe" (756 TFLOPS bf16 dense) must not get the SXM peak."""
    return next((g for g in GPUS.values() if cuda_name in g.cuda_names), None)


def get_link(name_or_link) -> Link:
    """A link by name (a :class:`Link` passes through); ValueError names the choices."""
    if isinstance(name_or_link, Link):
        return name_or_link
    checks.choice("link", name_or_link, tuple(LINKS))
    return LINKS[name_or_link]


def price_of(gpu: GPU, price_per_hour: Optional[float] = None) -> tuple[Optional[float], str]:
    """(price per GPU-hour in the current currency, where it comes from): yours (given in the
    current currency), the GPU's own, an example (US dollars, converted if a rate is set), or
    None with the reason."""
    if price_per_hour is not None:
        checks.positive("price_per_hour", price_per_hour, allow_zero=True)
        return float(price_per_hour), "given"
    if gpu.price_per_hour is not None:
        return _convert(gpu.price_per_hour, gpu.price_currency, gpu.price_source or "set for this GPU")
    if gpu.name in EXAMPLE_PRICES:
        return _convert(EXAMPLE_PRICES[gpu.name], "USD", EXAMPLE_PRICE_SOURCES[gpu.name])
    return None, NOT_PRICED.get(gpu.name, "not priced: no price known; pass price_per_hour")


def add_gpu(name: str, memory_gb: float, peak_tflops: dict, memory_bandwidth_gbs: float,
            links: tuple = ("pcie4",), source: str = "user", price_per_hour: float | None = None
            ) -> GPU:
    """Add (or replace) a device in :data:`GPUS`; ``peak_tflops``: precision ("fp32", "bf16",
    "fp16", "fp8") -> dense TFLOP/s (a precision left out: the device has no units for it)."""
    if not isinstance(name, str) or not name:
        raise InvalidValue("name", name, "a non-empty string")
    checks.positive("memory_gb", memory_gb)
    checks.positive("memory_bandwidth_gbs", memory_bandwidth_gbs)
    if not isinstance(peak_tflops, dict) or not peak_tflops:
        raise InvalidValue("peak_tflops", peak_tflops, "a dict like {'bf16': 312, 'fp32': 19.5}")
    peaks = {"fp32": None, "bf16": None, "fp16": None, "fp8": None}
    for precision, value in peak_tflops.items():
        checks.choice("peak_tflops key", precision, tuple(peaks))
        if value is not None:
            checks.positive(f"peak_tflops[{precision!r}]", value)
            peaks[precision] = value * TFLOPS
    for link in links:
        checks.choice("links", link, tuple(LINKS))
    if price_per_hour is not None:
        checks.positive("price_per_hour", price_per_hour, allow_zero=True)
    gpu = GPU(name, memory_gb * GB, peaks, memory_bandwidth_gbs * GB, tuple(links), source,
              price_per_hour, "given" if price_per_hour is not None else "")
    GPUS[name] = gpu
    return gpu


def add_link(name: str, bandwidth_gbs: float, latency_us: float = 10.0, source: str = "user"
             ) -> Link:
    """Add (or replace) an interconnect: GB/s per GPU per direction, latency per message in µs."""
    if not isinstance(name, str) or not name:
        raise InvalidValue("name", name, "a non-empty string")
    checks.positive("bandwidth_gbs", bandwidth_gbs)
    checks.positive("latency_us", latency_us, allow_zero=True)
    link = Link(name, bandwidth_gbs * GB, latency_us * 1e-6, source)
    LINKS[name] = link
    return link


def set_price(gpu: str, price_per_hour: float, source: str = "given") -> GPU:
    """Set the price per GPU-hour, in the current currency (:func:`set_currency`), that the
    planner uses for ``gpu`` (in this process)."""
    checks.positive("price_per_hour", price_per_hour, allow_zero=True)
    updated = dataclasses.replace(get_gpu(gpu), price_per_hour=float(price_per_hour),
                                  price_source=source, price_currency=currency())
    GPUS[updated.name] = updated
    return updated
