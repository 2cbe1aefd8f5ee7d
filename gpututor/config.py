"""What a run is: :class:`RunSpec`, checked field by field.

This module is near the bottom of the package: it imports only :mod:`gpututor.checks` and
:mod:`gpututor.model_sizes`. It checks every
field on its own (type, range, choice, combinations of fields), and looks at nothing outside the
spec: no file, no device. What depends on the strategy (its name, its options, how the batch
splits over its ranks) is checked by :func:`gpututor.parallel.check_spec`, and what is on this
machine (the ``resume`` folder, a GPU per rank) where the run starts: :func:`gpututor.launch`
does both before any process starts.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Optional

from . import checks
from .checks import MAX_DEVICE_MEMORY, parse_bytes, parse_mesh   # RunSpec's normal forms
from .checks import InvalidValue
from .model_sizes import DEFAULT_SIZES, MODEL_SIZES   # the sizes a spec may name

PRECISIONS = ("fp32", "bf16", "fp16")
# what a run trains in: those, and "fp8" (torchao's Float8 Linears, the rest fp32:
# precision/fp8_training.py), which is no dtype of its own
RUN_PRECISIONS = PRECISIONS + ("fp8",)
FP8_KEPT = ("head",)   # fp8: the Linears left in high precision (the output layer, as torchao's filter)
OPTIMIZERS = ("adamw", "sgd")   # what a run trains with (the planner prices more: plan/memory.py)
ATTENTION = ("naive", "sdpa")   # the GPT's attention: T x T scores, or torch's fused SDPA
CORPORA = {"en": "corpus.txt",      # the text trained on, a file of data/ (data/README.md):
           "zh": "corpus_zh.txt"}   # English docstrings (ASCII), Chinese poems (UTF-8)
DEVICES = ("auto", "cpu", "cuda")
MAX_SEQ_LEN = 256
MAX_RESTARTS = 100   # restarts of one run (a run that fails this often has a bug, not bad luck)


def torch_dtype(precision: str):
    """The ``torch.dtype`` of a precision name (``"fp32"``, ``"bf16"``, ``"fp16"``)."""
    import torch
    checks.choice("precision", precision, PRECISIONS)
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


@dataclass(frozen=True)
class Fault:
    """Make ``rank`` raise (or hang forever) at ``step``; parsed from ``"RANK:STEP[:hang]"``."""

    rank: int
    step: int
    hang: bool = False

    @classmethod
    def parse(cls, text: str) -> "Fault":
        parts = text.split(":")
        # ASCII digits only: str.isdigit() also accepts "²" or "٣", which int() then refuses
        ok = len(parts) in (2, 3) and all(p.isascii() and p.isdigit() for p in parts[:2]) and \
            (len(parts) == 2 or parts[2] in ("raise", "hang"))
        if not ok:
            raise InvalidValue("inject_fault", text, "'RANK:STEP' or 'RANK:STEP:hang' with "
                               "non-negative integers, e.g. '1:3'")
        return cls(int(parts[0]), int(parts[1]), len(parts) == 3 and parts[2] == "hang")

    def __str__(self) -> str:
        return f"{self.rank}:{self.step}" + (":hang" if self.hang else "")


# RunSpec's fields by what they say (RunSpec.section(name) gives one section's values; a test
# checks that every field is in exactly one)
SECTIONS = {
    "what": ("model", "model_size", "corpus", "seq_len", "batch_size", "steps", "lr",
             "optimizer", "seed", "attention", "capacity_factor"),          # what to train
    "how": ("strategy", "world_size", "mesh", "options", "precision", "grad_accum",
            "activation_checkpointing"),                                   # how to split it
    "where": ("device", "first_gpu", "ranks_per_node", "threads_per_rank", "device_memory",
              "peak_flops", "timeout"),                                                  # on what machine
    "harness": ("warmup_steps", "inject_fault", "checkpoint_every", "checkpoint_dir",
                "checkpoint_async", "resume", "max_restarts", "save_state",
                "timeline"),                                                # around the loop
}


@dataclass(frozen=True)
class RunSpec:
    """One training run. Every field is checked by :meth:`validate` (called on construction).

    The fields come in four sections (:data:`SECTIONS`, :meth:`section`): **what** to train
    (model, data, steps, optimizer), **how** to split it over ranks (strategy, world size, grid,
    precision), **where** it runs (device, ranks per node, memory cap, peak FLOP/s) and the
    **harness**'s hooks (warm-up steps out of throughput, faults, checkpoints, restarts).
    ``validate`` checks values only; what this machine can do (a GPU per rank, fp16) is checked
    where the ranks start (``gpututor.runtime.guard.check_machine``), so a spec for another
    machine can be written here.

    ``batch_size`` is the *global* batch: all data-parallel ranks together, so one process and
    N ranks train on the same samples.
    """

    model: str = "gpt"                  # "gpt" (tiny GPT), "moe" (its mixture of experts), "mlp"
    model_size: Optional[str] = None    # a size of that model; None = the lesson default
    strategy: str = "ddp"               # see gpututor.parallel.STRATEGIES (checked there)
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
    checkpoint_dir: Optional[str] = None  # where checkpoints go (a folder step{K} each)
    checkpoint_async: bool = False      # save with DCP's async_save (training waits for the copy)
    resume: Optional[str] = None        # a checkpoint folder to continue from (any layout)
    max_restarts: int = 0               # a rank died: restart all from the last checkpoint, N times
    options: tuple = field(default=())  # strategy options as (name, value) pairs
    save_state: Optional[str] = None    # rank 0 writes the trained weights here (a .pt file)
    ranks_per_node: Optional[int] = None  # ranks on this machine (torchrun: LOCAL_WORLD_SIZE);
    #                                       None = all of them (launch() runs on one machine)
    mesh: Optional[dict] = None         # the rank grid, e.g. {"dp": 2, "tp": 2}; None = one dim
    device_memory: Optional[int] = None  # bytes each rank may hold ("48MB" and "2GB" work too);
    #                                      None = no cap on CPU, the real capacity on CUDA
    attention: str = "naive"            # GPT attention: naive | sdpa (same numbers, see attention.py)
    corpus: str = "en"                  # the text: "en" (English docstrings) or "zh" (Chinese poems)
    peak_flops: Optional[float] = None  # the device's dense peak FLOP/s at this precision, for
    #                                     MFU; None = the catalogue's, matched by exact CUDA name
    capacity_factor: Optional[float] = None  # moe: the experts' capacity factor; None = the size's
    first_gpu: int = 0                  # on CUDA, local rank r uses GPU first_gpu + r (two runs
    #                                     side by side on one machine, each on its own GPUs)
    timeline: bool = False              # each step's record gets its compute and collective
    #                                     spans on one clock (gpututor.measure.timeline)

    def __post_init__(self):
        # normal forms first (frozen: set through object.__setattr__), then every check
        object.__setattr__(self, "mesh", parse_mesh(self.mesh))
        object.__setattr__(self, "device_memory", parse_bytes(self.device_memory))
        self.validate()

    # ---- derived values --------------------------------------------------------------------
    @property
    def fault(self) -> Optional[Fault]:
        return Fault.parse(self.inject_fault) if self.inject_fault else None

    @property
    def resolved_model_size(self) -> str:
        return self.model_size or DEFAULT_SIZES[self.model]

    @property
    def model_config(self):
        """The size's config dataclass (``GPTConfig``, ``MoEConfig`` or ``MLPConfig``) with the
        spec's ``capacity_factor`` if it sets one. Its ``vocab_size`` is the placeholder: the
        shape a run trains, with its corpus's vocabulary, is ``models.config_of(spec)``."""
        cfg = MODEL_SIZES[self.model][self.resolved_model_size]
        if self.capacity_factor is not None:
            cfg = dataclasses.replace(cfg, capacity_factor=self.capacity_factor)
        return cfg

    def resolved_device(self) -> str:
        """"cuda" or "cpu": ``device="auto"`` means CUDA when there is one GPU per rank
        (NCCL cannot put two ranks of one job on the same GPU), else CPU processes."""
        return self.device_choice()[0]

    def device_choice(self, ranks: Optional[int] = None) -> tuple[str, str]:
        """``(device, why)``: what ``device="auto"`` picks for runs of ``ranks`` ranks on this
        machine (default: this run's ranks here), and the reason in words."""
        if self.device != "auto":
            return self.device, f"device={self.device!r} was asked for"
        import torch
        ranks = ranks or self.local_ranks
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        gpus = max(0, gpus - self.first_gpu)          # the GPUs from first_gpu on
        here = f"from GPU {self.first_gpu} on" if self.first_gpu else "here"
        if gpus == 0:
            return "cpu", ("auto: no GPU visible" + (f" {here}" if self.first_gpu else "")
                           + ", every rank is a CPU process")
        if gpus >= ranks:
            return "cuda", f"auto: {gpus} GPU(s) {here}, one per rank"
        return "cpu", (f"auto: {gpus} GPU(s) {here}, fewer than the {ranks} ranks (NCCL needs one "
                       "GPU per rank), so every rank is a CPU process")

    def pin_device(self, max_ranks: int) -> "RunSpec":
        """A copy whose ``device`` is what "auto" picks for runs of up to ``max_ranks`` ranks, so
        that every run made from it, on 1 rank or on ``max_ranks``, runs on one kind of device
        and their speedups compare like with like (on a 1-GPU machine: all on CPU)."""
        return self.replace(device=self.device_choice(max_ranks)[0])

    @property
    def local_ranks(self) -> int:
        return self.ranks_per_node or self.world_size

    @property
    def mesh_shape(self) -> dict:
        """The grid's degrees in grid order, e.g. ``{"dp": 2, "tp": 2}`` ({} without a mesh)."""
        return dict(self.mesh or ())

    def replace(self, **changes) -> "RunSpec":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def section(self, name: str) -> dict:
        """The fields of section ``name`` ("what", "how", "where", "harness") and their values."""
        checks.choice("section", name, SECTIONS)
        return {f: getattr(self, f) for f in SECTIONS[name]}

    def _repr_html_(self) -> str:
        """In a notebook: the fields as a table, one column per section (the plain repr is one
        line wider than any cell)."""
        import html
        cells = "".join("<td style='vertical-align:top;text-align:left'>" + "<br>".join(
            f"{f} = <code>{html.escape(repr(v))}</code>" for f, v in self.section(name).items())
            + "</td>" for name in SECTIONS)
        head = "".join(f"<th style='text-align:left'>{name}</th>" for name in SECTIONS)
        return f"<table><tr>{head}</tr><tr>{cells}</tr></table>"

    def option(self, name: str, default=None):
        return dict(self.options).get(name, default)

    # ---- validation ------------------------------------------------------------------------
    def validate(self) -> None:
        """Check every field on its own; ``ValueError`` names the field, the value and what is
        allowed. (The strategy's own checks: :func:`gpututor.parallel.check_spec`.)"""
        checks.choice("model", self.model, tuple(MODEL_SIZES))
        if self.model_size is not None:
            checks.choice("model_size", self.model_size, tuple(MODEL_SIZES[self.model]))
        if not isinstance(self.strategy, str) or not self.strategy:
            raise InvalidValue("strategy", self.strategy, "the name of a strategy (see "
                               "gpututor.parallel.STRATEGIES)")
        checks.integer("world_size", self.world_size, 1, 256)
        checks.choice("precision", self.precision, RUN_PRECISIONS)
        checks.integer("batch_size", self.batch_size, 1, 1 << 20)
        checks.integer("seq_len", self.seq_len, 2, MAX_SEQ_LEN)
        checks.integer("steps", self.steps, 1, 1_000_000)
        checks.number_where("lr", self.lr, lambda v: 0 < v <= 10, "a number in (0, 10]")
        checks.choice("optimizer", self.optimizer, OPTIMIZERS)
        checks.choice("attention", self.attention, ATTENTION)
        checks.choice("corpus", self.corpus, tuple(CORPORA))
        checks.integer("seed", self.seed, 0, 2**31 - 1)
        checks.choice("device", self.device, DEVICES)
        checks.integer("threads_per_rank", self.threads_per_rank, 1, 256)
        checks.integer("grad_accum", self.grad_accum, 1, 1024)
        checks.where("activation_checkpointing", self.activation_checkpointing, checks.is_bool,
                     "True or False")
        checks.number_where("timeout", self.timeout, lambda v: 1 <= v <= 3600,
                            "seconds in [1, 3600]")
        checks.integer("warmup_steps", self.warmup_steps, 0, 1000)
        checks.integer("first_gpu", self.first_gpu, 0, 1023)
        if self.ranks_per_node is not None:
            checks.integer("ranks_per_node", self.ranks_per_node, 1, self.world_size)
        if not isinstance(self.options, tuple) or not all(
                isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in self.options):
            raise InvalidValue("options", self.options, "a tuple of (name, value) pairs, e.g. "
                               "(('schedule', 'gpipe'),)")
        if self.save_state is not None and not (isinstance(self.save_state, str) and self.save_state):
            raise InvalidValue("save_state", self.save_state, "None or the path of a file to "
                               "write")
        self._validate_checkpointing()
        self._validate_moe()
        if self.mesh is not None:
            product = math.prod(degree for _, degree in self.mesh)
            if product != self.world_size:
                raise InvalidValue("mesh", self.mesh_shape, "a grid whose degrees multiply to "
                                   f"the world size (these multiply to {product})",
                                   f"with world_size={self.world_size}")
        if self.device_memory is not None and not 1 <= self.device_memory <= MAX_DEVICE_MEMORY:
            raise InvalidValue("device_memory", self.device_memory, "a positive number of bytes "
                               f"up to 2**50 ({MAX_DEVICE_MEMORY}), e.g. 48000000, '48MB' or "
                               "'2GB'")
        if self.peak_flops is not None:
            checks.number_where("peak_flops", self.peak_flops, lambda v: 1e6 <= v <= 1e18,
                                "None or the device's peak FLOP/s in [1e6, 1e18], e.g. 362e12")
        fault = self.fault
        if fault is not None and fault.rank >= self.world_size:
            raise InvalidValue("inject_fault", self.inject_fault,
                               f"a fault of a rank in 0..{self.world_size - 1}",
                               f"with world_size={self.world_size}: rank {fault.rank} does not "
                               "exist")
        # what the machine can do (a GPU per rank, fp16) is not a value of the spec: checked
        # where the ranks start (gpututor.runtime.guard.check_machine)

    def _validate_moe(self) -> None:
        if self.capacity_factor is not None:
            if self.model != "moe":
                raise InvalidValue("capacity_factor", self.capacity_factor,
                                   "None (a capacity factor is for model='moe' only)",
                                   f"with model={self.model!r}")
            checks.number_where("capacity_factor", self.capacity_factor, lambda v: 0 < v <= 64,
                                "None or a number in (0, 64]")
        if self.model == "moe" and self.activation_checkpointing:
            raise InvalidValue("activation_checkpointing", self.activation_checkpointing,
                               "False (recomputing a MoE block would count its tokens twice)",
                               "with model='moe'")

    def _validate_checkpointing(self) -> None:
        checks.integer("checkpoint_every", self.checkpoint_every, 0, 1_000_000)
        if self.checkpoint_every and not self.checkpoint_dir:
            raise InvalidValue("checkpoint_dir", self.checkpoint_dir, "a folder path",
                               f"with checkpoint_every={self.checkpoint_every}")
        checks.where("checkpoint_async", self.checkpoint_async, checks.is_bool, "True or False")
        checks.where("timeline", self.timeline, checks.is_bool, "True or False")
        checks.integer("max_restarts", self.max_restarts, 0, MAX_RESTARTS)
        if self.max_restarts and not self.checkpoint_every:
            raise InvalidValue("max_restarts", self.max_restarts, "0, or restarts with "
                               "checkpoint_every > 0 (a restart resumes from the last complete "
                               "checkpoint)", "with checkpoint_every=0")
        # resume: a path only; the folder may be on another machine, so it is looked at where
        # the run starts (launch() and the command line: runtime/launcher.py, runtime/cli.py)
        if self.resume is not None:
            checks.where("resume", self.resume, lambda v: isinstance(v, str) and v != "",
                         "None or the path of a checkpoint folder (checkpoint_dir/step{K})")

