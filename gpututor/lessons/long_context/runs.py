"""Lesson 10's runs: ring attention checked in real ranks, activations against the sequence
length with and without context parallel, and whether torch's own ``context_parallel`` runs here.

Each task runs inside the ranks (``launch(spec, task=...)``) and emits plain records.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ...attention import naive_attention
from ...config import RunSpec
from ...parallel.context_parallel import Ring, ring_attention, ring_step_work, split_positions
from ...runtime.launcher import launch
from ...runtime.summary import current_records, steady_steps


@dataclass(frozen=True)
class RingAttentionCheck:
    """In every rank: ring attention on the rank's positions against full causal attention on
    the whole sequence (the same inputs everywhere), forward and the gradients of q, k, v."""

    split: str
    seq_len: int
    dtype: str = "float64"

    def __call__(self, spec, rank, world, device, emit):
        dtype = getattr(torch, self.dtype)
        gen = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, 3, self.seq_len, 8, generator=gen, dtype=dtype,
                               requires_grad=True) for _ in range(3))
        upstream = torch.randn(2, 3, self.seq_len, 8, generator=gen, dtype=dtype)
        full = naive_attention(q, k, v)
        full.backward(upstream)
        positions = split_positions(self.seq_len, world, self.split)
        mine = positions[rank]
        local = [t.detach()[..., mine, :].clone().requires_grad_() for t in (q, k, v)]
        out = ring_attention(*local, positions, Ring(rank, world))
        out.backward(upstream[..., mine, :])
        pairs = {"output": (out, full)}
        pairs.update({f"d{n}": (mine_t.grad, whole.grad) for n, mine_t, whole in
                      zip("qkv", local, (q, k, v))})
        emit({"step": 0, "positions": mine.tolist(),
              **{name: (got - want[..., mine, :]).abs().max().item()
                 for name, (got, want) in pairs.items()}})


def ring_attention_differences(world_size: int, split: str = "zigzag", seq_len: int = 32) -> list[dict]:
    """Per rank: its positions and the largest difference of the output and of each gradient,
    ring attention on ``world_size`` CPU ranks against full attention (float64)."""
    spec = RunSpec(strategy="cp", world_size=world_size, device="cpu", seq_len=seq_len,
                   timeout=30)
    return sorted(launch(spec, task=RingAttentionCheck(split, seq_len)).wait(), key=lambda r: r["rank"])


def sdpa_kernels(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> list[str]:
    """The aten operators causal SDPA dispatches to for these inputs, on their device
    (e.g. ``aten._scaled_dot_product_flash_attention_for_cpu.default`` on a CPU)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    with Recorder() as recorder:
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return recorder.ops


def torch_ring_kernels() -> dict:
    """What torch's ``context_parallel`` does here, read from its own (private) module:
    ``ring_ops``, the forward SDPA operators it replaces, and ``rotate_method``, how it exchanges
    keys and values by default (``ALL_GATHER`` or ``ALL_TO_ALL``, the ring). None where this torch
    version keeps them elsewhere."""
    try:
        from torch.distributed.tensor.experimental._context_parallel import _attention
    except ImportError:
        return {"ring_ops": None, "rotate_method": None}
    table = getattr(_attention, "custom_ops", None)
    method = getattr(getattr(getattr(_attention, "_cp_options", None), "rotate_method", None),
                     "name", None)
    forward = None if table is None else [str(op) for op in table if "backward" not in str(op)]
    return {"ring_ops": forward, "rotate_method": method}


