"""Where a lesson's runs go: :func:`device_line` says it in one sentence, read from the device
``RunSpec.pin_device`` chose and the GPUs this machine has (lessons 03 and 04 print it);
:func:`shares_cores` says whether a run's ranks took turns on the CPU's cores."""
from __future__ import annotations

from ...i18n import tr


def device_line(spec, ranks: int) -> str:
    """The sentence that says where every run of the lesson runs: ``spec`` is pinned for runs
    of up to ``ranks`` ranks (``RunSpec.pin_device``), so a machine with fewer GPUs than that
    runs them all as CPU processes."""
    import torch
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    gpus = max(0, gpus - spec.first_gpu)
    if torch.device(spec.device).type == "cuda":
        return tr("every run below: one GPU per rank ({gpus} GPUs here, runs of up to {ranks} "
                  "ranks)", gpus=gpus, ranks=ranks)
    if gpus == 0:
        return tr("every run below: one CPU process per rank (no GPU visible here)")
    return tr("every run below: one CPU process per rank (GPUs here: {gpus}, fewer than the "
              "{ranks} ranks of the largest run, and every run stays on one kind of device)",
              gpus=gpus, ranks=ranks)


def shares_cores(device: str, ranks: int, cores: int) -> bool:
    """Whether ``ranks`` ranks on ``device`` were CPU processes outnumbering the usable CPU
    ``cores`` (then they took turns on the cores, and every time measured holds that)."""
    import torch
    return torch.device(device).type != "cuda" and ranks > cores
