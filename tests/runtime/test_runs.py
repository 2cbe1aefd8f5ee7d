"""Real runs: one rank, two ranks, and DDP proven equal to one process on the same global batch."""
import math

import torch

from gpututor import launch
from conftest import SGD, assert_equals_one_process, reference_run, tiny_spec

CONTRACT_KEYS = {"strategy", "world_size", "steps", "tokens_per_s", "step_time_s", "losses",
                 "final_loss", "peak_mem_bytes", "compute_s", "comm_s"}
RECORD_KEYS = {"rank", "step", "loss", "step_time_s", "tokens_per_s", "compute_s", "comm_s",
               "mem_params", "mem_grads", "mem_optimizer", "mem_activations", "mem_peak",
               "flops", "achieved_flops", "mfu"}


def test_one_rank_run_summary_and_records():
    spec = tiny_spec(strategy="single", world_size=1, steps=4)
    run = launch(spec)
    records = list(run)
    summary = run.wait()
    assert CONTRACT_KEYS <= set(summary)
    assert summary["status"] == "finished" and summary["steps"] == 4
    assert len(summary["losses"]) == 4 and all(math.isfinite(x) for x in summary["losses"])
    assert len(records) == 4 and RECORD_KEYS <= set(records[-1])
    last = records[-1]
    assert last["mem_params"] > 0 and last["mem_grads"] == last["mem_params"]
    # AdamW keeps exp_avg and exp_avg_sq per parameter, plus a 4-byte step counter per tensor
    assert 0 < last["mem_optimizer"] - 2 * last["mem_params"] <= 4 * 64
    assert last["mem_activations"] > 0 and last["mem_peak"] > last["mem_params"] * 3
    assert records[1]["flops"] > 0 and summary["flops_per_step"] == records[1]["flops"]
    assert summary["comm_s"] == 0


def test_ddp_two_ranks_equals_one_process(tmp_path):
    spec = tiny_spec(strategy="ddp", world_size=2, steps=5,
                     save_state=str(tmp_path / "ddp.pt"), **SGD)
    summary = launch(spec).wait()
    assert_equals_one_process(spec, summary)   # losses and every trained weight, SGD: see conftest
    assert summary["comm_bytes_per_step"] > 0 and len(summary["peak_mem_bytes"]) == 2


def test_single_strategy_equals_plain_loop(tmp_path):
    spec = tiny_spec(strategy="single", world_size=1, steps=3, model="mlp", model_size="small",
                     save_state=str(tmp_path / "one.pt"))
    summary = launch(spec).wait()
    ref_losses, ref_state = reference_run(spec)
    torch.testing.assert_close(torch.tensor(summary["losses"]), torch.tensor(ref_losses))
    state = torch.load(tmp_path / "one.pt")
    for name, ref in ref_state.items():
        torch.testing.assert_close(state[name], ref, msg=name)
