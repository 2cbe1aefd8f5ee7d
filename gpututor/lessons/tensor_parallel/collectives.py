"""Lesson 04: count the collectives DTensor's tensor-parallel plan runs in one training step."""
from __future__ import annotations

import warnings

import torch.nn.functional as F
from torch.distributed.tensor.debug import CommDebugMode

from ...data import batches
from ...measure.timing import StepContext
from ...models import build_model
from ...parallel import check_spec
from ...parallel.tensor_parallel.dtensor import TensorParallelDTensor
from ...runtime.launcher import launch


def count_task(spec, rank, world, device, emit) -> None:
    """In every rank: one forward and backward of the plan's model under ``CommDebugMode``."""
    warnings.filterwarnings("ignore", message="Full backward hook")  # token ids need no grad
    model = TensorParallelDTensor().wrap(build_model(spec).to(device),
                                         StepContext(spec, rank, world, device))
    inputs, targets = next(iter(batches(spec)))
    mode = CommDebugMode()
    with mode:   # one mode for both passes: it tracks modules from forward into backward
        loss = F.cross_entropy(model(inputs.to(device)).flatten(0, 1), targets.to(device).flatten())
        forward = dict(mode.get_comm_counts())
        loss.backward()
        total = dict(mode.get_comm_counts())
    name = lambda op: str(op).split("op='")[-1].split("'")[0].split(".")[-1]
    emit({"step": 0, "forward": {name(k): v for k, v in forward.items()},
          "backward": {name(k): v - forward.get(k, 0) for k, v in total.items()}})


def count_collectives(spec) -> dict[str, dict[str, int]]:
    """DTensor's collectives in one training step of ``spec`` (strategy 'tp-dtensor'), counted
    by ``CommDebugMode`` in rank 0: ``{"forward": {"all_reduce": n, ...}, "backward": {...}}``."""
    spec = check_spec(spec.replace(strategy="tp-dtensor", steps=1))
    records = launch(spec, task=count_task).wait()
    rank0 = next(r for r in records if r["rank"] == 0)
    return {"forward": rank0["forward"], "backward": rank0["backward"]}
