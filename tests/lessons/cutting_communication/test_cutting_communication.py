"""Lesson 13: the outer-step checker accepts the published solution and rejects plausible wrong
answers, each named by its mistake; its reference is the package's DiLoCo; the verdicts choose
their words from the numbers; the trade-off figure draws what was measured and names what was
not; the overlap counts read a timeline."""
from __future__ import annotations

import os
import tempfile

import pytest
import torch
import torch.distributed as dist

from exercise_solutions import published as _published, rejected
from gpututor.lessons.cutting_communication import figures, verdicts
from gpututor.lessons.cutting_communication.exercises import (check_outer_step,
                                                              outer_step_reference)
from gpututor.lessons.cutting_communication.levers import Lever


def published(variable: str):
    return _published("13_cutting_communication", variable, torch=torch)


def _mean_delta(theta, workers):
    return torch.stack([theta - w for w in workers]).mean(dim=0)


def heavy_ball(theta, workers, velocity, lr, momentum):
    delta = _mean_delta(theta, workers)
    velocity = momentum * velocity + delta
    return theta - lr * velocity, velocity


def flipped(theta, workers, velocity, lr, momentum):
    delta = -_mean_delta(theta, workers)
    velocity = momentum * velocity + delta
    return theta - lr * (delta + momentum * velocity), velocity


def summed(theta, workers, velocity, lr, momentum):
    delta = sum(theta - w for w in workers)
    velocity = momentum * velocity + delta
    return theta - lr * (delta + momentum * velocity), velocity


def velocity_dropped(theta, workers, velocity, lr, momentum):
    delta = _mean_delta(theta, workers)
    return theta - lr * (delta + momentum * delta), velocity   # v never carried


def torch_sgd(theta, workers, velocity, lr, momentum):
    p = torch.nn.Parameter(theta.clone())
    outer = torch.optim.SGD([p], lr=lr, momentum=momentum, nesterov=momentum > 0)
    p.grad = _mean_delta(theta, workers)
    outer.step()
    return p.detach(), velocity


def private_sgd(theta, workers, velocity, lr, momentum):   # torch's SGD, its private loop
    import torch.optim.sgd as sgd
    p = theta.clone()
    buffers = [velocity.clone()]
    sgd._single_tensor_sgd([p], [_mean_delta(theta, workers)], buffers, None, None,
                           weight_decay=0.0, momentum=momentum, lr=lr, dampening=0.0,
                           nesterov=momentum > 0, maximize=False, has_sparse_grad=False)
    return p, buffers[0]


def averaged_only(theta, workers, velocity, lr, momentum):   # local SGD's average
    return torch.stack(workers).mean(dim=0), velocity


def test_the_published_outer_step_passes_and_in_other_shapes(capsys):
    solution = published("my_outer_step")
    check_outer_step(solution)
    assert "Correct: your outer step gives DiLoCo's shared weights" in capsys.readouterr().out
    check_outer_step(lambda *a: list(map(lambda t: t.tolist() if torch.is_tensor(t) else t,
                                         solution(*a)))[:1] + [solution(*a)[1]])
    as_numpy = lambda t: t.numpy() if torch.is_tensor(t) else t
    check_outer_step(lambda t, w, v, lr, m: tuple(
        map(as_numpy, solution(t, w, v, lr, m))))   # numpy back: read as tensors
    check_outer_step(...)
    assert "not answered yet" in capsys.readouterr().out


@pytest.mark.parametrize("mistake,candidate,says", [
    ("plain momentum, not Nesterov's", heavy_ball, "off by up to"),
    ("worker − theta", flipped, "off by up to"),
    ("the sum over workers, not the mean", summed, "off by up to"),
    ("the velocity never carried", velocity_dropped, "off by up to"),
    ("local SGD's average, no outer optimizer", averaged_only, "off by up to"),
    ("torch's SGD does the step", torch_sgd, "called the package's DiLoCo or torch's SGD"),
    ("torch's private SGD loop does the step", private_sgd,
     "called the package's DiLoCo or torch's SGD"),
    ("theta alone returned", lambda t, w, v, lr, m: t, "return two values"),
])
def test_a_wrong_outer_step_fails(mistake, candidate, says):
    rejected(check_outer_step, candidate, match=says)


