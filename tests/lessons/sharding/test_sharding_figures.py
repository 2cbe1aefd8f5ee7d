"""Lesson 03's board: runs strategies one after the other, draws every rank and the formula."""
import time

import pytest
import torch.distributed as dist

from gpututor import RunSpec
from gpututor.lessons.sharding.figures import ShardingBoard


def test_board_draws_every_rank_and_the_formula():
    spec = RunSpec(model="gpt", model_size="tiny", world_size=2, batch_size=8, seq_len=32,
                   steps=3)
    board = ShardingBoard({name: spec.replace(strategy=name) for name in ("ddp", "zero3")})
    summaries = board.run(wait=True)
    assert list(summaries) == ["ddp", "zero3"] and not board.run_button.disabled
    fig = board.fig
    assert list(fig.data[0].x) == [0, 1, 2] and list(fig.data[1].y) == summaries["zero3"]["losses"]
    params = fig.data[2].y  # the parameters' bars: ddp r0, ddp r1, zero3 r0, zero3 r1
    assert params[2] == pytest.approx(params[0] / 2, rel=0.01)
    formula = fig.data[-1].y
    assert formula[0] == pytest.approx(2 * formula[2], rel=1e-9)
    loss, memory = board.view.charts   # what the live view was sent: the same numbers
    assert [s["dash"] for s in loss["series"]] == ["solid", "dash"]
    assert memory["series"][0]["y"] == pytest.approx(list(params))
    assert memory["marks"][0]["y"] == pytest.approx(list(formula))
    # the live canvas is narrow: a run's name under its first rank only, so no label collides
    assert memory["categories"] == ["ddp r0", "r1", "zero3 r0", "r1"]
    static = board.static_figure().data[2].x   # plotly's copy: run over rank, on two levels
    assert [list(level) for level in static] == [["ddp", "ddp", "zero3", "zero3"],
                                                 ["r0", "r1", "r0", "r1"]]
    assert not dist.is_initialized()


def test_board_stop_ends_the_run_and_skips_the_rest():
    spec = RunSpec(model="gpt", model_size="tiny", world_size=2, batch_size=8, seq_len=32,
                   steps=200)
    board = ShardingBoard({name: spec.replace(strategy=name) for name in ("zero2", "zero3")})
    board.run()
    deadline = time.monotonic() + 60
    while not board.records["zero2"] and time.monotonic() < deadline:
        time.sleep(0.05)
    board.stop_button.click()
    board.wait()
    assert board.summaries == {} and board.records["zero3"] == []
    assert board.status.value == "stopped" and not board.run_button.disabled


def test_variants_figure_and_memory_table_never_show_an_unmeasured_figure_as_zero():
    from gpututor.lessons.sharding.figures import memory_table, variants_figure
    measured = {"comm_wire_bytes_per_step": 2e6, "peak_mem_bytes": [9e6],
                "mem_by_category": {"activations": [3e6]}}
    unmeasured = {**measured, "comm_wire_bytes_per_step": None, "peak_mem_bytes": [None]}
    fig = variants_figure({"fsdp": measured, "fsdp bf16": unmeasured})
    sent, activations, peak = fig.data
    assert list(sent.y) == [2.0, None] and list(sent.text) == ["2.00", "not measured"]
    assert list(activations.y) == [3.0, 3.0] and list(peak.y) == [9.0, None]
    row = {"label": "zero3", "measured_params": 1e6, "measured_grads": 1e6, "measured_optimizer": 2e6,
           "measured_state": 4e6, "formula_total": 4e6, "state_gap": 0, "measured_activations": 1e6,
           "peak": None}
    table = memory_table([row]).data          # an HTML table, no wide text table
    assert table.count("<table") == 1 and table.count("<tr>") == 2
    assert "not measured</td>" in table and ">4.00</td>" in table


def test_comm_lines_print_not_measured_for_what_cuda_leaves_unmeasured():
    """On CUDA, FSDP2's collectives overlap compute on their own streams: ``comm_s`` is None.
    The line says "not measured" instead of multiplying None (cell 26 of lesson 03)."""
    from gpututor.lessons.sharding.figures import comm_rows
    from gpututor.lessons.sharding.verdicts import comm_lines
    base = {"comm_wire_bytes_per_step": 2e6, "comm_bytes_per_step": 2e6, "step_time_s": 0.1,
            "comm_s": 0.02, "compute_s": 0.08, "params": 10}
    rows = comm_rows({"ddp": base, "fsdp": {**base, "comm_s": None, "compute_s": None,
                                            "comm_wire_bytes_per_step": 3e6},
                      "other": {**base, "comm_wire_bytes_per_step": None, "comm_s": None}})
    ddp, fsdp, other = comm_lines(rows)
    assert "2.00 MB = 1.00x ddp" in ddp and "compute's wait: 20.0 ms; step 100.0 ms" in ddp
    assert "3.00 MB = 1.50x ddp" in fsdp and "compute's wait: not measured; step 100.0 ms" in fsdp
    assert "sent per rank per step not measured;" in other
