"""How long a training step and a whole run take, and what they cost: FLOPs, links, bubbles.

- **Compute**: training FLOPs per token ``6·N + 12·L·s·h`` (PaLM, Chowdhery et al. 2022,
  Appendix B [ref: chowdhery2022-flops]: 6N for the weights, forward + backward, and
  attention's Q·Kᵀ and scores·V),
  divided by what a device achieves on the FLOPs it runs: peak x *hardware* FLOPs utilisation
  (HFU, recomputation included). What a step then reaches on the model's FLOPs alone, over the
  whole step (waits included), is its MFU; both are returned (Korthikanti et al. 2022, §6.3,
  report the two [ref: korthikanti2022-mfu-hfu]; PaLM 540B reached 46.2 % MFU and 57.8 % HFU,
  Chowdhery et al. 2022, §4.1 [ref: chowdhery2022-mfu]).
- **Communication**: ring algorithms in the α-β model (``gpututor.formulas.collective_seconds``:
  an all-reduce of S bytes over n ranks takes ``2(n-1)·(α + S/(n·β))``; all-gather and
  reduce-scatter half of that). What compute cannot hide is *exposed*.
- **Pipeline bubble**: with p stages and m micro-batches, GPipe and 1F1B idle ``(p-1)/m`` of the
  ideal compute time (``gpututor.formulas.bubble_to_compute_ratio``, derived there from the
  *bubble fraction* ``(p-1)/(m+p-1)`` that a pipeline run measures).
- **Totals**: steps = tokens / tokens per step; cost = hours x GPUs x price per GPU-hour
  (``recommend.estimate``). Narayanan et al. 2021 (section 5.1 [ref: narayanan2021-end-to-end])
  write the end-to-end time as
  ``8·T·P/(n·X)``: the same count, with attention's term left out.

Every function here is a formula: no measurement. ``calibrate.py`` checks them against runs.
"""
from __future__ import annotations

import math

from .. import checks
from ..formulas import (HOUR, attention_flops_per_token, bubble_to_compute_ratio,
                        collective_seconds, flops_utilization, ring_allreduce_seconds,
                        ring_attention_shifts, send_seconds)
from ..formulas import training_flops_per_token as _formula
from .memory import Transformer


# ---- compute -------------------------------------------------------------------------------------

def training_flops_per_token(model: Transformer, recompute: str = "none", causal: bool = False
                             ) -> float:
    """FLOPs per trained token: ``6·N + 12·L·s·h`` (PaLM, Chowdhery et al. 2022, Appendix B).

    [ref: chowdhery2022-flops]

    Recomputation adds work that is executed but is not the model's: full recomputation runs
    the forward again (``8·N + 16·L·s·h``, the 4-passes count of Narayanan et al. 2021, whose
    end-to-end estimate is ``8·T·P / (n·X)`` [ref: narayanan2021-end-to-end]); selective
    recomputation re-runs only attention's scores (``+ 4·L·s·h``, Korthikanti et al. 2022, §5
    [ref: korthikanti2022-selective]). ``causal``: attention computes half its
    ``s×s`` square (a kernel that skips what the causal mask zeroes).
    """
    return _formula(model.n_params, model.n_layer, model.seq_len, model.d_model, recompute,
                    causal)


def fp8_flops_per_token(model: Transformer, recompute: str = "none") -> float:
    """The FLOPs per token that FP8 training runs in FP8: the weights' matmuls,
    ``6·(N - V·h)`` (``8·`` with full recomputation), every weight but the output layer's,
    which stays in bf16 as torchao's filter in torchtitan keeps it; attention's own products
    (``Q·Kᵀ``, ``scores·V``) stay in bf16. (A separate input embedding is a lookup that 6·N
    counts as a matmul: counted here as FP8, a few percent of N.)"""
    passes = 8 if recompute == "full" else 6
    return passes * (model.n_params - model.vocab_size * model.d_model)


def compute_seconds(flops: float, peak_flops: float, hfu: float) -> float:
    """Seconds for ``flops`` (all it runs) on one device that reaches ``hfu`` x its peak."""
    checks.fraction("hfu", hfu)
    return flops / (peak_flops * hfu)


# ---- communication -------------------------------------------------------------------------------

def all_to_all_seconds(nbytes: float, n: int, bandwidth: float, latency: float = 0.0) -> float:
    """All-to-all of ``nbytes`` per rank over ``n`` ranks, pairwise exchange: ``n-1`` rounds,
    each sending ``1/n`` of the buffer to one peer: ``(n-1)·(α + S/(n·β))`` (Thakur et al. 2005
    [ref: thakur2005-alltoall])."""
    return collective_seconds("all_to_all", nbytes, n, bandwidth, latency)