def test_the_reference_is_what_the_package_s_diloco_does():
    """One rank (a process group of one): its pseudo-gradient is the mean Δ; the reference's
    weights after three meetings equal DiLoCo's."""
    store = tempfile.mkdtemp()
    dist.init_process_group("gloo", init_method=f"file://{os.path.join(store, 'pg')}", rank=0,
                            world_size=1)
    try:
        from gpututor.parallel.data_parallel.local_sgd import DiLoCo
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2).double()
        theta = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()
        diloco = DiLoCo(model, torch.optim.SGD(model.parameters(), lr=0.0), 1, outer_lr=0.7,
                        outer_momentum=0.9)
        velocity = None
        for _ in range(3):
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(0.1 * torch.randn_like(p))
            worker = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()
            diloco.meet()
            theta, velocity = outer_step_reference(theta, [worker], velocity, 0.7, 0.9)
            now = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
            torch.testing.assert_close(now, theta, rtol=1e-12, atol=1e-12)
    finally:
        dist.destroy_process_group()


def fake(name, sent, ms, loss, against="DDP", tokens=8192):
    return {"lever": Lever(name, None, against if name != "DDP" else None), "records": [],
            "summary": {}, "tokens": tokens, "steps": 8, "sent_per_token": sent,
            "ms_per_k_tokens": ms, "held_out_loss": loss, "compressed_sent_per_token": None}


def test_the_words_come_from_the_numbers():
    runs = {"DDP": fake("DDP", 200.0, 50.0, 3.0),
            "bf16 gradients": fake("bf16 gradients", 100.0, 49.0, 3.004),
            "PowerSGD rank 1": fake("PowerSGD rank 1", 5.0, 30.0, 3.2),
            "local SGD, H=4": fake("local SGD, H=4", 50.0, 80.0, 2.9)}
    headline, details, _ = verdicts.levers_verdict(runs)
    assert "Fewest bytes per token (within 10% of the fewest): PowerSGD rank 1;" in headline
    assert "(within 25% of the least): PowerSGD rank 1;" in headline
    assert "(within 0.01 of the lowest): local SGD, H=4." in headline
    lines = details.splitlines()
    assert lines[0].startswith("bf16 gradients: sent 2.0× fewer bytes per token than DDP")
    assert "took about DDP's time per token" in lines[0] and "within 0.01 of DDP's" in lines[0]
    assert "40.0× fewer" in lines[1] and "faster" in lines[1] and "0.200 above" in lines[1]
    assert "slower" in lines[2] and "0.100 below" in lines[2]
    # ties are named, every one (examiner 5); the fast link's run is not ranked on the slow one
    runs["DiLoCo, H=4"] = fake("DiLoCo, H=4", 5.2, 31.0, 2.905)
    runs["DDP, fast link"] = {**fake("DDP, fast link", 200.0, 1.0, 3.0),
                              "lever": Lever("DDP, fast link", None, "DDP", other_link=True)}
    headline = verdicts.levers_verdict(runs)[0]
    assert "of the fewest): PowerSGD rank 1 / DiLoCo, H=4;" in headline
    assert "of the least): PowerSGD rank 1 / DiLoCo, H=4;" in headline
    assert "of the lowest): local SGD, H=4 / DiLoCo, H=4." in headline
    # PowerSGD's bytes over the steps after its warm-up are said too (examiner 4)
    runs["PowerSGD rank 1"].update(compressed_sent_per_token=4.0, warm_up_steps=2)
    assert "first 2 steps send whole gradients; over the 6 steps after them, 50.0× fewer" in \
        verdicts.levers_verdict(runs)[1]
    runs["bf16 gradients"]["sent_per_token"] = None
    assert "bytes sent: not measured" in verdicts.levers_verdict(runs)[1]


def span(kind, name, start, end):
    return {"kind": kind, "name": name, "start": start, "end": end, "bytes": 1, "group": 2}


