"""Distributed checkpoints (torch.distributed.checkpoint), per strategy: bytes each rank writes,
the save's seconds, and with ``async_save`` how long training waits against the whole save.

Each strategy runs its smallest layout (``gpututor.parallel.small_layout``: 2 ranks, or 2 along
each dim of a composed layout) for ``--steps`` steps with a save every ``--every`` steps, once
with ``dcp.save`` and once with ``dcp.async_save``. The figures are the run summary's
``checkpoint`` section (the slowest rank's median over saves). For scale: the model's whole
state (fp32 parameters + AdamW's two moments) is ``12 x parameters`` bytes; the ranks' bytes
add up to about that (DCP writes each value once, plus its own framing).

    python benchmarks/bench_checkpoint.py [--size small] [--steps 6] [--every 2] [--device cpu]
"""
from __future__ import annotations

import argparse
import tempfile

from common import report
from gpututor import RunSpec, launch
from gpututor.parallel import small_layout, small_model

STRATEGIES = ("single", "ddp", "zero1", "zero2", "zero3", "fsdp", "tp", "tp-dtensor", "pp",
              "ddp+tp", "fsdp+tp", "ddp+pp")


def measure(name: str, args, asynchronous: bool) -> dict:
    world, mesh, options = small_layout(name)
    with tempfile.TemporaryDirectory() as folder:
        spec = RunSpec(strategy=name, model=small_model(name), model_size=args.size,
                       world_size=world, mesh=mesh, options=options, batch_size=args.batch,
                       seq_len=args.seq, steps=args.steps, checkpoint_every=args.every,
                       checkpoint_dir=folder, checkpoint_async=asynchronous, device=args.device)
        summary = launch(spec).wait()
    figures = summary["checkpoint"]
    written = [b for b in figures["bytes_per_rank"] if b is not None]
    return {"world_size": world, "mesh": mesh, "params": summary["params"],
            "whole_state_bytes": 12 * summary["params"],
            "bytes_per_rank": figures["bytes_per_rank"], "bytes_total": sum(written),
            "save_s": figures["save_s"], "blocked_s": figures["blocked_s"],
            "blocked_share": figures["blocked_s"] / figures["save_s"]
            if figures["blocked_s"] is not None and figures["save_s"] else None,
            "step_time_s": summary["step_time_s"], "saves": figures["saves"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="small")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--every", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    args = parser.parse_args()
    launch(RunSpec(model_size="tiny", world_size=2, steps=1, batch_size=8, seq_len=32,
                   device=args.device)).wait()   # start the forkserver first
    rows = {}
    for name in args.strategies.split(","):
        rows[name] = {"sync": measure(name, args, False), "async": measure(name, args, True)}
        sync, asyn = rows[name]["sync"], rows[name]["async"]
        print(f"{name:>10}  ranks {sync['world_size']}  bytes/rank {sync['bytes_per_rank']}  "
              f"save {sync['save_s']:.3f} s  async: blocked {asyn['blocked_s']:.3f} s of "
              f"{asyn['save_s']:.3f} s", flush=True)
    report("checkpoint", {"args": vars(args), "strategies": rows})


if __name__ == "__main__":
    main()
