"""RunSpec: everything that defines a run, validated before any process starts."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Optional

PRECISIONS = ("fp32", "bf16", "fp16")
OPTIMIZERS = ("adamw", "sgd")
DEVICES = ("auto", "cpu", "cuda")
MAX_SEQ_LEN = 256


@dataclass(frozen=True)
class Fault:
    """Make ``rank`` raise (or hang forever) at ``step``; parsed from ``"RANK:STEP[:hang]"``."""

    rank: int
    step: int
    hang: bool = False

    @classmethod
    def parse(cls, text: str) -> "Fault":
        parts = text.split(":")
        ok = len(parts) in (2, 3) and parts[0].isdigit() and parts[1].isdigit() and \
            (len(parts) == 2 or parts[2] in ("raise", "hang"))
        if not ok:
            raise ValueError(f"inject_fault={text!r} is invalid: allowed is 'RANK:STEP' or "
                             "'RANK:STEP:hang' with non-negative integers, e.g. '1:3'")
        return cls(int(parts[0]), int(parts[1]), len(parts) == 3 and parts[2] == "hang")

    def __str__(self) -> str:
        return f"{self.rank}:{self.step}" + (":hang" if self.hang else "")


@dataclass(frozen=True)
class RunSpec:
    """One training run. Every field is checked by :meth:`validate` (called on construction).

    ``batch_size`` is the *global* batch: all data-parallel ranks together, so one process and
    N ranks train on the same samples.
    """

    model: str = "gpt"                  # "gpt" (tiny GPT) or "mlp"
    model_size: Optional[str] = None    # a size of that model; None = the lesson default
    strategy: str = "ddp"               # see gpututor.parallel.STRATEGIES
    world_size: int = 2                 # number of ranks (processes)
    precision: str = "fp32"             # fp32 | bf16 | fp16 (fp16 needs CUDA)
    batch_size: int = 64                # global batch, in sequences (all ranks together)
    seq_len: int = 64                   # tokens per sequence
    steps: int = 30
    lr: float = 3e-3
    optimizer: str = "adamw"
    seed: int = 0
    device: str = "auto"                # auto | cpu | cuda
    threads_per_rank: int = 1           # CPU threads per rank (1 = no fight over cores)
    grad_accum: int = 1                 # micro-batches per optimizer step
    activation_checkpointing: bool = False
    inject_fault: Optional[str] = None  # "RANK:STEP" or "RANK:STEP:hang"
    timeout: float = 30.0               # seconds a rank may wait for a peer
    warmup_steps: int = 2               # steps left out of throughput figures
    checkpoint_every: int = 0           # save a checkpoint every K steps (0 = never)
    checkpoint_dir: Optional[str] = None  # where checkpoints go (step{K}.pt)
    resume: Optional[str] = None        # a checkpoint file to continue from (any world size)
    options: tuple = field(default=())  # strategy options as (name, value) pairs
    ranks_per_node: Optional[int] = None  # ranks on this machine (torchrun: LOCAL_WORLD_SIZE);
    #                                       None = all of them (launch() runs on one machine)

    def __post_init__(self):
        self.validate()

    # ---- derived values --------------------------------------------------------------------
    @property
    def fault(self) -> Optional[Fault]:
        return Fault.parse(self.inject_fault) if self.inject_fault else None

    @property
    def resolved_model_size(self) -> str:
        from .models import default_size
        return self.model_size or default_size(self.model)

    def resolved_device(self) -> str:
        """"cuda" or "cpu": ``device="auto"`` means CUDA when there is one GPU per rank
        (NCCL cannot put two ranks of one job on the same GPU), else CPU processes."""
        if self.device != "auto":
            return self.device
        import torch
        return "cuda" if torch.cuda.is_available() and \
            torch.cuda.device_count() >= self.local_ranks else "cpu"

    @property
    def local_ranks(self) -> int:
        return self.ranks_per_node or self.world_size

    def replace(self, **changes) -> "RunSpec":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def option(self, name: str, default=None):
        return dict(self.options).get(name, default)

    # ---- validation ------------------------------------------------------------------------
    def validate(self) -> None:
        from .models import MODEL_SIZES
        from .parallel import STRATEGIES

        _choice("model", self.model, tuple(MODEL_SIZES))
        if self.model_size is not None:
            _choice("model_size", self.model_size, tuple(MODEL_SIZES[self.model]))
        _choice("strategy", self.strategy, tuple(STRATEGIES))
        _int("world_size", self.world_size, 1, 256)
        _choice("precision", self.precision, PRECISIONS)
        _int("batch_size", self.batch_size, 1, 1 << 20)
        _int("seq_len", self.seq_len, 2, MAX_SEQ_LEN)
        _int("steps", self.steps, 1, 1_000_000)
        if not isinstance(self.lr, (int, float)) or isinstance(self.lr, bool) or \
                not math.isfinite(self.lr) or not 0 < self.lr <= 10:
            raise ValueError(f"lr={self.lr!r} is invalid: allowed is a number in (0, 10]")
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _int("seed", self.seed, 0, 2**31 - 1)
        _choice("device", self.device, DEVICES)
        _int("threads_per_rank", self.threads_per_rank, 1, 256)
        _int("grad_accum", self.grad_accum, 1, 1024)
        if not isinstance(self.activation_checkpointing, bool):
            raise ValueError(f"activation_checkpointing={self.activation_checkpointing!r} is "
                             "invalid: allowed is True or False")
        if not isinstance(self.timeout, (int, float)) or isinstance(self.timeout, bool) or \
                not math.isfinite(self.timeout) or not 1 <= self.timeout <= 3600:
            raise ValueError(f"timeout={self.timeout!r} is invalid: allowed is seconds in [1, 3600]")
        _int("warmup_steps", self.warmup_steps, 0, 1000)
        if self.ranks_per_node is not None:
            _int("ranks_per_node", self.ranks_per_node, 1, self.world_size)
        if not isinstance(self.options, tuple):
            raise ValueError(f"options={self.options!r} is invalid: allowed is a tuple of "
                             "(name, value) pairs")
        _check_options(self.options, STRATEGIES[self.strategy])
        self._validate_checkpointing(STRATEGIES[self.strategy])
        fault = self.fault
        if fault is not None and fault.rank >= self.world_size:
            raise ValueError(f"inject_fault={self.inject_fault!r} is invalid: rank {fault.rank} "
                             f"does not exist with world_size={self.world_size} "
                             f"(allowed ranks 0..{self.world_size - 1})")
        if self.device == "cuda":
            import torch
            if not torch.cuda.is_available():
                raise ValueError("device='cuda' is invalid here: no CUDA device is visible; "
                                 "allowed on this machine: 'auto' or 'cpu'")
            if torch.cuda.device_count() < self.local_ranks:
                raise ValueError(f"world_size={self.world_size} is invalid with device='cuda': "
                                 f"this machine has {torch.cuda.device_count()} GPU(s) and NCCL "
                                 f"needs one per rank ({self.local_ranks} here); allowed: at most "
                                 f"{torch.cuda.device_count()} ranks per machine, or device="
                                 "'auto'/'cpu'")
        if self.precision == "fp16" and self.resolved_device() != "cuda":
            raise ValueError("precision='fp16' is invalid on CPU: fp16 is a GPU format; "
                             "allowed here: 'fp32' or 'bf16'")
        STRATEGIES[self.strategy].validate(self)
        dp = STRATEGIES[self.strategy].data_parallel_size(self)
        if self.batch_size % (dp * self.grad_accum):
            raise ValueError(
                f"batch_size={self.batch_size} is invalid: it must split evenly into "
                f"{dp} data-parallel rank(s) x grad_accum={self.grad_accum} micro-batches "
                f"(allowed: a multiple of {dp * self.grad_accum})")


    def _validate_checkpointing(self, strategy) -> None:
        _int("checkpoint_every", self.checkpoint_every, 0, 1_000_000)
        if self.checkpoint_every and not self.checkpoint_dir:
            raise ValueError(f"checkpoint_dir={self.checkpoint_dir!r} is invalid with "
                             f"checkpoint_every={self.checkpoint_every}: allowed is a folder path")
        if (self.checkpoint_every or self.resume) and not strategy.supports_checkpoint:
            raise ValueError(f"strategy={strategy.name!r} is invalid with checkpointing: allowed "
                             "strategies are those that save full state (e.g. 'single', 'ddp')")
        if self.resume is not None:
            import os
            if not isinstance(self.resume, str) or not os.path.isfile(self.resume):
                raise ValueError(f"resume={self.resume!r} is invalid: allowed is the path of an "
                                 "existing checkpoint file")


GLOBAL_OPTIONS = ("save_state", "sizes", "ops", "iters", "candidate")  # tests, benchmarks, exercises


def _check_options(options: tuple, strategy) -> None:
    allowed = GLOBAL_OPTIONS + tuple(strategy.options)
    for pair in options:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
            raise ValueError(f"options entry {pair!r} is invalid: allowed is a (name, value) pair")
        if pair[0] not in allowed:
            raise ValueError(f"option {pair[0]!r} is invalid for strategy={strategy.name!r}: "
                             f"allowed options are {', '.join(allowed)}")


def _choice(name: str, value, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is invalid: allowed values are "
                         + ", ".join(repr(a) for a in allowed))


def _int(name: str, value, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name}={value!r} is invalid: allowed is an integer in [{low}, {high}]")