def test_overlap_is_read_from_the_timeline():
    step = [span("compute", "forward", 0, 1), span("compute", "backward", 1, 3),
            span("collective", "all_reduce", 2, 4), span("collective", "all_reduce", 3, 5)]
    after = [span("compute", "backward", 1, 3), span("collective", "all_reduce", 3, 4)]
    on = {"records": [{"rank": 0, "timeline": step}, {"rank": 1, "timeline": after}],
          "ms_per_k_tokens": 10.0}
    off = {"records": [{"rank": 0, "timeline": after}], "ms_per_k_tokens": 20.0}
    assert verdicts.overlap_counts(on["records"]) == {"started": 1, "total": 2,
                                                      "under_share": 0.25}
    assert verdicts.overlap_counts(off["records"])["started"] == 0
    headline, detail, tone = verdicts.overlap_verdict(on, off)
    assert tone == "good" and "0.50×" in headline and "1 of the 2" in detail and "0 of 1" in detail


def test_the_trade_off_figure_draws_the_measured_and_names_the_rest():
    runs = {"DDP": fake("DDP", 200.0, 50.0, 3.0),
            "bf16 gradients": fake("bf16 gradients", None, 49.0, 3.004)}
    fig = figures.trade_off_figure(runs)
    assert [t.x[0] for t in fig.data] == [200.0, 200.0]
    assert "bf16 gradients" in fig.layout.title.text


def test_every_lever_trains_the_same_tokens_on_its_link():
    """The runs the lesson compares: the same model, seed and tokens; accumulation takes twice
    the batch for half the steps; every run but one on the slow link, that one on the fast."""
    from gpututor import RunSpec
    from gpututor.lessons.cutting_communication.levers import lever_specs
    from gpututor.parallel.link import EmulatedLink
    base = RunSpec(model="gpt", model_size="tiny", batch_size=16, seq_len=64, steps=8,
                   device="cpu")
    slow, fast = EmulatedLink(1e6, 0.02), EmulatedLink(1e7, 0.01)
    levers = lever_specs(base, slow, fast)
    assert len({lever.name for lever in levers}) == len(levers)
    names = {lever.name for lever in levers}
    for lever in levers:
        spec = lever.spec
        assert lever.against is None or lever.against in names
        assert spec.steps * spec.batch_size == base.steps * base.batch_size
        assert (spec.model, spec.model_size, spec.seed, spec.seq_len, spec.world_size) == \
            (base.model, base.model_size, base.seed, base.seq_len, 2)
        link = fast if lever.name == "DDP, fast link" else slow
        assert set(link.options()) <= set(spec.options), lever.name
    accumulation = next(lever.spec for lever in levers if lever.spec.grad_accum > 1)
    assert accumulation.grad_accum == 2 and accumulation.steps == base.steps // 2


def test_powersgd_is_charged_three_collectives_on_the_emulated_link():
    """Examiner 3: torch's powerSGD_hook chains three all-reduces (whole tensors, P, Q) once it
    compresses; the link is charged one per collective, whose bytes add up to the metered ones;
    before it compresses, and for plain DDP, one."""
    from types import SimpleNamespace
    from gpututor.parallel.data_parallel.ddp import _HookState, powersgd_bytes
    grads = [torch.zeros(64, 32), torch.zeros(32), torch.zeros(3, 2)]
    flat = torch.zeros(sum(g.numel() for g in grads))
    bucket = SimpleNamespace(gradients=lambda: grads, buffer=lambda: flat)
    state = _HookState.__new__(_HookState)
    state.kind, state.rank = "powersgd", 1
    state.powersgd = SimpleNamespace(iter=2, start_powerSGD_iter=2, min_compression_rate=2.0)
    parts = state.collectives(bucket)
    assert parts == [(32 + 6) * 4, 64 * 4, 32 * 4]
    assert sum(parts) == sum(powersgd_bytes(g, 1) for g in grads) == state.bytes_sent(bucket)
    state.powersgd.iter = 1   # still sending whole gradients: one all-reduce
    assert state.collectives(bucket) == [flat.numel() * 4]
    state.kind = "none"
    assert state.collectives(bucket) == [flat.numel() * 4]
