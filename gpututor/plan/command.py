"""``python -m gpututor plan``: the planner on the command line.

    python -m gpututor plan --params 7e9 --gpus 8 --gpu H100-80GB --zero-stage 3 --json -
    python -m gpututor plan --model 70b --gpus 512 --recommend --deadline-days 60
    python -m gpututor plan --list
    python -m gpututor plan --layouts --tiny-gpt medium --world-size 4 --batch-size 8 \
        --seq-len 64 --device-memory 47MB

Prints per-device bytes by category (``params``, ``grads``, ``optimizer``, ``activations``,
``total``), whether that fits, step and total time, cost, and why; ``--json PATH`` writes the
same as JSON (``-`` = stdout). ``--recommend`` ranks layouts on up to ``--gpus`` GPUs instead.
``--layouts`` predicts the bytes per rank of every layout of a rank grid of ``--world-size``
ranks (``plan/layouts.py``) and picks the simplest that fits ``--device-memory``.
"""
from __future__ import annotations

import argparse
import json
import sys

from .. import catalog, checks
from ..catalog import GB
from ..checks import InvalidValue, parse_bytes
from ..config import RunSpec
from ..files import write_text_atomically
from ..formulas import MB, RECOMPUTE
from ..model_sizes import MODEL_SIZES
from .layouts import HEADROOM, pick_layout, predict_layouts, transformer_of
from .memory import CONVENTIONS, PLAN_PRECISIONS, PRESETS, Transformer, transformer_for_params
from .recommend import (DEFAULT_CAUSAL, DEFAULT_COMM_EFFICIENCY, DEFAULT_HFU, DEFAULT_OVERLAP,
                        DEFAULT_SEQUENCE_PARALLEL, DEFAULT_TOKENS_PER_STEP, Config, estimate,
                        recommend)


def add_parser(commands) -> argparse.ArgumentParser:
    """Add the ``plan`` subcommand to the CLI's subparsers."""
    p = commands.add_parser("plan", help="what fits, how long, what it costs (a formula, "
                                         "not a run)", description=__doc__.splitlines()[0])
    p.add_argument("--params", type=float, help="parameter count, e.g. 7e9 (GPT shape derived)")
    p.add_argument("--model", help="a preset instead: " + ", ".join(PRESETS))
    p.add_argument("--layers", type=int, help="with --d-model and --heads: an exact shape")
    p.add_argument("--d-model", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (default 2048)")
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--gpus", type=int, default=1,
                   help="number of GPUs (the most to try, with --recommend)")
    p.add_argument("--gpu", default="H100-80GB", help="|".join(catalog.GPUS))
    p.add_argument("--link", default=None, help="link inside a node: " + "|".join(catalog.LINKS)
                   + " (default: the GPU's first)")
    p.add_argument("--inter-link", default="ib-ndr", help="link between nodes")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--zero-stage", type=int, default=0, help="0 (data parallel) 1 2 3 (= FSDP)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree")
    p.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree")
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per GPU per micro-step")
    p.add_argument("--recompute", default="none", help="|".join(RECOMPUTE))
    p.add_argument("--precision", default="bf16", help="|".join(PLAN_PRECISIONS))
    p.add_argument("--optimizer", default="adam", help="adam | sgd")
    p.add_argument("--convention", default=None, help="bytes per parameter: "
                   + "|".join(CONVENTIONS) + " (default from precision and optimizer)")
    p.add_argument("--tokens", type=float, default=None,
                   help="training tokens (default 20 per parameter, Chinchilla)")
    p.add_argument("--tokens-per-step", type=float, default=DEFAULT_TOKENS_PER_STEP,
                   help=f"global batch in tokens (default {DEFAULT_TOKENS_PER_STEP:,}, an "
                        "assumption)")
    p.add_argument("--hfu", type=float, default=DEFAULT_HFU,
                   help=f"fraction of peak reached on all a step computes, recomputation "
                        f"included (HFU; default {DEFAULT_HFU}, an assumption); the answer "
                        "gives the MFU that follows")
    p.add_argument("--comm-efficiency", type=float, default=DEFAULT_COMM_EFFICIENCY,
                   help=f"fraction of a link's rate reached (default {DEFAULT_COMM_EFFICIENCY})")
    p.add_argument("--overlap", type=float, default=DEFAULT_OVERLAP,
                   help="share of the backward pass that hides data-parallel traffic "
                        f"(default {DEFAULT_OVERLAP})")
    p.add_argument("--no-sequence-parallel", dest="sequence_parallel", action="store_false",
                   default=DEFAULT_SEQUENCE_PARALLEL,
                   help="tensor parallel without sequence parallel (default: with)")
    p.add_argument("--full-attention", dest="causal_attention", action="store_false",
                   default=DEFAULT_CAUSAL,
                   help="count attention's whole s×s square (default: causal, half of it)")
    p.add_argument("--price", type=float, default=None, help="per GPU-hour, in the planner's currency (US dollars)")
    p.add_argument("--budget", type=float, default=None, help="in the planner's currency (US dollars; with --recommend)")
    p.add_argument("--deadline-days", type=float, default=None, help="(with --recommend)")
    p.add_argument("--recommend", action="store_true", help="rank layouts on 1..--gpus GPUs")
    p.add_argument("--list", action="store_true", help="print the GPU and link catalogue")
    p.add_argument("--layouts", action="store_true",
                   help="bytes per rank of every layout on --world-size ranks (lesson 09)")
    p.add_argument("--tiny-gpt", metavar="SIZE", help="the lessons' GPT: "
                   + "|".join(MODEL_SIZES["gpt"]) + " (vocabulary: the corpus's)")
    p.add_argument("--world-size", type=int, default=4, help="ranks (with --layouts)")
    p.add_argument("--batch-size", type=int, default=8, help="global batch (with --layouts)")
    p.add_argument("--device-memory", default=None, help="capacity per rank, e.g. 48MB")
    p.add_argument("--json", metavar="PATH", help="write the answer as JSON ('-' = stdout)")
    return p


