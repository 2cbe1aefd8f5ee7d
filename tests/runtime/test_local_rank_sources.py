"""A rank's place on its node under torchrun, srun and Open MPI's mpirun
(``runtime/torchrun.local_rank_and_size``), and the refusal where no launcher says and the job may
span nodes: before any process group starts. CPU only: the launchers' environments are set by
hand and ``torch.cuda`` is faked."""
from __future__ import annotations

import os

import pytest
import torch

from gpututor.runtime.cli import main as cli_main
from gpututor.runtime.torchrun import local_rank_and_size

LAUNCHER_VARIABLES = (
    "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_USE_AGENT_STORE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_RANK",
    "SLURM_LOCALID", "SLURM_PROCID", "SLURM_NODEID", "SLURM_STEP_NODEID", "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE", "MASTER_ADDR")


@pytest.fixture
def launched(monkeypatch):
    """Set this process's environment to what a launcher gives rank ``RANK`` of ``WORLD_SIZE``
    (only the variables named; every other launcher variable is removed)."""
    def set_env(rank: int, world: int, **variables):
        for name in LAUNCHER_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(world))
        for name, value in variables.items():
            monkeypatch.setenv(name, str(value))
        return local_rank_and_size(rank, world, os.environ)
    return set_env


def test_torchrun_says_it_and_wins_over_the_srun_that_started_torchrun(launched):
    assert launched(9, 16, LOCAL_RANK=1, LOCAL_WORLD_SIZE=8, MASTER_ADDR="node01") == (1, 8)
    # `srun torchrun ...`: one srun task per node, torchrun's ranks inherit its SLURM_LOCALID=0
    assert launched(9, 16, LOCAL_RANK=1, LOCAL_WORLD_SIZE=8, SLURM_LOCALID=0, SLURM_PROCID=1,
                    SLURM_STEP_TASKS_PER_NODE="1(x2)", MASTER_ADDR="node01") == (1, 8)


def test_srun_says_it_from_the_steps_layout(launched):
    slurm = dict(SLURM_LOCALID=2, SLURM_PROCID=10, MASTER_ADDR="node01")
    assert launched(10, 16, SLURM_STEP_TASKS_PER_NODE="8(x2)", SLURM_STEP_NODEID=1,
                    **slurm) == (2, 8)
    # nodes with different counts: this node's, at its node id (3 + 3 + 2 tasks; node 2 has 2)
    assert launched(7, 8, SLURM_LOCALID=1, SLURM_PROCID=7, SLURM_STEP_TASKS_PER_NODE="3(x2),2",
                    SLURM_STEP_NODEID=2, MASTER_ADDR="node01") == (1, 2)
    # the older names of the same figures
    assert launched(10, 16, SLURM_TASKS_PER_NODE="8(x2)", SLURM_NODEID=1, **slurm) == (2, 8)
    # no layout: what --ntasks-per-node asked for
    assert launched(10, 16, SLURM_NTASKS_PER_NODE=4, **slurm) == (2, 4)


def test_mpirun_says_it_and_wins_over_the_slurm_job_around_it(launched):
    assert launched(7, 8, OMPI_COMM_WORLD_LOCAL_RANK=3, OMPI_COMM_WORLD_LOCAL_SIZE=4,
                    OMPI_COMM_WORLD_RANK=7, MASTER_ADDR="node01") == (3, 4)
    # mpirun inside sbatch: its ranks inherit the one-task-per-node srun step of its daemons
    assert launched(7, 8, OMPI_COMM_WORLD_LOCAL_RANK=3, OMPI_COMM_WORLD_LOCAL_SIZE=4,
                    OMPI_COMM_WORLD_RANK=7, SLURM_LOCALID=0, SLURM_PROCID=1,
                    SLURM_STEP_TASKS_PER_NODE="1(x2)", MASTER_ADDR="node01") == (3, 4)


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.1.1", "localhost", "::1", "[::1]"])
def test_without_a_launcher_one_host_is_provable_only_by_a_loopback_master(launched, address):
    assert launched(1, 2, MASTER_ADDR=address) == (1, 2)
    assert launched(0, 1, MASTER_ADDR="node01") == (0, 1)      # one rank: one node


REFUSAL = ("WORLD_SIZE=16 is invalid without a rank on the node: none of "
           "LOCAL_RANK/LOCAL_WORLD_SIZE (torchrun), "
           "OMPI_COMM_WORLD_LOCAL_RANK/OMPI_COMM_WORLD_LOCAL_SIZE (Open MPI's mpirun) or "
           "SLURM_LOCALID (Slurm's srun) is set, and MASTER_ADDR='node01' is not loopback, so "
           "the ranks may span nodes and RANK cannot stand for the rank on this node: allowed "
           "is 1, or each process started with LOCAL_RANK (its rank on its node) and "
           "LOCAL_WORLD_SIZE (the ranks on its node) set: start the ranks with torchrun, or set "
           "both for each process")