@dataclass(frozen=True)
class TorchContextParallelCheck:
    """In every rank: torch's experimental ``context_parallel`` (SDPA patched with a DTensor ring
    over a ``DeviceMesh``) against full causal SDPA. Emits whether it ran and, if not, the error,
    with the SDPA operator this device runs and the ones torch's ring replaces."""

    def __call__(self, spec, rank, world, device, emit):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.experimental import context_parallel
        from torch.distributed.tensor.experimental._attention import context_parallel_unshard

        mesh = init_device_mesh(device.type, (world,), mesh_dim_names=("cp",))
        torch.manual_seed(0)
        q, k, v = (torch.randn(2, 2, 16, 8, device=device) for _ in range(3))
        full = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        kernels = {"sdpa_ops": sdpa_kernels(q, k, v), "device": device.type, **torch_ring_kernels()}
        shards = [t.clone() for t in (q, k, v)]
        try:
            with context_parallel(mesh, buffers=shards, buffer_seq_dims=[2, 2, 2]):
                out = F.scaled_dot_product_attention(*shards, is_causal=True)
                (gathered,) = context_parallel_unshard(mesh, [out], [2])
        except (NotImplementedError, RuntimeError) as exc:
            emit({"step": 0, "ran": False, "error": f"{type(exc).__name__}: {exc}", **kernels})
            return
        emit({"step": 0, "ran": True, "error": "", **kernels,
              "max_difference": (gathered - full).abs().max().item()})


def try_torch_context_parallel(spec: RunSpec) -> dict:
    """Rank 0's record of :class:`TorchContextParallelCheck` on ``spec``'s ranks and device."""
    records = launch(spec.replace(strategy="cp"), task=TorchContextParallelCheck()).wait()
    return next(r for r in records if r["rank"] == 0)


def activations_by_length(base: RunSpec, lengths, layouts) -> list[dict]:
    """One step of ``base`` per sequence length and layout ``(label, strategy, world_size)``:
    rank 0's activation bytes (the live-tensor probe) and its peak, per row."""
    rows = []
    for seq_len in lengths:
        for label, strategy, world in layouts:
            s = launch(base.replace(seq_len=seq_len, strategy=strategy, world_size=world,
                                    steps=1)).wait()
            rows.append({"layout": label, "seq_len": seq_len,
                         "activations": s["mem_by_category"]["activations"][0],
                         "peak": s["peak_mem_bytes"][0]})
    return rows


def steady_step_times(spec: RunSpec, records: list[dict]) -> list[float]:
    """Each steady step's time in seconds, timed by its slowest rank: the steps the summary's
    median ``step_time_s`` is taken over (``runtime.summary.steady_steps``)."""
    records = current_records(records)
    return [max(r["step_time_s"] for r in records if r["step"] == step)
            for step in steady_steps(spec, records)]


def launch_in_turn(specs: dict) -> tuple[dict, dict]:
    """Run each of ``specs`` (``{name: RunSpec}``) after the one before has ended; return
    ``{name: summary}`` and ``{name: its steady step times}`` (:func:`steady_step_times`)."""
    summaries, times = {}, {}
    for name, spec in specs.items():
        run = launch(spec)
        summaries[name] = run.wait()
        times[name] = steady_step_times(spec, run.records)
    return summaries, times


def expected_step_ratio(spec: RunSpec, slower: str = "contiguous", faster: str = "zigzag") -> dict:
    """What FLOPs predict for the step time of a cp run of ``spec`` split ``slower`` over one
    split ``faster``: the Linear layers' ``6 × weights × tokens`` per rank (the same in both),
    plus the attention core, ``14·d_model`` FLOPs per computed query-key pair per layer (forward
    QKᵀ and PV, 4·d; backward recomputes QKᵀ and does dV, dP, dQ, dK, 10·d), counted on the
    busiest rank of every ring step (:func:`ring_step_work`, ``counted="computed"``). Returns
    the ratio, the attention core's share of the ``faster`` split's step, and the ratio of the
    attention core alone (``attention_ratio``)."""
    from ...models import build_model
    model = build_model(spec)
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    n = spec.world_size
    linear_flops = 6 * linear * spec.batch_size * spec.seq_len // n

    def attention(split):
        pairs = ring_step_work(spec.seq_len, n, split, counted="computed").amax(dim=1).sum()
        return model.cfg.n_layer * 14 * model.cfg.d_model * spec.batch_size * float(pairs)
    slow, fast = linear_flops + attention(slower), linear_flops + attention(faster)
    return {"ratio": slow / fast, "attention_share": attention(faster) / fast,
            "attention_ratio": attention(slower) / attention(faster)}
