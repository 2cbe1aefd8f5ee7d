"""Device binding on CUDA, checked on CPU with CUDA and NCCL mocked: each rank makes its own GPU
the current device *before* the process group exists, in launch()'s ranks and under torchrun."""
from __future__ import annotations

import torch
import torch.distributed as dist

from gpututor import RunSpec
from gpututor.runtime import joining


def test_set_device_comes_before_init_process_group(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.append(("set_device", d)))
    monkeypatch.setattr(dist, "init_process_group",
                        lambda backend, **kw: calls.append(("init", backend, kw["device_id"])))
    spec = RunSpec(model="gpt", model_size="tiny", strategy="ddp", world_size=2, device="cpu")
    joining.init_process_group(spec, 1, 2, torch.device("cuda", 1), store=object())
    assert calls == [("set_device", torch.device("cuda", 1)),
                     ("init", "nccl", torch.device("cuda", 1))]


def test_cpu_ranks_never_touch_cuda(monkeypatch):
    def refuse(*_):
        raise AssertionError("set_device called for a CPU rank")
    monkeypatch.setattr(torch.cuda, "set_device", refuse)
    seen = {}
    monkeypatch.setattr(dist, "init_process_group",
                        lambda backend, **kw: seen.update(backend=backend, **kw))
    spec = RunSpec(model="gpt", model_size="tiny", strategy="ddp", world_size=2, device="cpu")
    joining.init_process_group(spec, 0, 2, torch.device("cpu"), store=object())
    assert seen["backend"] == "gloo" and "device_id" not in seen


def test_each_local_rank_gets_its_own_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    spec = RunSpec(model="gpt", model_size="tiny", strategy="ddp", world_size=4)
    assert spec.resolved_device() == "cuda"
    assert [joining.rank_device(spec, r) for r in range(4)] == [torch.device("cuda", r) for r in range(4)]


def test_a_gpu_rank_takes_its_share_of_the_cores_and_a_cpu_rank_its_threads(monkeypatch):
    """8 CUDA ranks on 16 cores: 2 threads each, not 16 each (torch's default); a CPU rank keeps
    threads_per_rank (1: CPU ranks share the cores)."""
    monkeypatch.setattr(joining, "usable_cpu_cores", lambda: 16)
    spec = RunSpec(model="gpt", model_size="tiny", strategy="ddp", world_size=8, batch_size=8,
                   device="cuda")
    assert joining.rank_threads(spec, torch.device("cuda", 3)) == 2
    assert joining.rank_threads(spec.replace(world_size=16, ranks_per_node=8),
                               torch.device("cuda", 0)) == 2          # per node, under torchrun
    assert joining.rank_threads(spec.replace(world_size=32, batch_size=32),
                               torch.device("cuda", 0)) == 1          # never 0
    assert joining.rank_threads(spec.replace(device="cpu"), torch.device("cpu")) == 1
