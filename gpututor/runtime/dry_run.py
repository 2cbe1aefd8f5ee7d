"""Check an N-rank layout on one machine before renting N GPUs: ``gpututor run --dry-run``.

torch's *fake* process group (``torch.testing._internal.distributed.fake_pg``) answers every
collective at once and moves no data. Each of the N ranks (CPU processes started like any run's)
leaves its real group for a fake one, builds the strategy's model for its rank (on meta first
where the strategy does), runs one training step on CPU and reports the bytes it holds. The
values are meaningless (nothing was communicated); the shapes, and hence the bytes of
parameters, gradients and optimizer state, are the real ones. (torchtitan offers the same check
with its fake backend.) Two things the fake group cannot answer are answered as on one host:
object collectives (pickled Python objects) return this rank's own object for every rank, and
DDP's all-reduce hook gets its bucket back.

Each rank runs in its own process, not all in one: one process that plays rank after rank
cannot re-create FSDP2 on a 2-D DeviceMesh of DTensors (``fsdp+tp``) after the first.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.distributed as dist

from ..parallel import check_spec
from .guard import cores_unsaid
from .launcher import launch
from .worker import train

NOT_SUPPORTED = {
    "pp-torch": "torch's PipelineStage learns the shapes to send from the first micro-batch, "
                "which a fake group cannot deliver; dry-run strategy='pp' (same stages, same "
                "bytes per rank) instead",
}


@contextmanager
def _as_on_one_host():
    """``all_gather_object`` and ``gather_object`` give every rank this rank's own object, and
    DDP's all-reduce hook gets its bucket back (a fake all-reduce's future holds no value)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    saved = dist.all_gather_object, dist.gather_object, default_hooks._allreduce_fut

    def all_gather_object(out, obj, group=None):
        out[:] = [obj] * len(out)

    def gather_object(obj, out=None, dst=0, group=None, group_dst=None):
        if out is not None:
            out[:] = [obj] * len(out)

    def allreduce_fut(process_group, tensor):
        dist.all_reduce(tensor, group=process_group)   # fake: returns at once, moves nothing
        done = torch.futures.Future()
        done.set_result(tensor)
        return done

    dist.all_gather_object, dist.gather_object = all_gather_object, gather_object
    default_hooks._allreduce_fut = allreduce_fut
    try:
        yield
    finally:
        dist.all_gather_object, dist.gather_object, default_hooks._allreduce_fut = saved


class DryRunRank:
    """In each rank: swap the real process group for a fake one, train one step, report bytes."""

    def __call__(self, spec, rank, world, device, emit):
        from torch.testing._internal.distributed.fake_pg import FakeStore   # registers "fake"

        dist.barrier()                 # every rank has joined the real group: leave it
        dist.destroy_process_group()
        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
        records = []
        with _as_on_one_host():
            train(spec, rank, world, device, emit=records.append)
        held = {c: records[-1][f"mem_{c}"] for c in ("params", "grads", "optimizer")}
        emit({"step": 0, **held, "total": sum(held.values())})


def dry_run(spec) -> list[dict]:
    """Per rank of ``spec``'s layout, in rank order: bytes of parameters, gradients and
    optimizer state after one step, each rank a CPU process with a fake process group."""
    if spec.strategy in NOT_SUPPORTED:
        raise ValueError(f"strategy={spec.strategy!r} cannot be dry-run: "
                         + NOT_SUPPORTED[spec.strategy])
    spec = check_spec(spec.replace(device="cpu", steps=1, device_memory=None,
                                   checkpoint_every=0, save_state=None, inject_fault=None))
    with cores_unsaid():   # sharing cores does not change bytes: nothing to say here
        records = launch(spec, task=DryRunRank()).wait()
    return sorted(({k: r[k] for k in ("rank", "params", "grads", "optimizer", "total")}
                   for r in records), key=lambda r: r["rank"])


def dry_run_table(spec, rows: list[dict]) -> str:
    """The rows as text, in MB, with the layout they belong to."""
    mb = lambda b: f"{b / 1e6:10.3f}"
    lines = [f"dry run of {spec.strategy} on {spec.world_size} ranks"
             + (f", mesh {spec.mesh_shape}" if spec.mesh else "")
             + " (fake process group: the shapes are real, the values are not)",
             f"{'rank':>4} {'params MB':>10} {'grads MB':>10} {'optim MB':>10} {'total MB':>10}"]
    lines += [f"{r['rank']:>4} {mb(r['params'])} {mb(r['grads'])} {mb(r['optimizer'])} "
              f"{mb(r['total'])}" for r in rows]
    return "\n".join(lines)
