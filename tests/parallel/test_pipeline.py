"""Pipeline parallel: the schedules' order, the measured bubble, and every schedule (from scratch
and torch.distributed.pipelining) training exactly like one process."""
import pytest
import torch

from gpututor import launch
from gpututor.parallel.pipeline import schedules, stages
from gpututor.parallel.pipeline.timeline import (free_handoff_bubble, measured_bubble_fraction,
                                                 step_events, theoretical_bubble_fraction)
from gpututor.lessons.pipeline_parallel.figures import gantt
from conftest import SGD, assert_equals_one_process, tiny_spec


class RecordingWorker:
    """Stands in for a StageWorker: records the order the schedule asks for."""

    def __init__(self, index, count):
        self.index, self.count, self.calls = index, count, []

    def forward(self, i):
        self.calls.append(f"F{i}")

    def backward(self, i):
        self.calls.append(f"B{i}")


def order(schedule, index, count, m):
    worker = RecordingWorker(index, count)
    schedules.SCHEDULE_FUNCTIONS[schedule](worker, m)
    return " ".join(worker.calls)


def test_schedules_order_forwards_and_backwards():
    assert order("naive", 0, 2, 1) == "F0 B0"
    assert order("gpipe", 1, 2, 3) == "F0 F1 F2 B0 B1 B2"
    # 1F1B, 4 stages, 6 micro-batches: stage s warms up with 4-s-1 forwards
    assert order("1f1b", 0, 4, 6) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5"
    assert order("1f1b", 2, 4, 6) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5"
    assert order("1f1b", 3, 4, 6) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5"
    assert order("1f1b", 0, 4, 2) == "F0 F1 B0 B1"   # fewer micro-batches than warm-up


def test_stages_split_blocks_evenly():
    assert [list(stages.block_range(4, s, 2)) for s in range(2)] == [[0, 1], [2, 3]]
    assert [list(stages.block_range(5, s, 3)) for s in range(3)] == [[0, 1], [2, 3], [4]]


def test_bubble_fraction_from_spans():
    assert theoretical_bubble_fraction(2, 1) == 0.5 and theoretical_bubble_fraction(4, 4) == pytest.approx(3 / 7)
    # two stages, 1 micro-batch, forward 1 s and backward 2 s each: 2 x 3 s busy of 2 x 6 s
    assert measured_bubble_fraction([(0.0, 6.0, 3.0), (1.0, 5.0, 3.0)]) == pytest.approx(0.5)
    assert measured_bubble_fraction([(0.0, 4.0, 4.0), (0.0, 4.0, 4.0)]) == 0.0


SCHEDULE_RUNS = [
    ("pp", "naive", 1), ("pp", "gpipe", 2), ("pp", "1f1b", 4),
    ("pp-torch", "gpipe", 2), ("pp-torch", "1f1b", 4),
]


def test_the_bubble_with_free_handoffs_replays_the_measured_durations():
    """GPipe, 2 stages, 2 micro-batches of 1 s forward and 1 s backward each: with every
    hand-off 0.5 s late the stages idle more than the theory says; replayed with free hand-offs,
    the same durations give the theory's (p-1)/(m+p-1) = 1/3."""
    late = {0: [["F", 0, 0, 1], ["F", 1, 1, 2], ["B", 0, 5.5, 6.5], ["B", 1, 6.5, 7.5]],
            1: [["F", 0, 1.5, 2.5], ["F", 1, 2.5, 3.5], ["B", 0, 3.5, 4.5], ["B", 1, 4.5, 5.5]]}
    spans = [(min(s for _, _, s, _ in e), max(x for *_, x in e), sum(x - s for _, _, s, x in e))
             for e in late.values()]
    assert measured_bubble_fraction(spans) > 0.4
    assert free_handoff_bubble(late) == pytest.approx(theoretical_bubble_fraction(2, 2))
    # a last stage twice as slow: replayed, the bubble is above the theory, from compute alone
    slow = {0: late[0], 1: [["F", 0, 0, 2], ["F", 1, 0, 2], ["B", 0, 0, 2], ["B", 1, 0, 2]]}
    assert free_handoff_bubble(slow) > theoretical_bubble_fraction(2, 2) + 0.05
    # an order no schedule runs (stage 1 backs up a micro-batch stage 0 never ran) has no replay
    assert free_handoff_bubble({0: [["B", 0, 0, 1]], 1: [["B", 0, 0, 1], ["F", 0, 1, 2]]}) is None




