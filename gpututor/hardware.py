"""What this machine gives a run: CPU cores this process may use, torch, and any CUDA devices.

``os.cpu_count()`` counts the machine's cores, not the ones a container or a task set lets this
process use. The usable count is the smaller of the CPU affinity mask and the cgroup CPU quota.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from .i18n import tr


def _cgroup_quota_cores() -> float | None:
    """Cores allowed by the cgroup CPU quota (v2 ``cpu.max`` or v1 CFS), or None if unlimited."""
    root = Path("/sys/fs/cgroup")
    own = ""
    try:  # cgroup v2: the line "0::/path" names this process's group
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                own = line[3:].lstrip("/")
    except OSError:
        pass
    for folder in dict.fromkeys([root / own, root]):
        try:
            quota, period = (folder / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        except (OSError, ValueError):
            continue
    try:  # cgroup v1
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota <= 0 else quota / period
    except (OSError, ValueError):
        return None


def usable_cpu_cores() -> int:
    """CPU cores this process may run on: affinity mask, capped by the cgroup quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_quota_cores()
    if quota is not None:
        cores = min(cores, max(1, math.floor(quota)))
    return cores


def describe() -> dict:
    """A dict of what a run can use here: CPU cores, torch version, CUDA devices (name, bytes)."""
    import torch

    gpus = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            gpus.append({"index": i, "name": props.name, "memory_bytes": props.total_memory})
    return {
        "cpu_cores_usable": usable_cpu_cores(),
        "cpu_cores_machine": os.cpu_count(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpus": gpus,
    }


def summary(info: dict | None = None) -> str:
    """A few lines for a notebook: what :func:`describe` found, in words."""
    info = info or describe()
    lines = [tr("CPU cores this process may use: {usable} (the machine has {machine})",
                usable=info["cpu_cores_usable"], machine=info["cpu_cores_machine"]),
             tr("PyTorch {torch}, built with CUDA {cuda}", torch=info["torch"], cuda=info["cuda"])
             if info["cuda"] else tr("PyTorch {torch}, CPU build", torch=info["torch"])]
    if info["gpus"]:
        for gpu in info["gpus"]:
            lines.append(f"GPU {gpu['index']}: {gpu['name']}, "
                         f"{gpu['memory_bytes'] / 2**30:.1f} GiB")
    else:
        lines.append(tr("No CUDA GPU visible: each rank will be a CPU process with one thread."))
    return "\n".join(lines)