def ring_attention_seconds(micro_batch: int, seq_len: int, d_model: int, cp: int,
                           bandwidth: float, latency: float = 0.0, value_bytes: float = 2
                           ) -> float:
    """One layer's ring-attention traffic, forward and backward, per rank (Liu et al. 2023):

    [ref: liu2023-ring]
    :func:`gpututor.formulas.ring_attention_shifts` messages of a K+V block (``2·b·(s/cp)·h``
    values), one after another: the count the implementation sends (its test meters it)."""
    if cp <= 1:
        return 0.0
    block = 2 * micro_batch * seq_len / cp * d_model * value_bytes
    return ring_attention_shifts(cp) * send_seconds(block, bandwidth, latency)


def exposed_seconds(comm_s: float, window_s: float, overlap: float = 1.0) -> float:
    """Communication left over when ``overlap`` x ``window_s`` of compute can hide it."""
    checks.fraction("overlap", overlap, allow_zero=True)
    return max(0.0, comm_s - overlap * window_s)


def powersgd_values(model: Transformer, rank: int, min_rate: float = 2.0) -> float:
    """Values PowerSGD all-reduces for ``model``'s gradients in a step, at ``rank`` r: each weight
    matrix M (n×m) is sent as P = MQ (n×r) and Q = MᵀP (m×r), (n+m)·r values for n·m
    (Vogels et al. 2019 [ref: vogels2019-powersgd]); torch's hook sends a matrix whole unless
    (n+m)·r·``min_rate`` < n·m (its ``min_compression_rate``, 2 by default
    [ref: pytorch-ddp-comm-hooks-powersgd]). A block's matrices, laid out as GPT-2's and this
    package's model: Q, K and V fused in one 3h×h, the output projection h×h, and h×4h and
    4h×h in the MLP (its 12·h²; three separate h×h for Q, K and V would send 2·h·r more);
    then the tied embedding, V×h. Vectors (biases, norms) are not in
    :class:`~.memory.Transformer`'s count, and not here."""
    checks.integer("powersgd_rank", rank)
    h, v = model.d_model, model.vocab_size

    def sent(n: int, m: int) -> float:
        r = min(n, m, rank)
        return (n + m) * r if (n + m) * r * min_rate < n * m else n * m

    return model.n_layer * (sent(3 * h, h) + sent(h, h) + sent(4 * h, h) + sent(h, 4 * h)) \
        + sent(v, h)


# ---- one step of a configuration -----------------------------------------------------------------

