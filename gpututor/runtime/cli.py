"""Command line: ``python -m gpututor run ...`` (or ``gpututor run ...``).

The same command works in two ways:
- on its own, it launches ``--world-size`` ranks itself (like a notebook's ``launch()``);
- under ``torchrun --nproc-per-node N``, each process torchrun started runs one rank of the
  same worker, and rank 0 writes the summary. Ranks that srun or Open MPI's mpirun started (with
  RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set) run the same way; each finds its GPU from
  its launcher's local rank (``torchrun.local_rank_and_size``).

Restarts: ``--max-restarts N`` (with ``--checkpoint-every``) restarts every rank from the last
complete checkpoint when one dies, up to N times; under torchrun, torchrun's own option does it
(each rank, seeing ``TORCHELASTIC_RESTART_COUNT`` > 0, resumes from the newest complete
checkpoint written since torchrun started).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

from ..checks import InvalidValue, parse_mesh
from ..config import RUN_PRECISIONS, RunSpec
from ..files import write_text_atomically
from ..measure.timeline import chrome_trace
from ..parallel import STRATEGIES, check_spec
from ..plan import command as plan_command
from .guard import check_machine
from .torchrun import local_rank_and_size, restarted_store, torchrun_attempt


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpututor", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="train a model with a strategy; print/write a summary")
    defaults = RunSpec.__dataclass_fields__
    add = lambda flag, **kw: run.add_argument(
        flag, default=defaults[flag[2:].replace("-", "_")].default, **kw)
    add("--model", help="gpt (tiny GPT), moe (its mixture of experts) or mlp")
    add("--model-size", help="tiny|small|medium|large for gpt; small|large for mlp")
    add("--strategy", help="one of " + ", ".join(STRATEGIES))
    run.add_argument("--world-size", type=int, default=None,
                     help="number of ranks (default: 2, or torchrun's WORLD_SIZE under torchrun)")
    add("--precision", help="|".join(RUN_PRECISIONS))
    add("--steps", type=int)
    add("--batch-size", type=int, help="global batch (all ranks together), in sequences")
    add("--seq-len", type=int)
    add("--lr", type=float)
    add("--optimizer")
    add("--attention", help="naive (T x T scores kept) or sdpa (torch's fused kernel); gpt only")
    add("--corpus", help="en (English docstrings) or zh (Chinese poems, UTF-8)")
    add("--seed", type=int)
    add("--device", help="auto | cpu | cuda")
    add("--first-gpu", type=int, help="on CUDA, local rank r uses GPU FIRST_GPU + r (default 0)")
    add("--threads-per-rank", type=int)
    add("--grad-accum", type=int)
    run.add_argument("--activation-checkpointing", action="store_true")
    add("--inject-fault", help="RANK:STEP (raise) or RANK:STEP:hang")
    add("--timeout", type=float, help="seconds a rank may wait for a peer")
    add("--device-memory", metavar="BYTES",
        help="memory each rank may hold, e.g. 48MB, 2GB, 512MiB or bytes (default: no cap on "
             "CPU, the GPU's own size on CUDA); a rank that needs more fails with out of memory")
    add("--peak-flops", type=float, metavar="FLOP/S",
        help="the device's dense peak FLOP/s at this precision, for MFU (default: the "
             "catalogue's, for the GPUs it names exactly)")
    add("--checkpoint-every", type=int, help="save a checkpoint every K steps (0 = never)")
    add("--checkpoint-dir", help="folder for checkpoints (a folder step{K} each, written by "
        "torch.distributed.checkpoint: every rank writes its own pieces)")
    run.add_argument("--checkpoint-async", action="store_true",
                     help="save with async_save: training waits only for the copy to memory")
    run.add_argument("--trace", metavar="FILE", help="write every step's compute and collectives"
                     " on one clock (RunSpec.timeline) as a Chrome trace, for Perfetto")
    add("--max-restarts", type=int, metavar="N",
        help="when a rank dies, restart every rank from the last complete checkpoint, up to N "
             "times (needs --checkpoint-every; under torchrun use torchrun's own --max-restarts)")
    add("--resume", metavar="FOLDER", help="continue from this checkpoint folder (any strategy "
        "and world size: the pieces are read into this run's layout)")
    add("--mesh", metavar="DIM=N,...", help="the rank grid, e.g. dp=2,tp=2 (with --strategy "
        "ddp+tp etc.; the degrees multiply to the world size)")
    run.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                     help="a strategy option, e.g. --option schedule=gpipe --option "
                          "microbatches=8 (repeatable)")
    run.add_argument("--json", metavar="PATH", help="write the JSON summary here ('-' = stdout)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--dry-run", action="store_true",
                     help="check the layout on this machine: each rank builds its part of the "
                          "model with a fake process group and runs one step on CPU; print the "
                          "bytes of parameters, gradients and optimizer state per rank")

    bench = commands.add_parser("bench", help="micro-benchmarks")
    what = bench.add_subparsers(dest="bench", required=True)
    comm = what.add_parser("comm", help="collectives: time, algbw, busbw over message sizes")
    comm.add_argument("--world-size", type=int, default=2)
    comm.add_argument("--device", default="auto")
    comm.add_argument("--ops", default="all_reduce,all_gather,reduce_scatter,broadcast")
    comm.add_argument("--max-bytes", type=int, default=1 << 24)
    comm.add_argument("--iters", type=int, default=5)
    comm.add_argument("--json", metavar="PATH", help="write the rows here ('-' = stdout)")
    plan_command.add_parser(commands)
    return parser


def spec_from_args(args, world_size: int) -> RunSpec:
    fields = {k: v for k, v in vars(args).items()
              if k in RunSpec.__dataclass_fields__ and k not in ("world_size", "options")}
    fields["timeline"] = bool(getattr(args, "trace", None))   # --trace FILE records them
    return check_spec(RunSpec(world_size=world_size, options=parse_options(args.option), **fields))


def check_writable(path: str | None, field: str = "json") -> None:
    """Refuse a ``--json`` (or ``--trace``) path that cannot be written, before training starts."""
    if path in (None, "-"):
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise InvalidValue(field, path, "a file path or '-'", "(it is a folder)")
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK) or (
            os.path.exists(path) and not os.access(path, os.W_OK)):
        raise InvalidValue(field, path, "a writable file path, or '-' for stdout",
                           f"({folder} is not a folder this user can write to)")


def mesh_world_size(mesh: str | None) -> int | None:
    """The world size a ``--mesh`` implies (its degrees multiplied), or None without one."""
    return math.prod(degree for _, degree in parse_mesh(mesh)) if mesh else None


def parse_options(pairs: list[str]) -> tuple:
    """``["schedule=gpipe", "microbatches=8"]`` -> ``(("schedule", "gpipe"), ("microbatches", 8))``."""
    import ast
    options = []
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise InvalidValue("option", pair, "NAME=VALUE")
        try:
            value = ast.literal_eval(text)   # numbers, True/False, quoted strings
        except (ValueError, SyntaxError):
            value = text                     # a bare word such as gpipe
        options.append((name, value))
    return tuple(options)


def under_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ or (
        "RANK" in os.environ and "WORLD_SIZE" in os.environ and "MASTER_ADDR" in os.environ)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "bench":
        return _bench_comm(args)
    if args.command == "plan":
        return plan_command.run(args)
    try:
        if under_torchrun():
            return _run_torchrun(args)
        world = args.world_size if args.world_size is not None else \
            (mesh_world_size(args.mesh) or 2)   # 0 is a value (refused), not "unset"
        spec = spec_from_args(args, world)
        for field in ("json", "trace"):
            check_writable(getattr(args, field), field)
        check_machine(spec)   # what this machine can do, before anything starts
        if args.dry_run:
            return _dry_run(spec, args)
    except ValueError as exc:
        print(f"gpututor: error: {exc}", file=sys.stderr)
        return 2
    return _run_launched(spec, args)


def _dry_run(spec: RunSpec, args) -> int:
    from .dry_run import dry_run, dry_run_table

    rows = dry_run(spec)
    if args.json:
        _write_summary({"dry_run": True, "strategy": spec.strategy, "world_size": spec.world_size,
                        "mesh": spec.mesh_shape, "ranks": rows}, args.json)
    if args.json != "-":
        print(dry_run_table(spec, rows))
    return 0


def _run_launched(spec: RunSpec, args) -> int:
    from .launcher import RunFailed, launch

    try:
        run = launch(spec)   # what only this machine can say (the resume folder) is checked here
    except ValueError as exc:
        print(f"gpututor: error: {exc}", file=sys.stderr)
        return 2
    run.echo = sys.stderr   # what the ranks print, prefixed with the rank; stdout stays the JSON's
    progress = Progress(spec, enabled=not args.quiet and sys.stderr.isatty())
    try:
        for record in run:
            progress.update(record)
        summary = run.wait()
    except RunFailed as exc:
        progress.close()
        print(f"gpututor: run failed: {exc}", file=sys.stderr)
        _write_summary(run.summary, args.json)
        return 1
    except KeyboardInterrupt:
        run.stop()
        progress.close()
        print("gpututor: stopped", file=sys.stderr)
        return 130
    progress.close()
    _write_summary(summary, args.json)
    _write_trace(run.records, args)
    return 0


def _write_trace(records: list, args) -> None:   # --trace FILE: the timeline, a Chrome trace
    if getattr(args, "trace", None):
        _write_summary(chrome_trace(records), args.trace)


def _run_torchrun(args) -> int:
    """One rank of a torchrun job: same worker, records gathered to rank 0 at the end."""
    import torch.distributed as dist

    from ..parallel.exchange import all_gather_bytes
    from .summary import summarize
    from .joining import init_process_group, keep_off_gpus, rank_device
    from .resume_choice import rank_zeros_attempt
    from .worker import train

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if args.world_size not in (None, world):
        raise InvalidValue("world_size", args.world_size, f"{world}, or no --world-size",
                           f"under torchrun: torchrun started WORLD_SIZE={world} ranks")
    spec = spec_from_args(args, world)
    if spec.max_restarts:
        raise InvalidValue("max_restarts", spec.max_restarts, "0; torchrun restarts the ranks "
                           f"itself: pass `torchrun --max-restarts {spec.max_restarts} ...` (and "
                           "--checkpoint-every here)", "under torchrun")
    # this process's place on its node, from torchrun's, srun's or mpirun's variables (or refused)
    local_rank, local_world = local_rank_and_size(rank, world, os.environ)
    spec = spec.replace(ranks_per_node=local_world)
    asked = spec
    spec, failures, attempt = torchrun_attempt(spec, world)
    check_machine(spec)   # this node: a GPU for each of its LOCAL_WORLD_SIZE ranks, fp16
    if spec.resume:       # the checkpoint fits this model (before any process group)
        from .checkpoint import check_resume
        check_resume(spec)
    if args.dry_run:      # this node's checks passed; rank 0 shows the whole job's layout
        return _dry_run(spec.replace(ranks_per_node=None), args) if rank == 0 else 0
    device = keep_off_gpus(rank_device(spec, local_rank))
    restarts = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    init_process_group(spec, rank, world, device,
                       store=restarted_store(rank, world, restarts, spec.timeout))
    # with restarts allowed, every rank takes rank 0's resume checkpoint (nodes can differ)
    if int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0")):
        own = spec.resume
        spec, failures, attempt = rank_zeros_attempt(spec, failures, attempt)
        if spec.resume != own:   # rank 0 chose another checkpoint: it must fit this model too
            from .checkpoint import check_resume
            check_resume(spec)
    records = []
    progress = Progress(spec, enabled=rank == 0 and not args.quiet and sys.stderr.isatty())
    try:
        train(spec, rank, world, device,
              emit=lambda r: (records.append({**r, "attempt": attempt}), progress.update(r)))
        # ragged records travel as JSON text: rank 0 unpickles nothing a peer sent (exchange.py)
        parts = all_gather_bytes(json.dumps(records).encode())
        gathered = [json.loads(part) for part in parts] if rank == 0 else None
        # all done with their peers before any closes: a gloo rank whose peer closes while it
        # reads aborts (SIGABRT; seen in gpu_check.py's two-node smoke test), failing the job
        dist.barrier()
    finally:
        progress.close()
        dist.destroy_process_group()
    if rank == 0:
        _write_summary(summarize(asked, [r for part in gathered for r in part],
                                 failures=failures, attempts=attempt), args.json)
        _write_trace([r for part in gathered for r in part], args)
    return 0


def _bench_comm(args) -> int:
    from ..measure.collectives import MESSAGE_SIZES, OPS
    from .bench import run_comm_benchmark

    ops = tuple(args.ops.split(","))
    bad = [op for op in ops if op not in OPS]
    sizes = tuple(s for s in MESSAGE_SIZES if s <= args.max_bytes)
    try:
        if bad:
            raise InvalidValue("ops", ",".join(bad), OPS)
        if not sizes:
            raise InvalidValue("max_bytes", args.max_bytes, f">= {MESSAGE_SIZES[0]}")
        summary = run_comm_benchmark(args.world_size, args.device, sizes, ops, args.iters)
    except ValueError as exc:
        print(f"gpututor: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        _write_summary(summary, args.json)
    else:
        print(f"{'op':>15} {'bytes':>10} {'time_us':>10} {'algbw_GB/s':>11} {'busbw_GB/s':>11}")
        for row in summary["rows"]:
            if "error" in row:
                print(f"{row['op']:>15} {row['bytes']:>10}  not supported: {row['error']}")
                continue
            print(f"{row['op']:>15} {row['bytes']:>10} {row['time_s'] * 1e6:>10.1f} "
                  f"{row['algbw'] / 1e9:>11.3f} {row['busbw'] / 1e9:>11.3f}")
    return 0


def _write_summary(summary: dict | None, path: str | None) -> None:
    if summary is None:
        return
    text = json.dumps(summary, indent=2, default=str)
    if path == "-":
        print(text)
    elif path:
        write_text_atomically(path, text + "\n")   # a reader never sees half a summary
    else:
        keys = ("strategy", "world_size", "steps", "tokens_per_s", "step_time_s", "final_loss",
                "peak_mem_bytes", "compute_s", "comm_s")
        for key in keys:
            value = summary.get(key)
            print(f"{key:>15}: {'not measured' if value is None else value}")


class Progress:
    """A one-line progress bar on stderr, driven by rank 0's records."""

    def __init__(self, spec: RunSpec, enabled: bool):
        self.spec, self.enabled, self.start = spec, enabled, time.perf_counter()

    def update(self, record: dict) -> None:
        if not self.enabled or record["rank"] != 0:
            return
        done = record["step"] + 1
        width = 30
        bar = "#" * (width * done // self.spec.steps)
        sys.stderr.write(f"\r[{bar:<{width}}] step {done}/{self.spec.steps}  "
                         f"loss {record['loss']:.3f}  {record['tokens_per_s']:,.0f} tok/s/rank")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


if __name__ == "__main__":
    sys.exit(main())
