"""Lesson 04's message counts: DDP's buckets and tensor parallel's all-reduces from a run's records
(the sentence on where the runs go is tested in ``tests/lessons/common/test_device_line.py``)."""
from gpututor import RunSpec
from gpututor.lessons.tensor_parallel import messages


def ddp_records(steps: int, world: int = 2) -> list[dict]:
    """Records shaped like a DDP run's: step 0 one bucket, then two, the first launched early."""
    out = []
    for step in range(steps):
        buckets = ([{"index": 0, "bytes": 300, "before_last_grad_s": 0.0}] if step == 0 else
                   [{"index": 0, "bytes": 100, "before_last_grad_s": 0.01},
                    {"index": 1, "bytes": 300, "before_last_grad_s": 0.0}])
        out += [{"rank": r, "step": step, "probe": step in (1, 2), "ddp_buckets": buckets}
                for r in range(world)]
    return out


def test_ddp_buckets_come_from_the_one_steady_step():
    spec = RunSpec(strategy="ddp", world_size=2, steps=4, device="cpu")
    got = messages.ddp_buckets(spec, ddp_records(4))
    assert got == {"step": 3, "count": 2, "bytes": 400, "early_bytes": 100, "early_share": 0.25}


def test_tp_allreduces_are_bytes_over_one_allreduce():
    assert messages.tp_allreduces({"comm_bytes_per_step": 16 * 1048576}, 1048576) == {
        "count": 16, "bytes": 16 * 1048576}
