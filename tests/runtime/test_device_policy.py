"""The one-GPU policy, with CUDA mocked as present: with fewer GPUs than ranks, "auto" runs every
rank on the CPU and says why; pin_device makes every run of a comparison one kind of device."""
from __future__ import annotations

import pytest
import torch

from gpututor import RunSpec
from gpututor.runtime.cli import main as cli_main
from gpututor.runtime.guard import check_machine


@pytest.fixture
def gpus(monkeypatch):
    def set_count(n):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
    return set_count


def test_auto_on_one_gpu_puts_one_rank_on_it_and_two_on_the_cpu(gpus):
    gpus(1)
    one = RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1)
    two = one.replace(strategy="ddp", world_size=2)
    assert one.device_choice() == ("cuda", "auto: 1 GPU(s) here, one per rank")
    device, why = two.device_choice()
    assert device == "cpu" and "fewer than the 2 ranks" in why


def test_pin_device_gives_every_run_of_a_comparison_one_kind(gpus):
    gpus(1)
    base = RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1).pin_device(2)
    assert base.device == "cpu"
    assert {base.resolved_device(), base.replace(strategy="ddp", world_size=2).resolved_device()} == {"cpu"}
    gpus(8)
    assert RunSpec(model="gpt", model_size="tiny").pin_device(8).device == "cuda"


def test_no_gpu_and_an_explicit_device_say_so(gpus):
    gpus(0)
    assert RunSpec().device_choice() == ("cpu", "auto: no GPU visible, every rank is a CPU process")
    assert RunSpec(device="cpu").device_choice() == ("cpu", "device='cpu' was asked for")


def test_a_comparison_pins_later_auto_runs_to_the_cpu_its_runs_used(gpus):
    from gpututor.ui.comparison import Comparison
    gpus(1)
    comparison = Comparison()
    two = {"model": "gpt", "model_size": "tiny", "batch_size": 8, "seq_len": 64, "precision": "fp32",
           "device": "cpu", "world_size": 2, "strategy": "ddp", "tokens_per_s": 150.0,
           "compute_s": 0.1, "comm_s": 0.01, "steps": 3, "step_time_s": 0.1, "final_loss": 2.0}
    comparison.add(two)
    solo = RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1, batch_size=8)
    assert solo.resolved_device() == "cuda"            # alone, auto would use the GPU
    assert comparison.pin(solo).device == "cpu"          # next to CPU runs: the CPU too
    assert comparison.pin(solo.replace(device="cuda")).device == "cuda"   # asked for: kept


def test_a_speedup_across_kinds_of_device_is_refused_and_said(gpus):
    from gpututor.ui.comparison import Comparison
    gpus(1)
    common = {"model": "gpt", "model_size": "tiny", "batch_size": 8, "seq_len": 64, "precision": "fp32",
              "compute_s": 0.1, "comm_s": 0.01, "steps": 3, "step_time_s": 0.1, "final_loss": 2.0}
    comparison = Comparison()
    comparison.add({**common, "device": "cuda:0", "world_size": 1, "strategy": "single", "tokens_per_s": 900.0})
    comparison.add({**common, "device": "cpu", "world_size": 2, "strategy": "ddp", "tokens_per_s": 150.0})
    assert comparison.rows()[1]["speedup"] is None
    assert "the 1-rank run ran on cuda:0, this one on cpu" in comparison.explain()


def test_a_spec_for_another_machine_is_built_without_asking_this_one(monkeypatch):
    """A RunSpec checks values only: eight CUDA ranks in fp16, four per node, can be written on a
    laptop without a GPU (for a cluster's torchrun); the machine is checked where ranks start."""
    def probe():
        raise AssertionError("RunSpec asked this machine for its GPUs")
    monkeypatch.setattr(torch.cuda, "is_available", probe)
    monkeypatch.setattr(torch.cuda, "device_count", probe)
    spec = RunSpec(model="gpt", model_size="tiny", strategy="ddp", world_size=8, device="cuda",
                   precision="fp16", ranks_per_node=4, batch_size=16)
    assert spec.local_ranks == 4


def test_the_machine_is_checked_where_ranks_start():
    spec = RunSpec(model="gpt", model_size="tiny", strategy="ddp", world_size=8, device="cuda",
                   precision="fp16", ranks_per_node=4, batch_size=16)
    assert check_machine(spec, gpus=4) == "cuda"          # each node: 4 ranks on its 4 GPUs
    with pytest.raises(ValueError, match=r"world_size=8 is invalid with device='cuda': this "
                                         r"machine has 2 GPU\(s\).*\(4 here\)"):
        check_machine(spec, gpus=2)
    with pytest.raises(ValueError, match="device='cuda' is invalid here: no CUDA device"):
        check_machine(spec, gpus=0)
    with pytest.raises(ValueError, match="precision='fp16' is invalid on CPU"):
        check_machine(spec.replace(device="cpu"), gpus=0)
    with pytest.raises(ValueError, match="mixed_precision='fp16' is invalid on CPU"):
        check_machine(spec.replace(strategy="fsdp", precision="fp32", device="cpu",
                                   options=(("mixed_precision", "fp16"),)), gpus=0)


