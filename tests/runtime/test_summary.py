"""The summary's steady figures come from steady steps only: a run without one has None."""
from __future__ import annotations

from gpututor import RunSpec
from gpututor.runtime.summary import summarize


def records(steps: int, world: int = 2) -> list[dict]:
    """Step records as the worker emits them: step 0 slow (setup), steps 1 and 2 the FLOP-count
    and memory probes (slowed by measuring), later steps 0.1 s."""
    slow = {0: 5.0, 1: 2.0, 2: 3.0}
    return [{"rank": rank, "step": step, "loss": 2.0 - 0.1 * step, "device": "cpu", "params": 10,
             "step_time_s": slow.get(step, 0.1), "comm_s": slow.get(step, 0.1) / 10,
             "comm_bytes": 40, "probe": step in (1, 2), "flops": 1e9 if step >= 1 else None,
             "achieved_flops": 1e9 / slow.get(step, 0.1) if step >= 1 else None}
            for step in range(steps) for rank in range(world)]


def test_steady_figures_leave_out_warm_up_and_probe_steps():
    spec = RunSpec(strategy="ddp", world_size=2, batch_size=8, seq_len=32, steps=6)
    s = summarize(spec, records(6))
    assert (s["step_time_s"], s["comm_s"], s["comm_bytes_per_step"]) == (0.1, 0.01, 40)
    assert abs(s["tokens_per_s"] - 8 * 32 / 0.1) < 1e-6
    assert len(s["losses"]) == 6


def test_a_run_without_a_steady_step_has_no_steady_figures():
    # 3 steps: step 0 is warm-up, steps 1 and 2 the probes; averaging them in would report a
    # step 30x the steady one
    spec = RunSpec(strategy="ddp", world_size=2, batch_size=8, seq_len=32, steps=3)
    s = summarize(spec, records(3))
    for key in ("tokens_per_s", "step_time_s", "comm_s", "comm_bytes_per_step",
                "achieved_flops", "compute_s", "mfu"):
        assert s[key] is None, key
    # what is not a steady figure stays: losses, step count, FLOPs counted once
    assert len(s["losses"]) == 3 and s["final_loss"] == 2.0 - 0.2 and s["steps"] == 3
    assert s["flops_per_step"] == 1e9
