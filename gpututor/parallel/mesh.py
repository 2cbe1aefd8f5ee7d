"""The rank grid: which ranks share which group, as data you can print.

A run's ranks form a grid, ``RunSpec.mesh`` (e.g. ``{"dp": 2, "tp": 2}``), laid out like
picotron and Megatron do: ``torch.arange(world).view(*degrees)`` with the dims in the order
``dp, pp, cp, ep, tp``, so that ``tp`` is the innermost dim and a tensor-parallel group is
made of consecutive ranks (on a real cluster: the GPUs of one node, on the fastest links).

    >>> grid = RankGrid((("dp", 2), ("tp", 2)))
    >>> print(grid)
    rank grid dp=2 x tp=2:
    [[0, 1],
     [2, 3]]
    dp groups (same tp index): [0, 2] [1, 3]
    tp groups (same dp index): [0, 1] [2, 3]

A rank's *group* along a dim is the ranks that differ from it only in that dim's index. Each
from-scratch strategy talks over its dim's process group (:class:`DimGroup`); production
strategies take the matching slice of a named ``DeviceMesh`` (:func:`device_mesh`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class RankGrid:
    """The grid's dims and degrees in grid order, e.g. ``(("dp", 2), ("tp", 2))``."""

    shape: tuple

    @classmethod
    def of(cls, spec, default_dim: str = "dp") -> "RankGrid":
        """``spec.mesh``, or one dim ``default_dim`` over every rank when it has none."""
        return cls(spec.mesh or ((default_dim, spec.world_size),))

    @property
    def dims(self) -> tuple:
        return tuple(name for name, _ in self.shape)

    @property
    def world_size(self) -> int:
        return math.prod(degree for _, degree in self.shape)

    @property
    def ranks(self) -> torch.Tensor:
        """Every rank at its place in the grid."""
        return torch.arange(self.world_size).view(*(degree for _, degree in self.shape))

    def degree(self, dim: str) -> int:
        """How many ranks the dim spans (1 for a dim the grid does not have)."""
        return dict(self.shape).get(dim, 1)

    def index(self, rank: int, dim: str) -> int:
        """Where ``rank`` sits along ``dim`` (0 for a dim the grid does not have)."""
        if dim not in self.dims:
            return 0
        where = (self.ranks == rank).nonzero()[0]
        return int(where[self.dims.index(dim)])

    def groups(self, dim: str) -> list[list[int]]:
        """Every group along ``dim``: ranks equal in every other dim, in order along ``dim``."""
        if dim not in self.dims:
            return [[r] for r in range(self.world_size)]
        axis = self.dims.index(dim)
        return self.ranks.movedim(axis, -1).reshape(-1, self.degree(dim)).tolist()

    def group_of(self, rank: int, dim: str) -> list[int]:
        """The ranks of ``rank``'s group along ``dim`` (``rank`` among them)."""
        return next(g for g in self.groups(dim) if rank in g)

    def __str__(self) -> str:
        shape = " x ".join(f"{name}={degree}" for name, degree in self.shape)
        ranks = self.ranks
        if ranks.dim() <= 2:
            lines = [f"rank grid {shape}:", str(ranks.tolist()).replace("], [", "],\n [")]
        else:   # one 2-D slice per index of the outer dims
            lines = [f"rank grid {shape}:"]
            outer = self.dims[:-2]
            for index, block in zip(torch.cartesian_prod(*(torch.arange(d) for d in
                                                           ranks.shape[:-2])).view(-1, len(outer)),
                                    ranks.reshape(-1, *ranks.shape[-2:])):
                where = ", ".join(f"{d}={int(i)}" for d, i in zip(outer, index))
                lines.append(f"{where}: {block.tolist()}")
        for dim in self.dims:
            others = [d for d in self.dims if d != dim]
            same = f" (same {', '.join(others)} index)" if others else ""
            lines.append(f"{dim} groups{same}: " + " ".join(str(g) for g in self.groups(dim)))
        return "\n".join(lines)


def degree_of(spec, dim: str) -> tuple[int, str]:
    """``dim``'s degree in ``spec`` and how to name it in an error: ``"mesh tp=2"`` for a grid,
    ``"world_size=2"`` for a one-dim run."""
    degree = spec.mesh_shape.get(dim, 1) if spec.mesh is not None else spec.world_size
    return degree, f"{degree_field(spec, dim)}={degree}"


def degree_field(spec, dim: str) -> str:
    """The field that sets ``dim``'s degree in ``spec``: ``"mesh tp"`` on a grid, else
    ``"world_size"`` (the field of a :class:`~gpututor.checks.InvalidValue`)."""
    return f"mesh {dim}" if spec.mesh is not None else "world_size"


@dataclass
class DimGroup:
    """One rank's group along one dim: its index there, the group's size, its ranks (global
    rank numbers, in order along the dim) and the process group to talk over."""

    dim: str
    rank: int           # index along the dim: 0 .. size-1
    size: int
    ranks: list
    group: object       # a ProcessGroup; None means the default group (the dim spans all)

    def global_rank(self, index: int) -> int:
        """The global rank of the member at ``index`` along the dim."""
        return self.ranks[index]


def build_groups(grid: RankGrid, rank: int) -> dict[str, DimGroup]:
    """This rank's :class:`DimGroup` for every dim of ``grid``. Every rank must call it (each
    ``dist.new_group`` is collective), in the same order: dims in grid order, groups in order."""
    out = {}
    for dim in grid.dims:
        mine = grid.group_of(rank, dim)
        if len(mine) == grid.world_size:
            group = None   # the whole world: the default group
        else:
            group = None
            for ranks in grid.groups(dim):
                made = dist.new_group(ranks)
                if rank in ranks:
                    group = made
        out[dim] = DimGroup(dim, mine.index(rank), len(mine), mine, group)
    return out


def dim_group(ctx, dim: str) -> DimGroup:
    """The rank's group along ``dim`` (a strategy's own dim). Without a grid on ``ctx``, or
    for a dim the grid does not have, the dim spans every rank of the run (one-dim runs)."""
    groups = getattr(ctx, "groups", None) or {}
    if dim in groups:
        return groups[dim]
    return DimGroup(dim, ctx.rank, ctx.world_size, list(range(ctx.world_size)), None)


def device_mesh(ctx, dim: str):
    """The named ``DeviceMesh`` slice of ``dim`` (production APIs take it: FSDP2 ``mesh["dp"]``,
    DTensor ``mesh["tp"]``). The run's whole grid becomes one ``DeviceMesh``, made once per
    rank and kept on ``ctx``; without a grid on ``ctx``, a one-dim mesh over every rank."""
    from torch.distributed.device_mesh import init_device_mesh

    grid = getattr(ctx, "grid", None)
    if grid is None or dim not in grid.dims:
        grid = RankGrid(((dim, ctx.world_size),))
    meshes = ctx.device_meshes
    if grid.shape not in meshes:
        meshes[grid.shape] = init_device_mesh(ctx.device.type, tuple(d for _, d in grid.shape),
                                              mesh_dim_names=grid.dims)
    return meshes[grid.shape][dim]
