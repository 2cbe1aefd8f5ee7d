"""Local SGD and DiLoCo from scratch against their production implementation, torchft's
``LocalSGD`` and ``DiLoCo`` (``torchft.local_sgd``, torchft 0.2.0 from PyPI, a test dependency):
two gloo ranks on CPU, on models that are not gpututor's (a frozen layer and a norm, a layer
the loss never reaches, an embedding tied to the head), AdamW with weight decay inside, H = 3,
three meetings.

torchft runs each rank as a replica group of its own (world size 1) under a ``Manager`` that a
lighthouse (``LighthouseServer``, on 127.0.0.1) puts in a quorum with the other; its DiLoCo
all-reduces the pseudo-gradients θ - θ_rank (a sum divided by the participants) and steps the
outer SGD on them, as ours does. ``init_sync=False``: with torchft's default the first quorum
"heals" replica 1 from replica 0 (its weights and inner optimizer state replaced), so the
first meeting would reflect replica 0's data only. Both start from the same seeded weights.

Measured here: the two agree bit for bit (0.0) on every parameter of every model; asserted
within 1e-6. A frozen parameter, and the layer the loss never reaches, stay where they started.

torchft's manager server binds ``[::]`` (torchft/manager.py, hard-coded) for the seconds this
test runs; its lighthouse and every address the replicas are given are 127.0.0.1.
"""
from __future__ import annotations

import json
import os
import re
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from conftest import spawn_gloo_ranks

# pyproject's test extra installs torchft where it has wheels (Linux x86_64, Python 3.10-3.13)
pytest.importorskip("torchft", reason="torchft 0.2.0 has wheels only for Linux x86_64 and "
                    "Python 3.10-3.13 (pyproject.toml's marker): the reference is not installed")
from test_foreign_models import batch, build, loss_of

H, MEETINGS, WORLD, LR, DECAY, TOLERANCE = 3, 3, 2, 1e-2, 0.1, 1e-6
CASES = [(model, method) for model in ("frozen", "unused", "tied")
         for method in ("diloco", "local-sgd")]
ADDRESSES = "GPUTUTOR_TEST_LIGHTHOUSES"   # case -> lighthouse address, for the spawned ranks


def _inner(model):
    return torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=DECAY)


def _train(model_name, model, step, zero_grad, rank):
    x, y = batch(model_name)
    share = len(x) // WORLD
    x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
    for _ in range(H * MEETINGS):
        zero_grad()
        loss_of(model_name, model(x), y).backward()
        step()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def _torchft(model_name: str, method: str, rank: int, lighthouse: str) -> dict:
    from torchft import Manager, ProcessGroupGloo
    from torchft.local_sgd import DiLoCo, LocalSGD
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    model = build(model_name)
    inner = _inner(model)
    wait = timedelta(seconds=60)
    manager = Manager(
        pg=ProcessGroupGloo(timeout=wait), min_replica_size=WORLD, use_async_quorum=False,
        load_state_dict=lambda sd: None, state_dict=lambda: {}, replica_id=f"{method}-{rank}",
        store_addr="127.0.0.1", store_port=store.port, rank=0, world_size=1,
        lighthouse_addr=lighthouse, port=0, hostname="127.0.0.1", init_sync=False,
        timeout=wait, quorum_timeout=wait, connect_timeout=wait)
    try:
        if method == "diloco":
            outer = torch.optim.SGD(model.parameters(), lr=0.7, momentum=0.9, nesterov=True)
            wrapper = DiLoCo(manager, [model], inner, outer, sync_every=H, pin_memory=False)
        else:
            wrapper = LocalSGD(manager, model, inner, sync_every=H)
        with wrapper:
            return _train(model_name, model, inner.step, inner.zero_grad, rank)
    finally:
        manager.shutdown(wait=False)


def _ours(model_name: str, method: str, rank: int) -> dict:
    from gpututor.parallel.data_parallel.local_sgd import DiLoCo, LocalSGD
    model = build(model_name)
    if method == "diloco":
        wrapper = DiLoCo(model, _inner(model), H, outer_lr=0.7, outer_momentum=0.9)
    else:
        wrapper = LocalSGD(model, _inner(model), H)
    return _train(model_name, model, wrapper.step, wrapper.zero_grad, rank)


def _rank(rank: int, world: int) -> dict:
    lighthouses = json.loads(os.environ[ADDRESSES])
    out = {}
    for model_name, method in CASES:
        case = f"{model_name}/{method}"
        theirs = _torchft(model_name, method, rank, lighthouses[case])
        ours = _ours(model_name, method, rank)
        first = dict(build(model_name).named_parameters())
        out[case] = {name: {"diff": (theirs[name] - ours[name]).abs().max().item(),
                            "moved": (ours[name] - first[name]).abs().max().item(),
                            "requires_grad": first[name].requires_grad}
                     for name in ours}
    return out


@pytest.fixture(scope="module")
def compared(tmp_path_factory, monkeypatch_module):
    from torchft._torchft import LighthouseServer
    servers = {f"{m}/{k}": LighthouseServer(bind="127.0.0.1:0", min_replicas=WORLD)
               for m, k in CASES}
    try:   # its address() names the host by its hostname: every replica is on 127.0.0.1
        addresses = {case: re.sub(r"//[^:/]+:", "//127.0.0.1:", s.address())
                     for case, s in servers.items()}
        monkeypatch_module.setenv(ADDRESSES, json.dumps(addresses))
        monkeypatch_module.setenv("GLOO_SOCKET_IFNAME", "lo")
        return spawn_gloo_ranks(_rank, WORLD, tmp_path_factory.mktemp("torchft"))
    finally:
        for server in servers.values():
            server.shutdown()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.mark.parametrize("model_name,method", CASES)
def test_ours_equals_torchfts(compared, model_name, method):
    for rank, results in enumerate(compared):
        for name, got in results[f"{model_name}/{method}"].items():
            assert got["diff"] <= TOLERANCE, (rank, name, got)
            trained = got["requires_grad"] and not (model_name == "unused"
                                                    and name.startswith("spare"))
            # the comparison means something: what trains has moved, what cannot has not
            assert (got["moved"] > 1e-3) if trained else got["moved"] == 0.0, (rank, name, got)
