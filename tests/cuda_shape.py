"""A lesson's kernel shaped as a CUDA machine's, on this CPU: for tests/test_exercises.py.

``install(gpus, cores)``, run as a hidden first cell of a lesson, makes what the lesson and
gpututor see in the kernel that of a machine with ``gpus`` CUDA devices and ``cores`` usable CPU
cores, while every rank still runs on this CPU:

- ``torch.cuda.is_available()``, ``device_count()``, ``get_device_name()`` and
  ``get_device_properties()`` answer for ``gpus`` H100s when called from the notebook's code or
  from gpututor (torch's own calls get the true answers), so ``RunSpec.device_choice``,
  ``pin_device``, ``check_machine``, ``hardware.describe`` and the lessons' machine checks pick
  CUDA as they would there, and refuse what they would refuse there (9 ranks on 8 GPUs);
- ``gpututor.hardware.usable_cpu_cores()`` returns ``cores``, wherever gpututor imported it;
- a ``launch()`` whose spec resolves to CUDA starts its ranks with ``device="cpu"`` (the only
  change the ranks see), and each training record that comes back is shaped as a CUDA rank's:
  its ``device`` is ``cuda:N``, the allocator's peak is a number, and the figures CUDA leaves
  unmeasured are None (:func:`shaped_record`), so the summary is made, by the package's own
  ``summarize``, of what a CUDA run would report;
- a ``%ranks`` group that resolves to CUDA cannot be stood in for (its cells run NCCL on the
  tensors they make): starting one raises :class:`NeedsCuda`, which names the shape.

Nothing here changes the package: a kernel without this cell runs as it always does.
"""
from __future__ import annotations

import sys
import types

# The strategies whose exposed communication a CUDA run leaves unmeasured (comm_s and compute_s
# None): their collectives run on side streams or are waited for by the stream, not the host.
# fsdp: FSDP2's all-gathers and reduce-scatters on its own streams (measure/timing.py,
# CollectiveTimer: ``exposed_unknown``); cp: ring attention's shifts (context_parallel/
# cp_communications.py, Ring.arrived). A layout with either part ("ddp+cp", "fsdp+tp") too.
UNKNOWN_EXPOSED_ON_CUDA = {"fsdp", "cp"}
GPU_NAME = "NVIDIA H100 80GB HBM3"   # catalog.GPUS["H100-80GB"].cuda_names
GPU_MEMORY = 80 * 10**9


class NeedsCuda(RuntimeError):
    """A cell that would need a real CUDA device in this shape."""


def _from_lesson(depth: int = 2) -> bool:
    """Whether the caller ``depth`` frames up is the notebook's code or gpututor's."""
    name = sys._getframe(depth).f_globals.get("__name__", "")
    return name == "__main__" or name == "gpututor" or name.startswith("gpututor.")


def shaped_record(spec, record: dict) -> dict:
    """``record`` (one rank's training step) as a CUDA rank's of ``spec`` would be."""
    if "step_time_s" not in record:   # a task's record (a benchmark): its own fields
        return record
    shaped = dict(record)
    rank = record.get("rank", 0)
    shaped["device"] = f"cuda:{spec.first_gpu + rank % spec.local_ranks}"
    # the CUDA allocator's high-water mark is always a number there (worker.py, MemoryFields)
    shaped["mem_allocator_peak"] = record.get("mem_peak") or record.get("mem_setup_peak") or 0
    if spec.world_size > 1 and set(spec.strategy.split("+")) & UNKNOWN_EXPOSED_ON_CUDA:
        shaped["comm_s"] = shaped["compute_s"] = None   # record_fields.step_record: `waited`
    return shaped


def install(gpus: int, cores: int) -> None:
    """Shape this kernel as a machine with ``gpus`` GPUs and ``cores`` usable cores (above)."""
    import torch

    import gpututor.hardware
    import gpututor.runtime.launcher as launcher
    import gpututor.runtime.ranks.group as group

    real = types.SimpleNamespace(available=torch.cuda.is_available, count=torch.cuda.device_count,
                                 name=torch.cuda.get_device_name,
                                 props=torch.cuda.get_device_properties,
                                 cores=gpututor.hardware.usable_cpu_cores,
                                 start_ranks=launcher.start_ranks, add=launcher.Run._add,
                                 start_rank=group.start_rank)

    def is_available():
        return gpus > 0 if _from_lesson() else real.available()

    def device_count():
        return gpus if _from_lesson() else real.count()

    def get_device_name(device=None):
        return GPU_NAME if _from_lesson() else real.name(device)

    def get_device_properties(device=None):
        if not _from_lesson():
            return real.props(device)
        return types.SimpleNamespace(name=GPU_NAME, total_memory=GPU_MEMORY, major=9, minor=0,
                                     multi_processor_count=132)

    def usable_cpu_cores():
        return cores

    def start_ranks(ctx, spec, payload, store_path, start_time):
        if spec.resolved_device() == "cuda":   # the ranks run here, on the CPU
            import cloudpickle
            run_spec, task = cloudpickle.loads(payload)
            spec = spec.replace(device="cpu")
            payload = cloudpickle.dumps((run_spec.replace(device="cpu"), task))
        return real.start_ranks(ctx, spec, payload, store_path, start_time)

    def _add(self, record):
        if self.spec.resolved_device() == "cuda":
            record = shaped_record(self.spec, record)
        return real.add(self, record)

    def start_rank(ctx, rank, world_size, spec, tmp):
        if spec.resolved_device() == "cuda":
            raise NeedsCuda(
                f"CUDA-shaped test ({gpus} GPUs, {cores} cores): this group of {world_size} "
                f"ranks resolves to CUDA (a GPU per rank), whose cells would run NCCL on the "
                f"tensors they make; it cannot run on this CPU. Ask for the device the cells "
                f"need (--device cpu for CPU tensors), or make the cells use `device`")
        return real.start_rank(ctx, rank, world_size, spec, tmp)

    torch.cuda.is_available, torch.cuda.device_count = is_available, device_count
    torch.cuda.get_device_name, torch.cuda.get_device_properties = (get_device_name,
                                                                    get_device_properties)
    for module in [m for n, m in list(sys.modules.items())
                   if n == "gpututor" or n.startswith("gpututor.")]:
        if getattr(module, "usable_cpu_cores", None) is real.cores:
            module.usable_cpu_cores = usable_cpu_cores
    launcher.start_ranks, launcher.Run._add, group.start_rank = start_ranks, _add, start_rank


def setup_cell(gpus: int, cores: int) -> str:
    """The hidden first cell that installs the shape in a lesson's kernel."""
    from pathlib import Path
    here = str(Path(__file__).resolve().parent)
    return (f"# added by tests/test_exercises.py: a CUDA-shaped kernel (tests/cuda_shape.py)\n"
            f"import sys\nsys.path.append({here!r})\nimport cuda_shape\n"
            f"cuda_shape.install(gpus={gpus}, cores={cores})")
