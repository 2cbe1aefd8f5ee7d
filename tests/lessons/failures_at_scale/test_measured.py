"""Lesson 12's disk write rate and its steps beside an asynchronous write
(gpututor/lessons/failures_at_scale/measured.py)."""
import os
from types import SimpleNamespace

import pytest

from gpututor import RunSpec
from gpututor.formulas import MB
from gpututor.lessons.failures_at_scale.measured import steps_beside_writes, write_rate


def test_the_write_rate_writes_capped_synced_files_and_deletes_them(tmp_path):
    disk = write_rate(str(tmp_path), writers=2, per_writer=4e9, cap=32 * MB)
    assert disk["writers"] == 2 and disk["bytes"] == 16 * MB   # capped: 32 MB in all
    assert disk["bytes_per_s"] == pytest.approx(disk["bytes"] / disk["seconds"])
    assert os.listdir(tmp_path) == []                          # nothing left behind
    assert write_rate(str(tmp_path), writers=1, per_writer=8 * MB, cap=1e9)["bytes"] == 8 * MB
    with pytest.raises(OSError, match="too little to time a write"):
        write_rate(str(tmp_path), writers=1, per_writer=1 * MB)


def record(step, time, step_time, rank=0, blocked=None, written=()):
    return {"rank": rank, "step": step, "time": time, "step_time_s": step_time,
            "checkpoint_step": step if blocked is not None else None,
            "checkpoint_blocked_s": blocked, "checkpoint_written": list(written),
            "probe": step in (1, 2)}


def test_steps_beside_a_write_are_set_against_steps_with_none_in_the_same_run():
    spec = RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1, steps=9)
    # a save after step 3 (training blocked 0.1 s, back at t=4.1) whose write takes until t=5.6:
    # steps 4 and 5 run beside it (5 for 0.6 of its 1.1 s: over half), steps 6 to 8 with none
    records = [record(s, s + 1.0, 1.0) for s in range(3)] + [
        record(3, 4.1, 1.0, blocked=0.1), record(4, 5.1, 1.3), record(5, 6.1, 1.1),
        record(6, 7.1, 1.0, written=[{"step": 3, "save_s": 1.5, "bytes": 1}]),
        record(7, 8.1, 1.0), record(8, 9.1, 0.9)]
    got = steps_beside_writes(SimpleNamespace(spec=spec, records=records))
    assert got["beside"] == [4, 5] and got["clean"] == [3, 6, 7, 8]
    assert got["beside_s"] == pytest.approx(1.2) and got["clean_s"] == pytest.approx(1.0)
    assert got["slowdown"] == pytest.approx(0.2)
    # another rank's write counts too: it shares the machine
    two = [dict(r, rank=0) for r in records] + [dict(r, rank=1, step_time_s=0.5) for r in records]
    two[-len(records) + 6]["checkpoint_written"] = [{"step": 3, "save_s": 3.0, "bytes": 1}]
    for r in two[:len(records)]:
        r["checkpoint_written"] = []
    got = steps_beside_writes(SimpleNamespace(spec=spec.replace(world_size=2), records=two))
    assert got["beside"] == [4, 5, 6] and got["clean"] == [3, 7, 8]
    # with no step free of a write, nothing to set them against
    busy = [dict(r) for r in records]
    busy[6]["checkpoint_written"] = [{"step": 3, "save_s": 9.0, "bytes": 1}]
    got = steps_beside_writes(SimpleNamespace(spec=spec, records=busy))
    assert got["clean"] == [3] and got["slowdown"] is not None
    got = steps_beside_writes(SimpleNamespace(spec=spec.replace(warmup_steps=4), records=busy))
    assert got["clean"] == [] and got["slowdown"] is None and got["clean_s"] is None


def test_a_step_a_write_covers_for_less_than_half_is_left_out_and_noise_is_not_counted():
    spec = RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1, steps=12)
    # the write ends at t=5.3: step 5 (5.0 to 6.1) is touched for 0.3 of 1.1 s, under half
    records = [record(s, s + 1.0, 1.0) for s in range(3)] + [
        record(3, 4.1, 1.0, blocked=0.1), record(4, 5.1, 1.3), record(5, 6.1, 1.1),
        record(6, 7.1, 1.0, written=[{"step": 3, "save_s": 1.2, "bytes": 1}])] + [
        record(s, s + 1.1, t) for s, t in zip(range(7, 12), (0.8, 1.4, 1.0, 0.9, 1.2))]
    got = steps_beside_writes(SimpleNamespace(spec=spec, records=records))
    assert got["beside"] == [4] and got["partial"] == [5]
    assert got["clean"] == [3, 6, 7, 8, 9, 10, 11]
    q1, q3 = got["clean_quartiles"]
    assert q1 == pytest.approx(0.95) and q3 == pytest.approx(1.1)
    assert got["slowdown"] == pytest.approx(0.3) and got["counted"] == pytest.approx(0.3)
    # the same step 4 and median, but the steps with none spread to 1.6 s: within their variation
    spread = [dict(r) for r in records]
    for r, t in zip(spread[7:], (0.6, 1.6, 0.7, 1.5, 1.45)):
        r["step_time_s"] = t
    got = steps_beside_writes(SimpleNamespace(spec=spec, records=spread))
    assert got["slowdown"] == pytest.approx(0.3) and got["clean_quartiles"][1] > 1.3
    assert got["counted"] == 0.0
