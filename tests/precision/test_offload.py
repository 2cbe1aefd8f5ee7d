"""Adam offloaded to the host (ZeRO-Offload's idea): it trains exactly like torch.optim.Adam, moves
4 bytes down and 4 up per fp32 parameter with a gradient each step, and keeps 12 on the host."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gpututor import RunSpec, batches, build_model
from gpututor.measure.memory import state_bytes
from gpututor.precision.adam8bit import state_bytes_per_param
from gpututor.precision.offload import OffloadedAdam

pytestmark = pytest.mark.usefixtures("one_thread")
SPEC = RunSpec(model="gpt", model_size="tiny", batch_size=8, seq_len=32, steps=6, world_size=1)


def _train(make_optimizer, device="cpu", spec=SPEC, model=None, optimizer=None, start_step=0):
    """Train the tiny GPT on ``device``; the model, the optimizer and the losses."""
    model = model or build_model(spec).to(device)
    optimizer = optimizer or make_optimizer(model.parameters())
    losses = []
    for x, y in batches(spec, start_step=start_step):
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x.to(device)).flatten(0, 1), y.to(device).flatten())
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, optimizer, losses


def _assert_same_training(ours, ref, **tolerance):
    torch.testing.assert_close(torch.tensor(ours[2]), torch.tensor(ref[2]), **tolerance)
    for (name, a), b in zip(ours[0].named_parameters(), ref[0].parameters()):
        torch.testing.assert_close(a, b, msg=name, **tolerance)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_trains_exactly_like_torch_adam_and_counts_every_byte(weight_decay):
    calls = []
    ours = _train(lambda p: OffloadedAdam(p, lr=3e-3, weight_decay=weight_decay,
                                          on_transfer=lambda n, d: calls.append((n, d))))
    ref = _train(lambda p: torch.optim.Adam(p, lr=3e-3, weight_decay=weight_decay))
    _assert_same_training(ours, ref, rtol=0, atol=0)    # the same arithmetic, bit for bit
    optimizer, n = ours[1], sum(p.numel() for p in ours[0].parameters())
    assert calls == [(4 * n, "to_host"), (4 * n, "to_device")] * SPEC.steps
    assert optimizer.last_step_bytes == {"to_host": 4 * n, "to_device": 4 * n}
    assert optimizer.bytes_moved == {"to_host": 4 * n * SPEC.steps, "to_device": 4 * n * SPEC.steps}


def test_a_parameter_without_gradient_is_skipped_and_not_counted():
    used, unused = torch.randn(3, 4, requires_grad=True), torch.randn(5, requires_grad=True)
    ref_used = used.detach().clone().requires_grad_()
    before = unused.detach().clone()
    calls = []
    ours = OffloadedAdam([used, unused], lr=0.1, on_transfer=lambda n, d: calls.append((n, d)))
    ref = torch.optim.Adam([ref_used], lr=0.1)
    for _ in range(2):
        for p, opt in ((used, ours), (ref_used, ref)):
            opt.zero_grad(set_to_none=True)
            (p ** 2).sum().backward()
            opt.step()
    torch.testing.assert_close(used, ref_used, rtol=0, atol=0)
    assert torch.equal(unused, before) and unused.grad is None
    assert ours.state[unused]["step"].item() == 0 and not ours.state[unused]["exp_avg"].any()
    assert calls == [(4 * 12, "to_host"), (4 * 12, "to_device")] * 2


def test_state_is_twelve_bytes_per_parameter_in_host_memory():
    model, optimizer, _ = _train(lambda p: OffloadedAdam(p, lr=3e-3), spec=SPEC.replace(steps=1))
    n = sum(p.numel() for p in model.parameters())
    assert state_bytes_per_param(optimizer) == pytest.approx(12, rel=1e-3)   # master 4 + moments 8
    held = optimizer.host_state_bytes()
    assert held == pytest.approx(12 * n, rel=1e-3)
    assert held == state_bytes(model, optimizer)["optimizer"]
    # on CPU the parameters' device *is* the host: the state shares their memory, nothing is freed
    assert optimizer.device_state_bytes() == held
    assert optimizer.host_gradient_bytes() == 4 * n
    assert all(t.device.type == "cpu" and not t.is_pinned()
               for s in optimizer.state.values() for t in s.values())


def test_pin_memory_without_cuda_is_refused_first(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    refused = r"pin_memory=True is invalid.*torch.cuda.is_available\(\)"
    with pytest.raises(ValueError, match=refused):
        OffloadedAdam([], pin_memory=True)       # before torch's "empty parameter list"
    with pytest.raises(ValueError, match="pin_memory='yes' is invalid"):
        OffloadedAdam([torch.zeros(1, requires_grad=True)], pin_memory="yes")


def test_state_dict_round_trip_and_a_changed_lr_continue_like_torch_adam():
    three = SPEC.replace(steps=3)
    model, optimizer, _ = _train(lambda p: OffloadedAdam(p, lr=3e-3), spec=three)
    saved_model, saved_opt = model.state_dict(), optimizer.state_dict()
    resumed_model = build_model(SPEC.replace(seed=SPEC.seed + 1))   # other weights, and...
    resumed = OffloadedAdam(resumed_model.parameters(), lr=1.0)      # ...masters copied from them
    resumed_model.load_state_dict(saved_model)
    resumed.load_state_dict(saved_opt)          # brings the masters, moments and lr back
    assert resumed.param_groups[0]["lr"] == 3e-3
    ref_model, ref_opt, _ = _train(lambda p: torch.optim.Adam(p, lr=3e-3), spec=three)
    for opt in (resumed, ref_opt):
        opt.param_groups[0]["lr"] = 1e-3         # as a scheduler would
    ours = _train(None, model=resumed_model, optimizer=resumed, start_step=3)
    ref = _train(None, model=ref_model, optimizer=ref_opt, start_step=3)
    _assert_same_training(ours, ref, rtol=0, atol=0)
    assert all(t.device.type == "cpu" for s in resumed.state.values() for t in s.values())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_state_lives_pinned_on_the_host_and_training_equals_torch_adam():
    # The host runs Adam's CPU kernels, the reference its CUDA ones: one step from the same
    # gradients gives the same parameters up to rounding. Over six steps the rounding feeds
    # back through the gradients, and Adam's first steps move a parameter by about lr whatever
    # its gradient's size, so one whose gradient is near zero can drift apart (an attention
    # bias was beyond rtol 1e-4 after six steps on an H200): the losses are compared there.
    one = SPEC.replace(steps=1)
    _assert_same_training(_train(lambda p: OffloadedAdam(p, lr=3e-3), device="cuda", spec=one),
                          _train(lambda p: torch.optim.Adam(p, lr=3e-3), device="cuda", spec=one),
                          rtol=1e-5, atol=1e-7)
    ours = _train(lambda p: OffloadedAdam(p, lr=3e-3), device="cuda")
    ref = _train(lambda p: torch.optim.Adam(p, lr=3e-3), device="cuda")
    torch.testing.assert_close(torch.tensor(ours[2]), torch.tensor(ref[2]), rtol=1e-4, atol=0)
    optimizer = ours[1]
    assert all(s["master"].device.type == "cpu" and s["master"].is_pinned()
               for s in optimizer.state.values())
    assert all(b.is_pinned() for b in optimizer._grad_buffers.values())
    assert optimizer.device_state_bytes() == 0
    assert state_bytes_per_param(optimizer) == pytest.approx(12, rel=1e-3)
    n = sum(p.numel() for p in ours[0].parameters())
    assert optimizer.last_step_bytes == {"to_host": 4 * n, "to_device": 4 * n}
