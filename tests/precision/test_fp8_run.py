"""``RunSpec(precision="fp8")`` (issue 46, item 2): torchao's Float8 training as a run's precision,
for the strategies that take it (single, the data-parallel ones, ZeRO and fsdp); emulated on a CPU, refused before anything starts
where it cannot run: a strategy that does not take it, torchao missing, a GPU without FP8 units."""
from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.functional as F

from conftest import tiny_spec
from gpututor import RunSpec, batches, build_model, launch
from gpututor.checks import InvalidValue
from gpututor.parallel import check_spec
from gpututor.precision import fp8_training
from gpututor.runtime.guard import check_machine

SPEC = dict(model="gpt", model_size="tiny", batch_size=16, seq_len=32, device="cpu")


@pytest.mark.usefixtures("one_thread")
def test_a_single_fp8_run_is_torchaos_float8_training_in_one_process():
    """The reference: the production API by hand, in this process (as the worker does it:
    every Linear but the head converted, AdamW, the rest in float32)."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    spec = tiny_spec(**SPEC, strategy="single", world_size=1, precision="fp8", steps=6)
    run = launch(spec).wait()
    torch.manual_seed(spec.seed)
    model = build_model(spec)
    convert_to_float8_training(model, config=Float8LinearConfig(emulate=True),
                               module_filter_fn=lambda _m, name: name != "head")
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    losses = []
    for x, y in batches(spec):
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert run["precision"] == "fp8" and run["mfu"] is None     # two peaks: no one MFU
    torch.testing.assert_close(torch.tensor(run["losses"]), torch.tensor(losses),
                               rtol=1e-5, atol=0)


def test_fp8_trains_and_ends_near_fp32_single_and_ddp():
    """Margins from runs measured here (20 steps, tiny GPT, batch 16): fp8 ended 0.002 from fp32
    as one process and 0.016 from fp32 as DDP on 2 ranks (each rank scales by its own batch's
    amax); the margins are 5x and 3x those."""
    for strategy, world, margin in (("single", 1, 0.01), ("ddp", 2, 0.05)):
        spec = tiny_spec(**SPEC, strategy=strategy, world_size=world, steps=20)
        fp32, fp8 = (launch(spec.replace(precision=p)).wait() for p in ("fp32", "fp8"))
        assert fp8["losses"][-1] < fp8["losses"][0] - 0.5
        assert abs(fp8["final_loss"] - fp32["final_loss"]) <= margin, (strategy, fp8, fp32)


def test_fp8_is_refused_before_anything_starts_where_it_cannot_run(monkeypatch):
    with pytest.raises(InvalidValue, match=r"precision='fp8' is invalid for strategy='tp': "
                                           r"allowed values are 'fp32', 'bf16', 'fp16'"):
        check_spec(RunSpec(**SPEC, strategy="tp", world_size=2, precision="fp8"))
    with pytest.raises(InvalidValue, match="allowed values are 'fp32', 'bf16', 'fp16', 'fp8'"):
        RunSpec(precision="fp4")
    # torchao missing: the run says how to install it
    monkeypatch.setitem(sys.modules, "torchao.float8", None)
    with pytest.raises(InvalidValue, match=r"torchao's Float8 training does not load .*"
                                           r"gpututor\[compress\]"):
        check_machine(RunSpec(**SPEC, strategy="single", world_size=1, precision="fp8"))
    monkeypatch.delitem(sys.modules, "torchao.float8")
    # a GPU without FP8 tensor cores, named
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: "NVIDIA A100-SXM4-80GB")
    with pytest.raises(InvalidValue, match=r"on NVIDIA A100-SXM4-80GB \(compute capability "
                                           r"8.0\): FP8 tensor cores need 8.9"):
        fp8_training.check_fp8("cuda", 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=None: (9, 0))
    fp8_training.check_fp8("cuda", 0)                       # an H100/H200: allowed


def test_fsdp_gathers_the_converted_weights_in_fp8_and_trains_as_ddp_does():
    """FSDP2 with torchao's FP8 all-gather: each converted weight is gathered already cast (1
    byte), its scale from the amax all ranks agree on, so the step's numbers are DDP's in fp8
    (whole weights, the same amax); the bytes its ranks meter are what step_collectives prices,
    fewer than in fp32 (gradients still reduce-scatter in float32)."""
    from gpututor.parallel import get_strategy
    spec = tiny_spec(**SPEC, strategy="fsdp", world_size=2, steps=4, precision="fp8")
    fsdp = launch(spec).wait()
    ddp = launch(spec.replace(strategy="ddp")).wait()
    torch.testing.assert_close(torch.tensor(fsdp["losses"]), torch.tensor(ddp["losses"]),
                               rtol=1e-5, atol=0)
    priced = sum(n for _, n in get_strategy("fsdp").step_collectives(spec, build_model(spec)))
    assert fsdp["comm_bytes_per_step"] == pytest.approx(priced, rel=1e-6)
    fp32 = launch(spec.replace(precision="fp32")).wait()["comm_bytes_per_step"]
    assert priced < 0.6 * fp32


def test_from_scratch_data_parallel_and_zero_train_fp8_as_ddp_does():
    """The from-scratch strategies convert the same Linears before they wrap the model: every
    rank casts its own batch as DDP's ranks do, and the averaged float32 gradients (dp-naive,
    dp-bucketed) or the shards' float32 updates (zero1-3) are DDP's, so the losses are DDP's.
    local-sgd and diloco average weights every few steps instead (no reference run: their losses
    must fall as they do in fp32)."""
    spec = tiny_spec(**SPEC, strategy="ddp", world_size=2, steps=4, precision="fp8")
    ddp = torch.tensor(launch(spec).wait()["losses"])
    for strategy in ("dp-naive", "dp-bucketed", "zero1", "zero2", "zero3"):
        run = launch(spec.replace(strategy=strategy)).wait()
        assert run["precision"] == "fp8"
        torch.testing.assert_close(torch.tensor(run["losses"]), ddp, rtol=1e-5, atol=0,
                                   msg=lambda m, s=strategy: f"{s}: {m}")
    for strategy in ("local-sgd", "diloco"):
        losses = launch(spec.replace(strategy=strategy, steps=6,
                                     options=(("sync_every", 2),))).wait()["losses"]
        assert losses[-1] < losses[0] - 0.5, (strategy, losses)