def model_from_args(args) -> Transformer:
    """The model the flags describe: a preset, an exact shape, or a parameter count."""
    given = [name for name, v in (("--params", args.params), ("--model", args.model),
                                  ("--layers", args.layers),
                                  ("--tiny-gpt", getattr(args, "tiny_gpt", None)))
             if v is not None]
    if len(given) != 1:
        raise ValueError(f"model flags {given or 'none'} are invalid: allowed is exactly one of "
                         "--params N, --model PRESET, --layers L --d-model H --heads A, or "
                         "--tiny-gpt SIZE")
    seq = args.seq_len
    if getattr(args, "tiny_gpt", None) is not None:
        checks.choice("tiny_gpt", args.tiny_gpt, tuple(MODEL_SIZES["gpt"]))
        return transformer_of(RunSpec(model="gpt", model_size=args.tiny_gpt, seq_len=seq or 64))
    if args.model is not None:
        checks.choice("model", args.model, tuple(PRESETS))
        model = PRESETS[args.model]
        return model if seq is None else Transformer(model.n_layer, model.d_model, model.n_head,
                                                     model.vocab_size, seq, model.params,
                                                     model.name, model.source)
    if args.layers is not None:
        if args.d_model is None or args.heads is None:
            raise InvalidValue("--layers", args.layers, "--layers, --d-model and --heads all "
                               "three together", "without --d-model and --heads")
        return Transformer(args.layers, args.d_model, args.heads, args.vocab, seq or 2048,
                           args.params)
    return transformer_for_params(args.params, seq or 2048, args.vocab)