@pytest.mark.parametrize("strategy,schedule,m", SCHEDULE_RUNS)
def test_each_schedule_equals_one_process(tmp_path, strategy, schedule, m):
    options = (("schedule", schedule),) + ((("microbatches", m),) if schedule != "naive" else ())
    spec = tiny_spec(strategy=strategy, world_size=2, steps=4,
                     options=options, save_state=str(tmp_path / "pp.pt"), **SGD)
    run = launch(spec)
    summary = run.wait()
    # micro-batch losses summed (each / m) vs one mean: float rounding only, in losses and weights
    assert_equals_one_process(spec, summary)
    # the tied embedding's two copies (first and last stage) took the same steps
    state = torch.load(spec.save_state)
    torch.testing.assert_close(state["head.weight"], state["tok_emb.weight"])
    assert 0 < summary["bubble_fraction"] < 1
    if strategy == "pp-torch":   # torch's send/recv are not metered: None, not 0
        assert summary["comm_s"] is None and summary["comm_bytes_per_step"] is None
    else:
        assert summary["comm_bytes_per_step"] > 0 and summary["comm_s"] is not None
    events = step_events(run.records, 2)
    assert sorted(events) == [0, 1]
    for stage_events in events.values():   # every micro-batch's forward and backward, timed
        kinds = [(k, i) for k, i, _, _ in stage_events]
        assert {("F", i) for i in range(m)} | {("B", i) for i in range(m)} == set(kinds)
        assert all(end >= start >= 0 for _, _, start, end in stage_events)
    assert len(gantt(events).data) == 2


@pytest.mark.parametrize("schedule,m", [("gpipe", 2), ("1f1b", 4), ("interleaved-1f1b", 2)])
def test_sends_posted_without_waiting_equal_one_process(tmp_path, schedule, m):
    """Option sends="post": a stage waits only for what it receives (torch's way); the sends
    are waited for at the end of the step. Same training as one process."""
    spec = tiny_spec(strategy="pp", model_size="small", world_size=2,   # step 3 is steady
                     options=(("schedule", schedule), ("microbatches", m), ("sends", "post")),
                     save_state=str(tmp_path / "post.pt"), **SGD)
    summary = launch(spec).wait()
    assert_equals_one_process(spec, summary)
    assert 0 < summary["bubble_fraction"] < 1 and summary["comm_bytes_per_step"] > 0


def test_1f1b_holds_fewer_activations_than_gpipe():
    base = tiny_spec(strategy="pp", world_size=2, steps=3, batch_size=16)
    held = {}
    for schedule in ("gpipe", "1f1b"):
        summary = launch(base.replace(options=(("schedule", schedule), ("microbatches", 8)))).wait()
        held[schedule] = summary["mem_by_category"]["activations"]
    # GPipe: all 8 micro-batches alive after the forwards. 1F1B, stage 0 of 2: at most 2;
    # the last stage: 1 (measured, so only roughly: a stage also holds what it sent and got)
    assert held["1f1b"][0] < 0.5 * held["gpipe"][0]
    assert held["1f1b"][1] < 0.5 * held["gpipe"][1]


def test_three_stages_with_a_middle_stage_equal_one_process(tmp_path):
    spec = tiny_spec(strategy="pp", model_size="small", world_size=3, steps=2,
                     options=(("schedule", "1f1b"), ("microbatches", 4)),
                     save_state=str(tmp_path / "pp3.pt"), **SGD)
    assert_equals_one_process(spec, launch(spec).wait())


@pytest.mark.parametrize("changes,message", [
    (dict(world_size=3), r"world_size=3 is invalid for strategy='pp' with model_size='tiny': "
                         r"each stage needs at least one of its 2 blocks: allowed is 1 to 2"),
    (dict(model="mlp", model_size="small"), r"model='mlp' is invalid for strategy='pp'"),
    (dict(options=(("schedule", "naive"), ("microbatches", 2))),
     r"microbatches=2 is invalid with schedule='naive'"),
    (dict(options=(("microbatches", 3),)), r"batch_size=8 is invalid with microbatches=3"),
    (dict(options=(("schedule", "zigzag"),)), r"schedule='zigzag' is invalid: allowed is one of "
                                              r"naive, gpipe, 1f1b"),
    (dict(options=(("sends", "later"),)), r"sends='later' is invalid: allowed is one of wait, post"),
    (dict(strategy="pp-torch", options=(("schedule", "naive"),)),
     r"schedule='naive' is invalid: allowed is one of gpipe, 1f1b"),
])
def test_bad_pipeline_specs_are_clear_errors(changes, message):
    with pytest.raises(ValueError, match=message):
        tiny_spec(**{"strategy": "pp", **changes})


