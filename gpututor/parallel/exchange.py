"""Gather values from every rank as tensors, never as pickles.

torch's object collectives (``all_gather_object``, ``gather_object``, ``send_object_list``, ...)
pickle each rank's object and unpickle every peer's. gloo's and NCCL's connections are not
authenticated, so whoever can reach the ranks' ports could hand a rank a pickle that runs code
as it is unpickled. What the package gathers travels as tensors instead, and receiving one runs
no code:

- :func:`all_gather_bytes`: each rank's bytes (its length first, as a tensor; then the bytes,
  padded to the longest, as a uint8 tensor). The caller says what they mean: UTF-8 text, JSON;
- :func:`all_gather_tensors`: each rank's named tensors, bit for bit, as one byte buffer per rank
  and a JSON header of names, dtypes and shapes.

Each output starts as a copy of this rank's own input: torch's fake process group (``gpututor run
--dry-run``) moves nothing, so there every rank reads its own value for every rank, as if all
ranks held the same. Under a real group the collective overwrites them.
"""
from __future__ import annotations

import json

import torch
import torch.distributed as dist

from ..checks import InvalidValue


def _device(group) -> torch.device:
    """Where the group's collectives take tensors: the current GPU under NCCL alone, else CPU."""
    backend = str(dist.get_backend(group))
    if "nccl" in backend and "gloo" not in backend:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _all_gather_uint8(mine: torch.Tensor, group) -> list[torch.Tensor]:
    """Every rank's 1-d uint8 tensor ``mine`` (lengths may differ), on CPU, in group-rank order."""
    device = _device(group)
    length = torch.tensor([mine.numel()], dtype=torch.int64, device=device)
    lengths = [length.clone() for _ in range(dist.get_world_size(group))]
    dist.all_gather(lengths, length, group=group)            # 1. how long each rank's is
    lengths = [int(n) for n in lengths]
    padded = torch.zeros(max(max(lengths), 1), dtype=torch.uint8, device=device)
    padded[:mine.numel()] = mine
    parts = [padded.clone() for _ in lengths]
    dist.all_gather(parts, padded, group=group)              # 2. the bytes, padded alike
    return [part[:n].cpu() for part, n in zip(parts, lengths)]


def all_gather_bytes(data: bytes, group=None) -> list[bytes]:
    """Every rank's ``data``, in group-rank order (a collective: every rank of ``group`` calls it)."""
    mine = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else \
        torch.empty(0, dtype=torch.uint8)
    return [part.numpy().tobytes() for part in _all_gather_uint8(mine, group)]


def all_gather_tensors(tensors: dict[str, torch.Tensor], group=None) -> list[dict]:
    """Every rank's ``tensors`` (name -> tensor, any dtype and shape), copied to CPU bit for bit,
    in group-rank order (a collective: every rank of ``group`` calls it)."""
    header = [[name, str(t.dtype).removeprefix("torch."), list(t.shape)]
              for name, t in tensors.items()]
    flat = [t.detach().cpu().contiguous().reshape(-1).view(torch.uint8) for t in tensors.values()]
    mine = torch.cat(flat) if flat else torch.empty(0, dtype=torch.uint8)
    headers = all_gather_bytes(json.dumps(header).encode(), group)
    return [_unpack(json.loads(h), part) for h, part in zip(headers, _all_gather_uint8(mine, group))]


def _unpack(header: list, data: torch.Tensor) -> dict[str, torch.Tensor]:
    """The named tensors a rank packed: ``header`` says each one's name, dtype and shape."""
    out, offset = {}, 0
    for name, dtype_name, shape in header:
        dtype = getattr(torch, dtype_name, None)
        if not isinstance(dtype, torch.dtype):
            raise InvalidValue("dtype", dtype_name, "a torch dtype name")
        size = torch.Size(shape).numel() * dtype.itemsize
        out[name] = data[offset:offset + size].clone().view(dtype).reshape(shape)
        offset += size
    if offset != data.numel():
        raise ValueError(f"a rank sent {data.numel()} bytes for tensors of {offset}: allowed is "
                         "exactly the bytes its header describes")
    return out