def run(args) -> int:
    """Handle ``gpututor plan``; returns the exit code (2 for bad input)."""
    if args.list:
        print(catalog_text())
        return 0
    try:
        model = model_from_args(args)
        if args.layouts:
            return _layouts(model, args)
        tokens = args.tokens if args.tokens is not None else 20 * model.n_params
        gpu = catalog.get_gpu(args.gpu)
        link = args.link or gpu.links[0]
        common = dict(precision=args.precision, optimizer=args.optimizer,
                      tokens_per_step=args.tokens_per_step, hfu=args.hfu,
                      price_per_hour=args.price, overlap=args.overlap,
                      sequence_parallel=args.sequence_parallel,
                      causal_attention=args.causal_attention)
        if args.recommend:
            checks.positive("gpus", args.gpus)
            counts = [2 ** k for k in range(20) if 2 ** k <= args.gpus]
            result = recommend(model, tokens, gpus=(gpu.name,), counts=counts,
                               links=(link,), budget=args.budget,
                               deadline_days=args.deadline_days,
                               gpus_per_node=args.gpus_per_node, inter_link=args.inter_link,
                               comm_efficiency=args.comm_efficiency,
                               convention=args.convention, **common)
            payload = {"model": _model_dict(model), "tokens": tokens,
                       "ranked": [e.to_dict() for e in result.ranked[:10]],
                       "rejected": [e.to_dict() for e in result.rejected],
                       "notes": result.notes, "one_gpu_enough": result.one_gpu_enough,
                       "link_bound": result.link_bound}
            text = result.table() + "\n" + "\n".join(result.notes)
        else:
            config = Config(gpu.name, args.gpus, link, args.zero_stage, args.tp, args.pp,
                            args.micro_batch, args.recompute, args.inter_link,
                            args.gpus_per_node)
            est = estimate(model, tokens, config, comm_efficiency=args.comm_efficiency,
                           convention=args.convention, **common)
            payload = {"model": _model_dict(model), "tokens": tokens, **est.to_dict()}
            text = f"{model.name} model, {tokens:.3g} tokens on {config.label}\n" + \
                "\n".join(r for r in est.reasons)
    except ValueError as exc:
        print(f"gpututor: error: {exc}", file=sys.stderr)
        return 2
    if args.json == "-":
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(text)
        if args.json:
            write_text_atomically(args.json, json.dumps(payload, indent=2, default=str) + "\n")
    return 0


def _layouts(model: Transformer, args) -> int:
    """``--layouts``: every layout on ``--world-size`` ranks, predicted; the simplest that fits."""
    capacity = parse_bytes(args.device_memory)
    rows = predict_layouts(model, args.batch_size, args.world_size, capacity)
    pick = pick_layout(rows) if capacity else None
    payload = {"model": _model_dict(model), "world_size": args.world_size,
               "batch_size": args.batch_size, "device_memory": capacity, "headroom": HEADROOM,
               "layouts": rows, "pick": pick}
    if args.json == "-":
        print(json.dumps(payload, indent=2, default=str))
        return 0
    lines = [f"{model.name}, global batch {args.batch_size}, {args.world_size} ranks "
             "(formula, MB per rank):",
             f"{'layout':<12}{'grid':<22}{'params':>8}{'grads':>8}{'optim':>8}{'activ':>8}"
             f"{'total':>8}  fits"]
    for r in rows:
        grid = ",".join(f"{d}={n}" for d, n in r["mesh"].items())
        fits = "" if r["fits"] is None else ("yes" if r["fits"] else "no")
        lines.append(f"{r['layout']:<12}{grid:<22}" + "".join(
            f"{r[k] / MB:8.1f}" for k in ("params", "grads", "optimizer", "activations",
                                           "total")) + f"  {fits}")
    if capacity:
        lines.append(f"simplest that fits {HEADROOM:.0%} of {capacity / MB:.1f} MB: "
                     + (f"{pick['layout']} on {pick['mesh']}" if pick else "none"))
    print("\n".join(lines))
    if args.json:
        write_text_atomically(args.json, json.dumps(payload, indent=2, default=str) + "\n")
    return 0


def _model_dict(model: Transformer) -> dict:
    return {"name": model.name, "params": model.n_params, "n_layer": model.n_layer,
            "d_model": model.d_model, "n_head": model.n_head, "seq_len": model.seq_len,
            "vocab_size": model.vocab_size, "shape_source": model.source}


def catalog_text() -> str:
    """The catalogue as text: every GPU and link with its numbers and source."""
    lines = ["GPUs (dense peak TFLOP/s; memory GB; bandwidth GB/s):"]
    for g in catalog.GPUS.values():
        peaks = ", ".join(f"{p} {v / 1e12:g}" for p, v in g.peak_flops.items() if v)
        lines.append(f"  {g.name:<14} {g.memory_bytes / GB:5.0f} GB  {peaks}; "
                     f"{g.memory_bandwidth / GB:,.0f} GB/s; links {', '.join(g.links)}\n"
                     f"      source: {g.source}")
    lines.append("Links (per GPU, per direction):")
    for link in catalog.LINKS.values():
        lines.append(f"  {link.name:<8} {link.bandwidth / GB:6.1f} GB/s, "
                     f"{link.latency * 1e6:.0f} µs\n      source: {link.source}")
    return "\n".join(lines)
