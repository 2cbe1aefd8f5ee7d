"""The same work for every launcher of benchmarks/bench_peers.py: DDP on the tiny GPT, 2 CPU ranks
with one thread each, gloo on 127.0.0.1, AdamW, the same global batch and steps.

Each rank writes what it saw to OUT (a folder): ``first_step`` (time.time() when rank 0's first
step ended), ``tokens_per_s`` (rank 0's, steps after the second), and for a fault or a hang the
moment rank 1 raised or stopped. The peers' own ways to train (Lightning's Trainer, Accelerate's
prepare) wrap the same model, optimizer and batches.
"""
from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.nn.functional as F

from gpututor import RunSpec, batches, build_model

SPEC = RunSpec(model="gpt", model_size="tiny", strategy="ddp", world_size=2, batch_size=16,
               seq_len=64, steps=30, timeout=10.0, lr=3e-3)
TIMEOUT = timedelta(seconds=SPEC.timeout)


def note(out: str, name: str, value: float) -> None:
    Path(out, name).write_text(repr(value))


def read(out: str, name: str):
    path = Path(out, name)
    return float(path.read_text()) if path.exists() else None


def fault_here(fault: str | None, rank: int, step: int, out: str) -> None:
    """``fault`` "raise" or "hang": rank 1 does it at step 2 (and notes when)."""
    if fault and rank == 1 and step == 2:
        note(out, "fault_at", time.time())
        if fault == "raise":
            raise RuntimeError("injected fault: rank 1 raises at step 2")
        time.sleep(3600)


class Meter:
    """Rank 0's first-step time and steady tokens/s."""

    def __init__(self, rank: int, out: str):
        self.rank, self.out, self.times = rank, out, []

    def step_done(self, step: int, tokens: int) -> None:
        if self.rank != 0:
            return
        self.times.append(time.perf_counter())
        if step == 0:
            note(self.out, "first_step", time.time())
        if step == SPEC.steps - 1 and len(self.times) > 3:
            steady = self.times[2:]
            note(self.out, "tokens_per_s", tokens * (len(steady) - 1) / (steady[-1] - steady[0]))


def plain_loop(rank: int, world: int, port: int, out: str, fault: str | None = None) -> None:
    """torch.multiprocessing.spawn's worker: DDP written by hand."""
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                                         rank=rank, world_size=world, timeout=TIMEOUT)
    try:
        model = torch.nn.parallel.DistributedDataParallel(build_model(SPEC))
        optimizer = torch.optim.AdamW(model.parameters(), lr=SPEC.lr, weight_decay=0.0)
        meter = Meter(rank, out)
        for step, (x, y) in enumerate(batches(SPEC, rank, world)):
            fault_here(fault, rank, step, out)
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
            optimizer.step()
            meter.step_done(step, SPEC.batch_size * SPEC.seq_len)
    finally:
        torch.distributed.destroy_process_group()


class Batches(torch.utils.data.Dataset):
    """The global batches of SPEC as single sequences (a DistributedSampler splits them)."""

    def __init__(self):
        xs, ys = zip(*batches(SPEC, 0, 1))
        self.x, self.y = torch.cat(xs), torch.cat(ys)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def accelerate_loop(out: str, fault: str | None = None) -> None:
    """Accelerate's notebook_launcher worker."""
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs
    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=TIMEOUT)])
    rank, world = accelerator.process_index, accelerator.num_processes
    loader = torch.utils.data.DataLoader(Batches(), batch_size=SPEC.batch_size // world)
    model = build_model(SPEC)
    optimizer = torch.optim.AdamW(model.parameters(), lr=SPEC.lr, weight_decay=0.0)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    meter = Meter(rank, out)
    for step, (x, y) in enumerate(loader):
        fault_here(fault, rank, step, out)
        optimizer.zero_grad(set_to_none=True)
        accelerator.backward(F.cross_entropy(model(x).flatten(0, 1), y.flatten()))
        optimizer.step()
        meter.step_done(step, SPEC.batch_size * SPEC.seq_len)


def lightning_fit(out: str, fault: str | None = None) -> None:
    """Lightning's Trainer with strategy="ddp_notebook" (it forks the kernel)."""
    import lightning as L
    from lightning.pytorch.strategies import DDPStrategy

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = build_model(SPEC)

        def training_step(self, batch, step):
            fault_here(fault, self.global_rank, step, out)
            x, y = batch
            return F.cross_entropy(self.model(x).flatten(0, 1), y.flatten())

        def on_train_batch_end(self, outputs, batch, step):
            meter.step_done(step, SPEC.batch_size * SPEC.seq_len)

        def on_train_start(self):
            torch.set_num_threads(1)
            global meter
            meter = Meter(self.global_rank, out)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=SPEC.lr, weight_decay=0.0)

    loader = torch.utils.data.DataLoader(Batches(), batch_size=SPEC.batch_size // 2)
    trainer = L.Trainer(accelerator="cpu", devices=2, max_steps=SPEC.steps, logger=False,
                        strategy=DDPStrategy(start_method="fork", timeout=TIMEOUT),
                        enable_progress_bar=False, enable_checkpointing=False,
                        enable_model_summary=False)
    trainer.fit(Module(), loader)


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


os.environ.setdefault("OMP_NUM_THREADS", "1")