@pytest.mark.parametrize("address", ["node01", "10.0.0.5", "node01.example"])
def test_ranks_that_may_span_nodes_without_a_local_rank_are_refused(launched, address):
    with pytest.raises(ValueError) as refused:
        launched(9, 16, MASTER_ADDR=address)
    assert str(refused.value) == REFUSAL.replace("'node01'", repr(address))


@pytest.mark.parametrize("variables,message", [
    (dict(LOCAL_RANK=8, LOCAL_WORLD_SIZE=8),
     "LOCAL_RANK='8' is invalid with 8 ranks on this node (LOCAL_WORLD_SIZE='8'): allowed is "
     "0 to 7"),
    (dict(LOCAL_RANK=1, LOCAL_WORLD_SIZE=32),
     "LOCAL_WORLD_SIZE='32' is invalid (32 ranks on this node): allowed is 1 to WORLD_SIZE=16 "
     "ranks on a node"),
    (dict(SLURM_LOCALID=4, SLURM_PROCID=9, SLURM_STEP_TASKS_PER_NODE="8,4", SLURM_NODEID=1),
     "SLURM_LOCALID='4' is invalid with 4 ranks on this node "
     "(SLURM_STEP_TASKS_PER_NODE='8,4'): allowed is 0 to 3"),
    (dict(LOCAL_RANK=1),
     "LOCAL_WORLD_SIZE=None is invalid (not set, beside the other variables of its launcher)"),
    (dict(LOCAL_RANK="one", LOCAL_WORLD_SIZE=8),
     "LOCAL_RANK='one' is invalid: allowed is a whole number >= 0"),
    (dict(SLURM_LOCALID=0, SLURM_PROCID=0, SLURM_STEP_TASKS_PER_NODE="8(x2)"),   # another launch
     "SLURM_PROCID='0' is invalid beside a different RANK"),
    (dict(SLURM_LOCALID=1, SLURM_PROCID=9, SLURM_STEP_TASKS_PER_NODE="8,4"),   # which node?
     "SLURM_NTASKS_PER_NODE=None is invalid (not set"),
    (dict(OMPI_COMM_WORLD_LOCAL_RANK=1, OMPI_COMM_WORLD_LOCAL_SIZE=8, OMPI_COMM_WORLD_RANK=3),
     "OMPI_COMM_WORLD_RANK='3' is invalid beside a different RANK"),
])
def test_a_launchers_variables_that_do_not_add_up_are_refused(launched, variables, message):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        launched(9, 16, MASTER_ADDR="node01", **variables)


class _Reached(Exception):
    """The rank got past every check to its process group."""


@pytest.fixture
def eight_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)


def test_an_srun_rank_of_two_nodes_takes_its_nodes_gpu(launched, eight_gpus, monkeypatch):
    """Rank 9 of 2 nodes x 8 srun tasks is local rank 1: GPU 1, and its node checked for 8
    GPUs (RANK would have asked for cuda:9, and 16 GPUs on this node)."""
    from gpututor.runtime import joining
    launched(9, 16, SLURM_LOCALID=1, SLURM_PROCID=9, SLURM_STEP_TASKS_PER_NODE="8(x2)",
             SLURM_STEP_NODEID=1, MASTER_ADDR="node01")

    def reached(spec, rank, world, device, store=None):
        assert (spec.local_ranks, rank, world, device) == (8, 9, 16, torch.device("cuda", 1))
        raise _Reached
    monkeypatch.setattr(joining, "init_process_group", reached)
    with pytest.raises(_Reached):
        cli_main(["run", "--model-size", "tiny", "--batch-size", "16", "--device", "cuda"])


def test_the_cli_refuses_before_any_process_group(launched, monkeypatch, capsys):
    from gpututor.runtime import joining
    with pytest.raises(ValueError):
        launched(9, 16, MASTER_ADDR="node01")
    monkeypatch.setattr(joining, "init_process_group",
                        lambda *a, **k: pytest.fail("a process group was started"))
    assert cli_main(["run", "--model-size", "tiny", "--batch-size", "16", "--device", "cpu",
                     "--quiet"]) == 2
    assert f"gpututor: error: {REFUSAL}" in capsys.readouterr().err