def test_bf16_is_refused_on_a_gpu_below_compute_capability_8(monkeypatch):
    spec = RunSpec(model="gpt", model_size="tiny", device="cuda", precision="bf16", world_size=1,
                   batch_size=8)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))   # a T4
    with pytest.raises(ValueError, match=r"precision='bf16' is invalid on a GPU of compute "
                                         r"capability 7\.5"):
        check_machine(spec, gpus=1)
    assert check_machine(spec.replace(precision="fp16"), gpus=1) == "cuda"
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))   # A100
    assert check_machine(spec, gpus=1) == "cuda"


def test_launch_and_the_command_line_check_the_machine(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)   # this machine: no GPU
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    from gpututor import launch
    with pytest.raises(ValueError, match="precision='fp16' is invalid on CPU"):
        launch(RunSpec(model="gpt", model_size="tiny", precision="fp16", batch_size=8))
    assert cli_main(["run", "--model-size", "tiny", "--precision", "fp16", "--steps", "1"]) == 2
    assert "precision='fp16' is invalid on CPU" in capsys.readouterr().err


class _Reached(Exception):
    """The torchrun rank got past every check to the process group."""


@pytest.mark.parametrize("gpus,reaches", [(8, True), (4, False)])
def test_a_torchrun_rank_of_a_two_node_job_counts_its_own_node(monkeypatch, capsys, gpus,
                                                                reaches):
    """2 nodes x 8 GPUs: each process checks the 8 ranks of its own node, not all 16 (the spec
    used to be checked before ranks_per_node was set); fp16 with device='auto' is a GPU run."""
    from gpututor.runtime import joining
    monkeypatch.setenv("RANK", "9")
    monkeypatch.setenv("WORLD_SIZE", "16")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)

    def reached(spec, rank, world, device, store=None):
        assert (spec.local_ranks, rank, world, device) == (8, 9, 16, torch.device("cuda", 1))
        raise _Reached
    monkeypatch.setattr(joining, "init_process_group", reached)
    argv = ["run", "--model-size", "tiny", "--precision", "fp16", "--batch-size", "16"]
    if reaches:
        with pytest.raises(_Reached):
            cli_main(argv)
    else:   # 4 GPUs for 8 ranks: "auto" would fall back to CPU; asked for CUDA, it is refused
        assert cli_main(argv + ["--device", "cuda"]) == 2
        assert "this machine has 4 GPU(s) and NCCL needs one per rank (8 here)" in \
            capsys.readouterr().err


def test_launch_refuses_ranks_per_node_that_would_share_a_gpu():
    from gpututor import launch
    spec = RunSpec(model="gpt", model_size="tiny", world_size=4, ranks_per_node=2, batch_size=8)
    with pytest.raises(ValueError, match=r"ranks_per_node=2 is invalid with launch\(\): it "
                                         r"starts all world_size=4 ranks on this machine"):
        launch(spec)


def test_fp16_with_dtensor_tensor_parallel_is_refused_before_it_starts():
    from gpututor.parallel import check_spec
    for name, mesh in (("tp-dtensor", None), ("fsdp+tp", {"dp": 2, "tp": 2})):
        spec = RunSpec(model="gpt", model_size="tiny", strategy=name, world_size=4 if mesh else 2,
                       mesh=mesh, precision="fp16", device="cuda", batch_size=8)
        with pytest.raises(ValueError, match=r"precision='fp16' is invalid for strategy="
                                             r"'tp-dtensor': allowed values are 'fp32', 'bf16'"):
            check_spec(spec)


def test_first_gpu_moves_a_runs_ranks_and_is_checked_against_the_gpus_here(gpus):
    from gpututor.runtime.joining import rank_device
    gpus(4)
    spec = RunSpec(model="gpt", model_size="tiny", world_size=2, device="cuda", first_gpu=2)
    assert [rank_device(spec, r) for r in range(2)] == [torch.device("cuda", 2),
                                                         torch.device("cuda", 3)]
    assert check_machine(spec) == "cuda"
    with pytest.raises(ValueError, match=r"world_size=2 is invalid with device='cuda': this "
                                         r"machine has 1 GPU\(s\) from GPU 3 on"):
        check_machine(spec.replace(first_gpu=3))
    with pytest.raises(ValueError, match=r"first_gpu=4 is invalid here: this machine has 4 "
                                         r"GPU\(s\): allowed is 0 to 3"):
        check_machine(spec.replace(first_gpu=4))
    # "auto" counts the GPUs from first_gpu on
    assert spec.replace(device="auto", first_gpu=3).device_choice()[0] == "cpu"
    assert spec.replace(device="auto", first_gpu=2).device_choice() == \
        ("cuda", "auto: 2 GPU(s) from GPU 2 on, one per rank")
    with pytest.raises(ValueError, match="first_gpu=-1 is invalid"):
        RunSpec(first_gpu=-1)


