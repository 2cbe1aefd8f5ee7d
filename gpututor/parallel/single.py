"""One process, one device: the training loop every other strategy is compared with."""
from __future__ import annotations

from ..checks import InvalidValue
from ..config import RUN_PRECISIONS
from .base import MemoryLayout, Strategy


class Single(Strategy):
    name = "single"
    description = "one process trains on the whole batch"
    memory_layout = MemoryLayout(note="one process: the reference")

    precisions = RUN_PRECISIONS   # fp8: torchao's Float8 Linears (precision/fp8_training.py)

    def validate(self, spec) -> None:
        super().validate(spec)
        if spec.world_size != 1:
            raise InvalidValue("world_size", spec.world_size, "1 (use 'ddp' for more ranks)",
                               "for strategy='single'")
