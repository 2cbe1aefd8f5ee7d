"""Mixed precision from scratch: number formats, a dynamic loss scaler, fp32 master weights.

Three ideas, each small enough to read in one go:

- **Number formats** (:func:`format_table`, :func:`cast_table`, :func:`flush_to_zero_fraction`):
  what fp32, bf16 and fp16 can hold, found by casting real tensors, not copied from a table.
- **Dynamic loss scaling** (:class:`DynamicLossScaler`): fp16 flushes gradients below ~6e-8 to
  zero, so backward runs on ``loss × scale``. If any gradient overflowed (inf/nan) the step is
  skipped and the scale halved; after ``growth_interval`` clean steps the scale doubles.
  Micikevicius et al. 2018, *Mixed Precision Training*. The production twin is
  ``torch.amp.GradScaler``, and a test feeds both the same gradient stream.
- **Master weights** (:class:`MasterWeightsTrainer`): the optimizer updates fp32 weights; each
  step copies them into a bf16/fp16 model that does the forward and backward. The production way
  is ``torch.autocast`` (``gpututor.parallel.base.Strategy.train_step``), which keeps the weights
  in fp32 and casts per operation instead, and ``GradScaler`` for fp16.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Iterable, Optional

import torch
import torch.nn.functional as F

from .memory import optimizer_tensors, tensor_bytes

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise ValueError(f"dtype={name!r} is invalid: allowed values are "
                         + ", ".join(repr(d) for d in DTYPES))
    return DTYPES[name]


# ---- 1. number formats, measured with real tensors ----------------------------------------------

def smallest_subnormal(dtype: torch.dtype) -> float:
    """Halve a real tensor of ``dtype`` from 1 until one more halving gives 0: the last nonzero."""
    x = torch.ones((), dtype=dtype)
    while (x / 2) != 0:
        x = x / 2
    return x.item()


def format_table() -> list[dict]:
    """For fp32, bf16 and fp16: bits of exponent and mantissa, range and precision.

    ``mantissa_bits`` comes from the spacing of numbers just above 1 (``eps = 2**-mantissa``),
    the exponent bits from what is left of the width; ``max`` and ``smallest_normal`` from
    ``torch.finfo``; the smallest subnormal by halving a real tensor until it becomes 0.
    """
    rows = []
    for name, dtype in DTYPES.items():
        info = torch.finfo(dtype)
        mantissa = round(-math.log2(info.eps))
        rows.append({
            "format": name, "bits": info.bits, "exponent_bits": info.bits - 1 - mantissa,
            "mantissa_bits": mantissa, "max": info.max, "smallest_normal": info.smallest_normal,
            "smallest_subnormal": smallest_subnormal(dtype), "eps": info.eps,
            "decimal_digits": -math.log10(info.eps),
        })
    return rows


DEMO_VALUES = (1e-8, 1e-6, 3e-5, 1 / 3, 1 + 2**-9, 1000.1, 65504.0, 70000.0, 3e38)


def cast_table(values: Iterable[float] = DEMO_VALUES) -> list[dict]:
    """What each format stores for each value: cast a real tensor, read it back as float64."""
    rows = []
    for v in values:
        row = {"value": v}
        for name, dtype in DTYPES.items():
            row[name] = torch.tensor(v, dtype=torch.float64).to(dtype).double().item()
        rows.append(row)
    return rows


def flush_to_zero_fraction(tensors: Iterable[torch.Tensor], dtype: str = "fp16",
                           scale: float = 1.0) -> float:
    """Fraction of the nonzero entries of ``tensors × scale`` that become 0 in ``dtype``."""
    target = _dtype(dtype)
    nonzero = lost = 0
    for t in tensors:
        t = t.detach().double() * scale
        keep = t != 0
        nonzero += int(keep.sum())
        lost += int((keep & (t.to(target) == 0)).sum())
    return lost / nonzero if nonzero else 0.0


def overflow_fraction(tensors: Iterable[torch.Tensor], dtype: str = "fp16",
                      scale: float = 1.0) -> float:
    """Fraction of the finite entries of ``tensors × scale`` that become inf in ``dtype``."""
    target = _dtype(dtype)
    finite = over = 0
    for t in tensors:
        t = t.detach().double() * scale
        ok = torch.isfinite(t)
        finite += int(ok.sum())
        over += int((ok & torch.isinf(t.to(target))).sum())
    return over / finite if finite else 0.0


def model_gradients(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor
                    ) -> list[torch.Tensor]:
    """The fp32 gradients of one batch's loss, one tensor per parameter (for the demos above)."""
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten()).backward()
    grads = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad(set_to_none=True)
    return grads


