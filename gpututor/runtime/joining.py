"""How a rank joins its group on this machine: its device, its backend and timeout, its CPU
threads, and the sockets it may use. Shared by ``launch()``'s ranks, torchrun's and ``%%ranks``'."""
from __future__ import annotations

import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from ..hardware import usable_cpu_cores


def rank_device(spec, local_rank: int) -> torch.device:
    """A CUDA rank's GPU: ``first_gpu + local_rank`` (``check_machine`` made sure it exists, one
    per rank: NCCL refuses two ranks on one GPU)."""
    if spec.resolved_device() == "cuda":
        return torch.device("cuda", spec.first_gpu + local_rank)
    return torch.device("cpu")


def keep_off_gpus(device: torch.device) -> torch.device:
    """A CPU rank sees no GPU (``CUDA_VISIBLE_DEVICES=""``, set before anything in it asked CUDA:
    NVML and the CUDA runtime read it on their first query). Code that checks only
    ``torch.cuda.is_available()`` otherwise reaches for a GPU from a CPU rank on a GPU machine:
    torch's PowerSGD hook synchronizes its CPU "device" and fails ("Expected a cuda device, but
    got: cpu", seen on an H200), DCP's file writer takes a CUDA stream, each opening a context
    on GPU 0 (hundreds of MB; refused under the exclusive compute mode of clusters)."""
    if device.type == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    return device


def backend_for(device: torch.device, cpu_tensors: bool = False) -> str:
    """gloo on CPU, NCCL on CUDA, and gloo beside it for ``cpu_tensors`` (``%%ranks`` cells
    all-reduce CPU tensors; NCCL has no CPU backend: torch's ``Backend.backend_capability``)."""
    return ("cpu:gloo,cuda:nccl" if cpu_tensors else "nccl") if device.type == "cuda" else "gloo"


def init_process_group(spec, rank: int, world_size: int, device: torch.device, store=None,
                       cpu_tensors: bool = False):
    """:func:`backend_for`'s, with the spec's (short) timeout instead of 10-30 minutes.

    On CUDA the rank's GPU becomes the *current* device first: ``device_id`` binds NCCL's
    communicator to it, but tensors made without a device (``torch.empty(..., device="cuda")``,
    the object collectives' buffers, FSDP2's shards) go to the current device, which is
    ``cuda:0`` on every rank until ``set_device``; NCCL then refuses them on ranks >= 1."""
    backend = backend_for(device, cpu_tensors)
    kwargs = {"store": store} if store is not None else {"init_method": "env://"}
    if device.type == "cuda":
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    dist.init_process_group(backend, rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=spec.timeout), **kwargs)


def rank_threads(spec, device: torch.device) -> int:
    """CPU threads for one rank: ``threads_per_rank`` for a CPU rank (1 by default: CPU ranks
    share the cores); a GPU rank gets its share of this machine's usable cores, so 8 ranks on
    16 cores start 8 x 2 threads, not 8 x 16."""
    if device.type == "cpu":
        return spec.threads_per_rank
    return max(1, usable_cpu_cores() // spec.local_ranks)


def use_loopback_only() -> None:
    """Ranks that launch() or %ranks start on this machine talk over loopback only: gloo's
    sockets (a concrete interface name: gloo rejects NCCL's ``^lo`` form), and NCCL's bootstrap
    and socket transport, which by default skip ``lo`` and listen on a real interface (NCCL's
    environment-variable docs, NCCL_SOCKET_IFNAME). Not under torchrun, where ranks on other
    nodes must be reached. Unauthenticated either way: see docs/architecture.md, trust model."""
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    os.environ["NCCL_SOCKET_IFNAME"] = "lo"


def leave_together(store, rank: int, world_size: int, timeout_s: float) -> None:
    """Wait until every rank of the group has finished its work, through ``store`` (no
    collective: a checker's guard against built-in collectives must not see one), before this
    rank closes its connections. A rank whose task needs no collective (an exercise's function
    that returns at once) can finish while a peer is still inside ``init_process_group``; closing
    then makes gloo's rendezvous on that peer fail ("connectFullMesh failed ... Connection closed
    by peer"), seen under load in the row-parallel checker's test."""
    if world_size == 1:
        return
    store.add("gpututor/finished", 1)
    deadline = time.monotonic() + timeout_s
    while store.add("gpututor/finished", 0) < world_size:
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank} finished, but after {timeout_s:.0f} s not every rank "
                               f"of {world_size} had (the run's timeout)")
        time.sleep(0.005)