def step_time(model: Transformer, tokens_per_step: float, n_gpus: int, peak_flops: float,
              hfu: float = 0.4, dp: int = 1, tp: int = 1, pp: int = 1, zero_stage: int = 0,
              micro_batch: int = 1, recompute: str = "none", grad_bytes: float = 2,
              activation_bytes: float = 2, dp_link=None, tp_link=None, pp_link=None,
              comm_efficiency: float = 0.8, overlap: float = 1.0, cp: int = 1, ep: int = 1,
              top_k: int = 2, cp_link=None, ep_link=None, causal: bool = False,
              fp8_peak_flops: float | None = None, sync_every: int = 1,
              sync_bytes: float = 4, powersgd_rank: int = 0) -> dict[str, float]:
    """Seconds of one optimizer step, by part: ``compute_s``, ``bubble_s``, ``tp_comm_s``,
    ``pp_comm_s``, ``dp_comm_s`` (all of it), ``dp_exposed_s`` (what compute does not hide),
    ``cp_comm_s``, ``cp_exposed_s``, ``ep_comm_s``, ``step_s`` (the total), with
    ``microbatches``, ``dp_window_s`` (the compute that can hide data parallel's traffic),
    ``flops_per_gpu`` (what runs, recomputation included),
    ``model_flops_per_gpu`` (the model's), ``fp8_flops_per_gpu`` (0 without FP8), and the
    step's ``hfu`` and ``mfu``: those FLOPs over ``step_s`` x ``peak_used`` (``peak_flops``
    without FP8; below the assumed ``hfu`` whenever the step waits).

    - Compute: each GPU does ``1/(dp·tp·pp)`` of the step's FLOPs at ``hfu`` x its peak.
      ``causal``: attention computes half its ``s×s`` square.
    - FP8 (``fp8_peak_flops`` given): the weights' matmuls (:func:`fp8_flops_per_token`) run at
      ``hfu`` x the FP8 peak, the rest at ``hfu`` x ``peak_flops`` (bf16). The step's ``hfu``
      and ``mfu`` are then over the peak that mix of FLOPs would reach (``peak_used``):
      torchtitan reports no MFU with Float8 since two peaks are involved
      [ref: torchtitan2024-float8].

    - Tensor parallel: 4 all-reduces of the activations (``b·s·h``) per layer and micro-batch,
      two in forward and two in backward (Shoeybi et al. 2019, Figure 4
      [ref: shoeybi2019-allreduces]); 2 more with full
      recomputation. On the critical path: not overlapped. With sequence parallel each
      all-reduce becomes a reduce-scatter and an all-gather of the same bytes (Korthikanti et al.
      2022, §4.2.2 [ref: korthikanti2022-sequence-parallel]): the same time here; it changes
      activation memory, not traffic.
    - Pipeline: the bubble ``(p-1)/m`` of compute, and per micro-batch a send of activations
      forward and of their gradient backward between neighbouring stages.
    - Data parallel: the gradients (``N/(tp·pp)`` x ``grad_bytes``) are all-reduced; ZeRO-1/2
      reduce-scatter them and all-gather the parameters (the same bytes); ZeRO-3 all-gathers the
      parameters twice and reduce-scatters once: 1.5x (Rajbhandari et al. 2020, section 7
      [ref: rajbhandari2020-volume]). With ``m`` micro-batches per step: plain data parallel and
      ZeRO-1 accumulate whole gradients and reduce once, after the last micro-batch (DDP's
      ``no_sync``), so only that micro-batch's backward (2/3 of ``compute/m``) can hide it;
      ZeRO-2 keeps only its shard of the gradients, so it reduce-scatters every micro-batch
      (``m`` reduce-scatters, one all-gather), each hidden by its own backward (2/3 of
      compute); ZeRO-3 gathers the parameters in every micro-batch's forward and backward and
      reduce-scatters after each (1.5 x ``m``), hidden by all of compute (it prefetches in
      forward too). The hiding is scaled by the fraction ``overlap``. ``grad_bytes`` is the
      bytes of a gradient value as sent: 2 for bf16 gradients or DDP's fp16/bf16 compression
      hooks, 4 for fp32.
    - Synchronising every ``sync_every`` = H steps instead (local SGD, Stich 2019
      [ref: stich2019-local-sgd]; DiLoCo, Douillard et al. 2023
      [ref: douillard2023-diloco-algorithm]): the replicas train alone for H steps, then
      all-reduce the parameters (local SGD) or their change (DiLoCo's outer gradient),
      ``N/(tp·pp)`` x ``sync_bytes`` (4: float32), between steps, so nothing hides it; a step's
      share is 1/H of it (``dp_comm_s``, all exposed). Not with ZeRO (each replica must hold
      its whole state to train alone).
    - PowerSGD (``powersgd_rank`` r > 0, DDP's low-rank compression hook): every step sends
      :func:`powersgd_values` ``/(tp·pp)`` x ``grad_bytes`` instead of the gradients, in two
      all-reduces (P, then Q: two latencies), hidden as plain data parallel's are. Its own
      compute (the products and P's orthogonalisation) is not priced. Not with ZeRO or
      ``sync_every``.
    - Context parallel (``cp``): its ranks hold the same parameters, so the gradients are
      reduced over ``dp·cp`` ranks; :func:`ring_attention_seconds` per layer and micro-batch; ring
      attention sends the next block while it computes on this one, so only what attention's
      own compute (its ``12·L·s·h`` FLOPs per token) cannot hide is exposed.
    - Expert parallel (``ep``, ranks taken from ``dp``; every layer a MoE layer): 4 all-to-alls
      of the routed tokens (``top_k·b·s·h`` values) per layer and micro-batch, dispatch and
      combine in forward and in backward (Lepikhin et al. 2021, GShard
      [ref: lepikhin2021-alltoall]); not overlapped.

    Links are :class:`~gpututor.catalog.Link`; ``comm_efficiency`` is the fraction of their
    bandwidth a collective reaches (an assumption: measure yours with ``gpututor bench comm``).
    """
    checks.fraction("hfu", hfu)
    checks.fraction("comm_efficiency", comm_efficiency)
    checks.integer("sync_every", sync_every)
    checks.integer("powersgd_rank", powersgd_rank, low=0)
    checks.positive("sync_bytes", sync_bytes)
    if sync_every > 1 and zero_stage:
        raise checks.InvalidValue("sync_every", sync_every, "1",
                                  f"with zero_stage={zero_stage} (a replica that trains alone "
                                  "holds its whole state; ZeRO shards it)")
    if powersgd_rank and (zero_stage or sync_every > 1):
        field, value = ("zero_stage", zero_stage) if zero_stage else ("sync_every", sync_every)
        raise checks.InvalidValue("powersgd_rank", powersgd_rank, "0",
                                  f"with {field}={value} (PowerSGD compresses plain data "
                                  "parallel's gradient all-reduce)")
    global_batch = max(1, round(tokens_per_step / model.seq_len))
    m = max(1, math.ceil(global_batch / (dp * micro_batch)))            # micro-batches per GPU
    flops = training_flops_per_token(model, recompute, causal) * tokens_per_step / n_gpus
    model_flops = training_flops_per_token(model, "none", causal) * tokens_per_step / n_gpus
    compute = compute_seconds(flops, peak_flops, hfu)
    fp8_flops, peak_used = 0.0, peak_flops
    if fp8_peak_flops is not None:
        fp8_flops = fp8_flops_per_token(model, recompute) * tokens_per_step / n_gpus
        compute = (compute_seconds(fp8_flops, fp8_peak_flops, hfu)
                   + compute_seconds(flops - fp8_flops, peak_flops, hfu))
        peak_used = flops / (compute * hfu)
    bubble = compute * bubble_to_compute_ratio(pp, m) if pp > 1 else 0.0
    seq = model.seq_len / cp                                            # tokens per rank
    act = micro_batch * seq * model.d_model * activation_bytes

    def bw(link):
        return link.bandwidth * comm_efficiency

    tp_comm = 0.0
    if tp > 1:
        per_layer = 4 + (2 if recompute == "full" else 0)
        tp_comm = model.n_layer / pp * m * per_layer * ring_allreduce_seconds(
            act, tp, bw(tp_link), tp_link.latency)
    pp_comm = 0.0
    if pp > 1:
        pp_comm = 2 * m * send_seconds(act / tp, bw(pp_link), pp_link.latency)
    dp_comm = 0.0
    replicas = dp * cp          # context-parallel ranks hold the same parameters: they join in
    if replicas > 1:
        values = powersgd_values(model, powersgd_rank) if powersgd_rank else model.n_params
        grads = values / (tp * pp) * grad_bytes
        dp_comm = ring_allreduce_seconds(grads, replicas, bw(dp_link), dp_link.latency)
        if powersgd_rank:   # P and Q: a second all-reduce, a second set of latencies
            dp_comm += ring_allreduce_seconds(0, replicas, bw(dp_link), dp_link.latency)
        if zero_stage == 2:       # a reduce-scatter (half an all-reduce) per micro-batch + one gather
            dp_comm *= (m + 1) / 2
        elif zero_stage == 3:
            dp_comm *= 1.5 * m
    window = {3: compute, 2: compute * 2 / 3}.get(zero_stage, compute * 2 / 3 / m)
    dp_exposed = exposed_seconds(dp_comm, window, overlap)
    if replicas > 1 and sync_every > 1:   # between steps, once every H: nothing hides it
        dp_comm = dp_exposed = ring_allreduce_seconds(
            model.n_params / (tp * pp) * sync_bytes, replicas, bw(dp_link),
            dp_link.latency) / sync_every
    cp_comm = cp_exposed = 0.0
    if cp > 1:
        cp_comm = model.n_layer / pp * m * ring_attention_seconds(
            micro_batch, model.seq_len, model.d_model // tp, cp, bw(cp_link), cp_link.latency,
            activation_bytes)
        attention_share = 3 * attention_flops_per_token(model.n_layer, model.seq_len,
                                                        model.d_model, causal) / \
            training_flops_per_token(model, recompute, causal)
        cp_exposed = exposed_seconds(cp_comm, compute * attention_share, overlap)
    ep_comm = 0.0
    if ep > 1:
        routed = top_k * act / tp
        ep_comm = model.n_layer / pp * m * 4 * all_to_all_seconds(routed, ep, bw(ep_link),
                                                                  ep_link.latency)
    step = compute + bubble + tp_comm + pp_comm + dp_exposed + cp_exposed + ep_comm
    return {"compute_s": compute, "bubble_s": bubble, "tp_comm_s": tp_comm,
            "pp_comm_s": pp_comm, "dp_comm_s": dp_comm, "dp_exposed_s": dp_exposed,
            "cp_comm_s": cp_comm, "cp_exposed_s": cp_exposed, "ep_comm_s": ep_comm,
            "step_s": step, "microbatches": m, "dp_window_s": window, "flops_per_gpu": flops,
            "model_flops_per_gpu": model_flops, "fp8_flops_per_gpu": fp8_flops,
            "peak_used": peak_used,
            "hfu": flops_utilization(flops, step, peak_used),
            "mfu": flops_utilization(model_flops, step, peak_used)}


def run_cost(total_s: float, n_gpus: int, price_per_gpu_hour: float | None) -> float | None:
    """USD for ``n_gpus`` for ``total_s`` seconds at ``price_per_gpu_hour`` (None: unknown)."""
    if price_per_gpu_hour is None:
        return None
    return total_s / HOUR * n_gpus * price_per_gpu_hour