def matmul_flops_by_dtype(size: int = 256, dtypes: Iterable[str] = ("fp32", "bf16", "fp16"),
                          device: str = "cpu", threads: int = 1, min_time_s: float = 0.1
                          ) -> dict[str, float]:
    """FLOP/s of a ``size``×``size`` matmul in each dtype here, best of 3 timed rounds.

    On a CPU without low-precision matrix units, bf16 and fp16 are converted on the fly and can
    be slower than fp32; a GPU's tensor cores make them many times faster. Measure, don't assume.
    """
    from .sweep import _seconds_per_matmul

    dev = torch.device(device)
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        rates = {}
        for name in dtypes:
            a = torch.randn(size, size, device=dev, dtype=_dtype(name))
            b = torch.randn(size, size, device=dev, dtype=_dtype(name))
            a @ b  # warm-up: kernel choice, allocation
            seconds = min(_seconds_per_matmul(a, b, min_time_s / 3, dev) for _ in range(3))
            rates[name] = 2 * size**3 / seconds
        return rates
    finally:
        torch.set_num_threads(saved)


# ---- 2. dynamic loss scaling ----------------------------------------------------------------

class DynamicLossScaler:
    """Loss scaling with the update rule of ``torch.amp.GradScaler`` (same defaults).

    Each step: backward on ``scale_loss(loss)``; ``unscale_(grads)`` divides the gradients by
    the scale and says whether any is inf/nan; the caller skips the optimizer step if so; then
    ``update(found_inf)`` halves the scale after an overflow, or doubles it after
    ``growth_interval`` clean steps in a row.
    """

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000):
        _check("init_scale", init_scale, lambda v: v > 0, "a finite number > 0")
        _check("growth_factor", growth_factor, lambda v: v > 1, "a finite number > 1")
        _check("backoff_factor", backoff_factor, lambda v: 0 < v < 1, "a number in (0, 1)")
        if not isinstance(growth_interval, int) or isinstance(growth_interval, bool) \
                or growth_interval < 1:
            raise ValueError(f"growth_interval={growth_interval!r} is invalid: allowed is an "
                             "integer >= 1")
        self.scale = float(init_scale)
        self.growth_factor, self.backoff_factor = growth_factor, backoff_factor
        self.growth_interval = growth_interval
        self.clean_steps = 0   # steps since the last overflow or growth (GradScaler's tracker)

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.scale

    def unscale_(self, grads: Iterable[torch.Tensor]) -> bool:
        """Divide ``grads`` by the scale in place; return True if any entry is inf or nan."""
        found_inf = False
        inv_scale = 1.0 / self.scale
        for g in grads:
            if g is None:
                continue
            g.mul_(inv_scale)
            found_inf = found_inf or not bool(torch.isfinite(g).all())
        return found_inf

    def update(self, found_inf: bool) -> None:
        """Back off after an overflow; grow after ``growth_interval`` clean steps in a row."""
        if found_inf:
            self.scale *= self.backoff_factor
            self.clean_steps = 0
            return
        self.clean_steps += 1
        if self.clean_steps == self.growth_interval:
            self.scale *= self.growth_factor
            self.clean_steps = 0


def _check(name: str, value, ok, allowed: str) -> None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and ok(value)):
        raise ValueError(f"{name}={value!r} is invalid: allowed is {allowed}")


