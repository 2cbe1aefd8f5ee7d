"""Refuse every built-in collective of ``torch.distributed`` while a block runs, however it is
reached; point-to-point ``send``/``recv`` keep working.

It lives in the runtime so that both its users reach it with the imports flowing one way: the
persistent ranks' guarded mode (``%%ranks --no-collectives``, runtime/ranks) and the exercise
checkers of ``gpututor.lessons`` (``lessons/guards.py`` re-exports it), which run a learner's
collective built from messages with the built-in ones refused.
"""
from __future__ import annotations

import torch
import torch.distributed as dist


# every collective a rank could reach, by the method of the process group (what dist.all_reduce
# and friends call, however they were imported), of its backend object, or by torch's op
# namespaces (the functional collectives); only point-to-point send and recv stay
GROUP_COLLECTIVES = ("allreduce", "allreduce_coalesced", "allgather", "allgather_coalesced",
                     "allgather_into_tensor_coalesced", "all_gather_single",
                     "all_gather_single_coalesced", "_allgather_base", "alltoall", "alltoall_base",
                     "all_to_all_single", "barrier", "monitored_barrier", "broadcast", "gather",
                     "reduce", "reduce_scatter", "reduce_scatter_single",
                     "reduce_scatter_single_coalesced", "reduce_scatter_tensor_coalesced",
                     "_reduce_scatter_base", "scatter")
OP_COLLECTIVES = {"_c10d_functional": ("all_reduce", "all_reduce_", "all_reduce_coalesced",
                                       "all_reduce_coalesced_", "all_gather_into_tensor",
                                       "all_gather_into_tensor_coalesced",
                                       "all_gather_into_tensor_out",
                                       "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced",
                                       "all_to_all_single", "broadcast", "broadcast_"),
                  "c10d": ("allreduce_", "allreduce_coalesced_", "allgather_",
                           "allgather_coalesced_", "allgather_into_tensor_coalesced_",
                           "_allgather_base_", "alltoall_", "alltoall_base_", "barrier",
                           "broadcast_", "gather_", "reduce_", "reduce_scatter_",
                           "_reduce_scatter_base_", "reduce_scatter_tensor_coalesced_",
                           "scatter_", "monitored_barrier_")}


POINT_TO_POINT_OPS = ("send", "recv_", "recv_any_source_", "isend", "irecv", "batch_p2p_ops",
                      "wait_tensor", "check_for_nan")


def op_collectives() -> dict[str, tuple[str, ...]]:
    """Every collective op torch has registered in a c10d namespace (``_c10d_functional``, its
    ``_autograd`` twin, ``c10d``, and any a later torch adds), with the ones listed above:
    all but the point-to-point ops."""
    found = {space: set(names) for space, names in OP_COLLECTIVES.items()}
    for qualified in torch._C._dispatch_get_all_op_names():
        space, _, name = qualified.partition("::")
        if "c10d" in space and name not in POINT_TO_POINT_OPS:
            found.setdefault(space, set()).add(name)
    return {space: tuple(sorted(names)) for space, names in found.items()}


class OnlyPointToPoint:
    """While active, every built-in collective raises, however it is reached: a function of
    ``torch.distributed`` (bound before or after), ``distributed_c10d``, the group object's own
    methods, its backend's, or torch's op namespaces (functional collectives). The names tried
    are in ``used``. ``dist.send``/``recv``/``isend``/``irecv`` keep working."""

    def __init__(self):
        self.used: list[str] = []
        self.saved: list[tuple[object, str, object]] = []

    def _refuse(self, name: str):
        def call(*args, **kwargs):
            self.used.append(name)
            raise RuntimeError(f"the built-in collective {name} is not allowed here: build it "
                               "from dist.isend / dist.recv")
        return call

    def __enter__(self):
        group = dist.group.WORLD
        classes = {type(group)}
        backend = getattr(group, "_get_backend", None)
        if backend is not None:   # every device's backend: gloo for CPU tensors, NCCL for CUDA's
            for device in ("cpu", "cuda"):
                try:
                    classes.add(type(backend(torch.device(device))))
                except (RuntimeError, ValueError):   # no backend for that device in this group
                    pass
        for cls in classes:
            for name in GROUP_COLLECTIVES:
                owner = next((c for c in cls.__mro__ if name in vars(c)), None)
                if owner is not None:
                    self.saved.append((owner, name, vars(owner)[name]))
                    setattr(owner, name, self._refuse(name))
        for space, names in op_collectives().items():
            namespace = getattr(torch.ops, space)
            for name in names:
                if hasattr(namespace, name):
                    self.saved.append((namespace, name, getattr(namespace, name)))
                    setattr(namespace, name, self._refuse(f"torch.ops.{space}.{name}"))
        return self

    def __exit__(self, *exc):
        for owner, name, original in reversed(self.saved):
            setattr(owner, name, original)
        self.saved.clear()
        return False