def test_the_independent_pair_puts_each_copy_on_its_own_gpu(gpus, monkeypatch):
    """Lesson 00's ceiling on a machine with GPUs: the two 1-rank copies run on the two GPUs
    DDP's ranks use (on one shared GPU the ceiling is too low and DDP's share exceeds 1)."""
    from gpututor.lessons.start_here import contention
    gpus(8)
    started = []

    class Done:
        done = True

        def wait(self):
            return {"tokens_per_s": 1.0, "steady": [], "batch_size": 4, "seq_len": 64}

    monkeypatch.setattr(contention, "launch",
                        lambda spec, task=None: started.append(spec) or Done())
    contention.independent_pair(RunSpec(model="gpt", model_size="tiny", world_size=2,
                                        batch_size=8, first_gpu=4))
    assert [(s.resolved_device(), s.first_gpu, s.world_size) for s in started] == \
        [("cuda", 4, 1), ("cuda", 5, 1)]
    gpus(0)
    started.clear()
    contention.independent_pair(RunSpec(model="gpt", model_size="tiny", world_size=2, batch_size=8))
    assert [(s.resolved_device(), s.first_gpu) for s in started] == [("cpu", 0), ("cpu", 0)]


def test_the_cli_passes_first_gpu_to_the_spec():
    from gpututor.runtime.cli import build_parser, spec_from_args
    args = build_parser().parse_args(["run", "--first-gpu", "3", "--model-size", "tiny"])
    assert spec_from_args(args, 2).first_gpu == 3


def test_a_rank_aborted_by_nccls_watchdog_names_the_peer_that_hung(gpus):
    """Under NCCL a hung rank's peer is aborted by the watchdog (SIGABRT, exit -6) before the
    silence check fires: the run names the hung rank, and says the aborted one gave up on it."""
    import signal
    from gpututor.runtime.launcher import Run
    gpus(2)
    run = Run.__new__(Run)
    run.spec, run.status = RunSpec(model="gpt", model_size="tiny", world_size=2,
                                   device="cuda", timeout=5), "running"
    run._stack_of = lambda rank: ("", "")
    failure = run._fail(0, run._died(0, -signal.SIGABRT), {0: 2, 1: 2}, set())
    message = str(failure)
    assert message.startswith("rank 1 stopped answering at step 3; rank 0 gave up waiting for "
                              "it after timeout=5 s"), message
    assert "NCCL's watchdog" in message and failure.failed_rank == 1 and failure.step == 3
    # on CPU, or another exit code, the rank that died is the one named
    failure = run._fail(0, run._died(0, 1), {0: 2, 1: 2}, set())
    assert str(failure).startswith("rank 0 failed at step 3: ProcessDied: rank 0 exited with code 1")
    run.spec = run.spec.replace(device="cpu")
    failure = run._fail(0, run._died(0, -signal.SIGABRT), {0: 2, 1: 2}, set())
    assert str(failure).startswith("rank 0 failed at step 3")


def test_a_torchrun_dry_run_checks_each_node_and_starts_no_process_group(monkeypatch, capsys,
                                                                         gpus):
    """``--dry-run`` under torchrun: every node checks its own GPUs (one rank per node here, on
    one GPU), none joins a process group, rank 0 prints the layout (what gpu_check.sh runs as
    two "nodes" on a one-GPU machine)."""
    from gpututor.runtime import joining
    for name, value in (("WORLD_SIZE", "2"), ("LOCAL_RANK", "0"), ("LOCAL_WORLD_SIZE", "1"),
                        ("MASTER_ADDR", "127.0.0.1")):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(joining, "init_process_group",
                        lambda *a, **k: pytest.fail("a dry run joined a process group"))
    argv = ["run", "--model-size", "tiny", "--batch-size", "8", "--dry-run"]
    gpus(1)
    monkeypatch.setenv("RANK", "1")
    assert cli_main(argv + ["--device", "cuda"]) == 0
    gpus(0)
    assert cli_main(argv + ["--device", "cuda"]) == 2          # no GPU on this node: refused
    assert "device='cuda' is invalid here" in capsys.readouterr().err
    monkeypatch.setenv("RANK", "0")
    assert cli_main(argv + ["--device", "cpu"]) == 0
    assert "rank" in capsys.readouterr().out