# ---- 3. fp32 master weights + a low-precision compute copy ---------------------------------

@dataclass
class StepResult:
    loss: float          # the unscaled loss of this step
    skipped: bool        # True if gradients overflowed and the optimizer step was skipped
    scale: float         # the loss scale used for this step (1.0 without a scaler)


class MasterWeightsTrainer:
    """Train ``model`` with fp32 master weights and a ``dtype`` copy that does the compute.

    One step: (1) copy the fp32 master weights into the low-precision model; (2) forward and
    backward there, on ``loss × scale`` if a :class:`DynamicLossScaler` is given; (3) turn the
    gradients into fp32 on the master weights and unscale them; (4) skip the step on inf/nan,
    else let AdamW update the fp32 master weights, so updates too small for bf16/fp16 still add up.
    """

    def __init__(self, model: torch.nn.Module, dtype: str = "bf16", lr: float = 1e-3,
                 scaler: Optional[DynamicLossScaler] = None):
        self.dtype = _dtype(dtype)
        self.master = model.float()
        self.compute = copy.deepcopy(model).to(self.dtype)
        self.scaler = scaler
        self.optimizer = torch.optim.AdamW(self.master.parameters(), lr=lr, weight_decay=0.0)
        self.pairs = list(zip(self.master.parameters(), self.compute.parameters()))

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> StepResult:
        # (1) fp32 master -> low-precision compute copy (rounds every weight to dtype)
        with torch.no_grad():
            for master, low in self.pairs:
                low.copy_(master)
        # (2) forward and backward in low precision; the loss itself is computed in fp32
        logits = self.compute(inputs)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
        scale = self.scaler.scale if self.scaler else 1.0
        (self.scaler.scale_loss(loss) if self.scaler else loss).backward()
        # (3) low-precision gradients -> fp32 on the master weights, then unscale
        for master, low in self.pairs:
            master.grad = None if low.grad is None else low.grad.float()
            low.grad = None
        grads = [m.grad for m, _ in self.pairs if m.grad is not None]
        if self.scaler:
            found_inf = self.scaler.unscale_(grads)
        else:
            found_inf = not all(bool(torch.isfinite(g).all()) for g in grads)
        # (4) skip on overflow (only a scaler makes that safe to continue), else update fp32
        skip = found_inf and self.scaler is not None
        if not skip:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler:
            self.scaler.update(found_inf)
        return StepResult(loss.item(), skip, scale)

    def memory(self) -> dict[str, int]:
        """Bytes held now: fp32 master weights, the low-precision copy, optimizer state."""
        return {"master_weights": tensor_bytes(self.master.parameters()),
                "compute_copy": tensor_bytes(self.compute.parameters()),
                "optimizer": tensor_bytes(optimizer_tensors(self.optimizer))}


@dataclass
class MasterWeightsRun:
    """What :func:`train_master_weights` measured: one entry per step, and bytes held at the end."""

    results: list        # StepResult per step
    memory: dict         # MasterWeightsTrainer.memory() after the last step
    seconds: float       # wall time of all steps

    @property
    def losses(self) -> list[float]:
        return [r.loss for r in self.results]


def train_master_weights(spec, dtype: str = "bf16", scaler: Optional[DynamicLossScaler] = None
                         ) -> MasterWeightsRun:
    """Train ``spec``'s model in this process with :class:`MasterWeightsTrainer`.

    Uses ``spec``'s model, seed, batches, steps and learning rate, on ``spec.threads_per_rank``
    threads, so with ``dtype="fp32"`` and no scaler it is exactly the plain fp32 loop.
    """
    import time

    from .data import batches
    from .models import build_model

    saved = torch.get_num_threads()
    torch.set_num_threads(spec.threads_per_rank)
    try:
        trainer = MasterWeightsTrainer(build_model(spec), dtype, spec.lr, scaler)
        start = time.perf_counter()
        results = [trainer.step(inputs, targets) for inputs, targets in batches(spec)]
        return MasterWeightsRun(results, trainer.memory(), time.perf_counter() - start)
    finally:
        torch.set_num_threads(saved)