@pytest.mark.parametrize("strategy", ["pp", "pp-torch"])
def test_one_step_run_with_flops_and_memory_measured_at_step_0(strategy):
    # steps=1: the worker counts FLOPs and memory in step 0, which must not disturb the pipeline
    summary = launch(tiny_spec(strategy=strategy, steps=1,
                               options=(("schedule", "1f1b"), ("microbatches", 2)))).wait()
    assert summary["steps"] == 1 and summary["flops_per_step"] > 0


def test_handoff_is_the_shortest_wait_between_stages():
    from gpututor.parallel.pipeline.timeline import handoff_s
    events = {0: [["F", 0, 0.0, 1.0], ["F", 1, 1.0, 2.0]],
              1: [["F", 0, 1.1, 2.1], ["F", 1, 2.5, 3.5]]}
    assert handoff_s(events) == pytest.approx(0.1)


def test_the_pipeline_clocks_stop_when_a_gpu_message_is_really_here(monkeypatch):
    """On a GPU a P2P or NCCL wait only makes the stream wait: the exchange, the tied weights'
    all-reduce and each timeline interval synchronise the device before reading the clock, so
    a message's wait is counted where it happens, not in the next interval."""
    from types import SimpleNamespace
    from gpututor.measure.timing import CommMeter
    from gpututor.parallel.pipeline import timeline
    events = []
    for module in (schedules, stages, timeline):
        monkeypatch.setattr(module, "synchronize", lambda device: events.append("synchronize"))

    class Work:
        def wait(self):
            events.append("wait")

    monkeypatch.setattr(schedules.dist, "batch_isend_irecv", lambda ops: [Work() for _ in ops])
    ctx = SimpleNamespace(device=torch.device("cpu"), comm=CommMeter())
    p2p = schedules.PointToPoint(ctx)
    p2p.queued = ["a send"]
    p2p.exchange(["a receive"])
    assert events == ["synchronize", "wait", "wait", "synchronize"]

    events.clear()
    monkeypatch.setattr(stages.dist, "all_reduce", lambda grad, group=None: events.append("all_reduce"))
    weight = torch.nn.Parameter(torch.ones(2))
    weight.grad = torch.ones(2)
    stage = SimpleNamespace(is_first=True, is_last=False, tied_weight=lambda: weight)
    stages.tied_weight_sync(stage, None, ctx)
    assert events == ["synchronize", "all_reduce", "synchronize"]

    events.clear()
    ctx.phase = lambda name: __import__("contextlib").nullcontext()
    line = timeline.StageTimeline(ctx)
    with line.interval("F", 0):
        events.append("forward")
    assert events == ["synchronize", "forward", "synchronize"]


def test_posted_sends_are_waited_at_the_end_of_the_step_and_receives_at_once(monkeypatch):
    """sends="post": of one exchange's handles only the receives are waited; the sends (with
    their tensors) wait for ``wait_posted``. Where the backend coalesces the batch into one
    handle (NCCL), the receives cannot be waited apart from the sends: all are waited."""
    from types import SimpleNamespace
    from gpututor.measure.timing import CommMeter
    waited = []

    class Work:
        def __init__(self, name):
            self.name = name

        def wait(self):
            waited.append(self.name)

    ops = lambda: [schedules.dist.P2POp(schedules.dist.isend, torch.ones(1), 1),
                   schedules.dist.P2POp(schedules.dist.irecv, torch.ones(1), 1)]
    monkeypatch.setattr(schedules.dist, "P2POp", lambda op, tensor, peer: SimpleNamespace(
        op=op, tensor=tensor, peer=peer))
    monkeypatch.setattr(schedules.dist, "batch_isend_irecv",
                        lambda batch: [Work(o.op.__name__) for o in batch])
    ctx = SimpleNamespace(device=torch.device("cpu"), comm=CommMeter())
    p2p = schedules.PointToPoint(ctx, "post")
    send, receive = ops()
    p2p.queued = [send]
    p2p.exchange([receive])
    assert waited == ["irecv"] and [t for _, t in p2p.posted] == [send.tensor]
    p2p.wait_posted()
    assert waited == ["irecv", "isend"] and p2p.posted == []

    waited.clear()   # NCCL: one handle for the whole batch
    monkeypatch.setattr(schedules.dist, "batch_isend_irecv", lambda batch: [Work("batch")])
    send, receive = ops()
    p2p.queued = [send]
    p2p.exchange([receive])
    assert waited == ["batch"] and p2p.posted == []
