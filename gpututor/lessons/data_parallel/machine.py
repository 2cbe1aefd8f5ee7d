"""What lesson 02's ranks run on, in words and numbers chosen from the run's device: how two
ranks talk (gloo over loopback TCP between CPU processes, NCCL between GPUs), and how many ranks
this machine can give a run of that device (GPUs, or CPU cores for one-thread CPU ranks)."""
from __future__ import annotations

import torch

from ...hardware import usable_cpu_cores
from ...i18n import ntr, tr


def _is_cuda(device) -> bool:
    """Whether ``device`` ("cuda", "cuda:0", a torch.device) is a GPU."""
    return torch.device(device).type == "cuda"


def rank_slots(device: str) -> tuple[int, str]:
    """How many ranks of ``device`` ("cpu", "cuda" or "cuda:0") this machine runs side by side, and what
    they are in words: one GPU per rank (NCCL cannot share one between two ranks of a job), or
    one usable CPU core per one-thread CPU rank."""
    if _is_cuda(device):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return count, ntr("{n} GPU here, one per rank", "{n} GPUs here, one per rank", count)
    count = usable_cpu_cores()
    return count, tr("{n} usable CPU cores here, one per rank", n=count)


def strong_scaling_worlds(device: str, batch_size: int, candidates=(4, 8, 16)) -> list[int]:
    """The world sizes beyond 2 a strong-scaling sweep of ``batch_size`` sequences can run on
    ``device`` here: each has a GPU or core per rank and splits the batch evenly."""
    slots, _ = rank_slots(device)
    return [w for w in candidates if w <= slots and batch_size % w == 0]


def how_ranks_talk(device: str) -> str:
    """One sentence on what carries a run's messages, chosen from its device (a run records
    "cuda:0" on a GPU: the device's type decides)."""
    if _is_cuda(device):
        return tr("Here each rank drives its own GPU, and NCCL (NVIDIA's collective library, "
                  "PyTorch's backend for GPUs) carries the messages from GPU to GPU over "
                  "whatever connects them in this machine (NVLink or PCIe).")
    return tr("Here the ranks are CPU processes on one machine, and gloo (PyTorch's backend for "
              "CPUs) sends each message over loopback TCP inside this machine, not over a link "
              "between devices.")