def replay_scalers(gradients: Iterable[float], **scaler_args) -> list[dict]:
    """Feed the same gradient stream to :class:`DynamicLossScaler` and ``torch.amp.GradScaler``.

    Each step, a one-parameter model gets the gradient ``g × (the scaler's scale)`` (what
    backward on a scaled loss would give); both scalers unscale, decide, and update. Returns one
    row per step: the gradient, and each scaler's scale and whether it skipped the step.
    """
    ours, theirs = DynamicLossScaler(**scaler_args), torch.amp.GradScaler("cpu", **scaler_args)
    p_ours, p_theirs = torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))
    opt_ours = torch.optim.SGD([p_ours], lr=0.01)
    opt_theirs = torch.optim.SGD([p_theirs], lr=0.01)
    rows = []
    for g in gradients:
        row = {"gradient": g, "scale": ours.scale}
        p_ours.grad = torch.full((1,), g) * ours.scale
        found_inf = ours.unscale_([p_ours.grad])
        if not found_inf:
            opt_ours.step()
        ours.update(found_inf)
        row["skipped"] = found_inf
        row["grad_scaler_scale"] = theirs.scale(torch.ones(())).item()  # the scale it applies
        p_theirs.grad = torch.full((1,), g) * row["grad_scaler_scale"]
        before = p_theirs.detach().clone()
        theirs.step(opt_theirs)  # unscales; skips the step if a gradient is inf/nan
        theirs.update()
        row["grad_scaler_skipped"] = bool(torch.equal(before, p_theirs.detach()))
        rows.append(row)
    return rows


def cpu_matrix_features() -> list[str]:
    """Which low-precision matrix instructions this CPU advertises (Linux ``/proc/cpuinfo``).

    ``avx512_bf16`` / ``amx_bf16``: hardware bf16 dot products; ``avx512_fp16`` / ``amx_fp16``:
    hardware fp16 arithmetic. Without them a CPU converts to fp32 and back on the fly.
    """
    wanted = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16", "amx_tile")
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f
                          if line.startswith("flags")), [])
    except OSError:
        return []
    return [w for w in wanted if w in flags]


def gradient_histogram(gradients: Iterable[torch.Tensor], title: str =
                       "Gradient magnitudes of one fp32 backward, and where fp16 loses them"):
    """Histogram of log2|g| over all nonzero gradient entries, with fp16's limits marked."""
    import plotly.graph_objects as go

    values = torch.cat([g.detach().flatten().double().abs() for g in gradients])
    exponents = torch.log2(values[values > 0]).float().numpy()
    fig = go.Figure(go.Histogram(x=exponents, nbinsx=60, name="gradient entries"))
    fp16 = torch.finfo(torch.float16)
    marks = [(math.log2(smallest_subnormal(torch.float16)), "fp16: 0 below"),
             (math.log2(fp16.smallest_normal), "fp16 subnormal below"),
             (math.log2(fp16.max), "fp16 max")]
    for x, text in marks:
        fig.add_vline(x=x, line_dash="dash", line_color="#cf222e",
                      annotation_text=text, annotation_position="top")
    fig.update_layout(title=title, xaxis_title="log2 |gradient|", yaxis_title="entries",
                      template="plotly_white", height=360, margin=dict(l=60, r=20, t=80, b=50))
    return fig


def scale_after(update_rule, gradients: Iterable[float], init_scale: float = 2.0**10,
                growth_interval: int = 3) -> float:
    """The loss scale after ``gradients``, with the update rule written as a function
    ``update_rule(scale, clean_steps, found_inf, growth_interval) -> (scale, clean_steps)``
    (an exercise: compare with :class:`DynamicLossScaler` on the same stream)."""
    scale, clean_steps = init_scale, 0
    for g in gradients:
        scale, clean_steps = update_rule(scale, clean_steps, not math.isfinite(g), growth_interval)
    return scale
