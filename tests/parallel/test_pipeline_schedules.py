"""Modern pipeline schedules: interleaved 1F1B from scratch (its order, and why it exchanges
messages where it does), and interleaved / zero-bubble schedules through torch, each training
exactly like one process."""
import pytest
import torch

from gpututor import launch
from gpututor.parallel.pipeline import interleaved
from gpututor.parallel.pipeline.timeline import (handoff_s, step_events, step_stages,
                                                 theoretical_bubble_fraction)
from gpututor.lessons.pipeline_parallel.figures import NAMES, gantt
from conftest import assert_equals_one_process, tiny_spec


class RecordingWorker:
    """Stands in for an InterleavedWorker: records computes and exchanges in order."""

    def __init__(self, index, count, v):
        self.index, self.count, self.v, self.calls = index, count, v, []

    def forward(self, chunk, i):
        self.calls.append(("F", chunk, i))

    def backward(self, chunk, i):
        self.calls.append(("B", chunk, i))

    def exchange(self, forward, backward):
        self.calls.append(("X", forward, backward))


def calls(rank, p, v, m):
    worker = RecordingWorker(rank, p, v)
    interleaved.interleaved_1f1b(worker, m)
    return worker.calls


def order(rank, p, v, m):
    """Capitals: chunk 0, lower case: chunk 1 (as in interleaved.py's docstring)."""
    return " ".join((k if c == 0 else k.lower()) + str(i) for k, c, i in calls(rank, p, v, m)
                    if k != "X")


def test_interleaved_order_is_megatrons():
    assert order(0, 2, 2, 4) == "F0 F1 f0 f1 F2 b0 F3 b1 f2 B0 f3 B1 b2 b3 B2 B3"
    assert order(1, 2, 2, 4) == "F0 F1 f0 b0 f1 b1 F2 B0 F3 B1 f2 b2 f3 b3 B2 B3"
    for p, v, m in [(2, 2, 2), (3, 2, 6), (4, 3, 8)]:
        for rank in range(p):
            done = [c for c in calls(rank, p, v, m) if c[0] != "X"]
            units = {(c, i) for c in range(v) for i in range(m)}
            assert sorted(done) == sorted([("F", *u) for u in units] + [("B", *u) for u in units])
            assert all(done.index(("F", c, i)) < done.index(("B", c, i)) for c, i in units)


# ---- why the exchanges are where they are: a simulation of the messages -----------------------

def messages(op, rank, p, v):
    """What computing ``op`` on ``rank`` needs to receive and then sends: (kind, peer, id)."""
    kind, chunk, i = op
    stage, last = chunk * p + rank, p * v - 1
    if kind == "F":
        recv = [("recv", (stage - 1) % p, ("act", stage - 1, i))] if stage > 0 else []
        send = [("send", (stage + 1) % p, ("act", stage, i))] if stage < last else []
    else:
        recv = [("recv", (stage + 1) % p, ("grad", stage + 1, i))] if stage < last else []
        send = [("send", (stage - 1) % p, ("grad", stage, i))] if stage > 0 else []
    return recv, send


def with_exchanges(rank, p, v, m):
    """The schedule's own batches: at each exchange, the sends queued since the last one and
    the receives of the named next forward and backward."""
    batches, queued = [], []
    for call in calls(rank, p, v, m):
        if call[0] == "X":
            receives = [r for kind, unit in zip("FB", call[1:]) if unit is not None
                        for r in messages((kind, *unit), rank, p, v)[0]]
            if queued or receives:
                batches.append(queued + receives)
            queued = []
        else:
            queued += messages(call, rank, p, v)[1]
    return batches


def receive_before_compute(rank, p, v, m):
    """schedules.py's simpler pattern: before each compute, the last compute's send together
    with this compute's receive."""
    batches, queued = [], []
    for call in calls(rank, p, v, m):
        if call[0] != "X":
            recv, send = messages(call, rank, p, v)
            if queued or recv:
                batches.append(queued + recv)
            queued = send
    return batches + ([queued] if queued else [])


def run_batches(batches: dict) -> str:
    """Each rank posts one batch at a time and waits for all of it; a send is matched only by
    a posted receive (gloo and NCCL alike), first come first matched per pair of ranks."""
    at, posted, waiting = {r: 0 for r in batches}, {}, {}

    def post(rank):
        waiting[rank] = []
        for kind, peer, msg in batches[rank][at[rank]] if at[rank] < len(batches[rank]) else []:
            op = {"msg": msg, "done": False}
            pair = (rank, peer) if kind == "send" else (peer, rank)
            posted.setdefault(pair, ([], []))[kind == "recv"].append(op)
            waiting[rank].append(op)

    for rank in batches:
        post(rank)
    while any(at[r] < len(batches[r]) for r in batches):
        progress = False
        for sends, recvs in posted.values():
            while sends and recvs:
                send, recv = sends.pop(0), recvs.pop(0)
                assert send["msg"] == recv["msg"], "a message arrived where another was expected"
                send["done"] = recv["done"] = progress = True
        for rank in batches:
            if at[rank] < len(batches[rank]) and all(op["done"] for op in waiting[rank]):
                at[rank] += 1
                post(rank)
                progress = True
        if not progress:
            return "deadlock"
    return "ok"


def test_interleaved_exchanges_never_deadlock_where_receiving_late_does():
    for p in (2, 3, 4):
        for v in (2, 3):
            for m in (p, 2 * p, 3 * p):
                assert run_batches({r: with_exchanges(r, p, v, m) for r in range(p)}) == "ok"
    # receiving each input only right before computing it (fine for 1F1B) deadlocks here
    assert run_batches({r: receive_before_compute(r, 2, 2, 4) for r in range(2)}) == "deadlock"


# ---- real runs: equal to one process, the bubble measured -------------------------------------

CHUNKED_RUNS = [("pp", "interleaved-1f1b"), ("pp-torch", "interleaved-1f1b"),
                ("pp-torch", "interleaved-zero-bubble"), ("pp-torch", "zbv")]


@pytest.mark.parametrize("strategy,schedule", CHUNKED_RUNS)
def test_chunked_schedule_equals_one_process(tmp_path, strategy, schedule):
    p, v, m = 2, 2, 4     # the small GPT's 4 blocks: one per virtual stage
    spec = tiny_spec(strategy=strategy, model_size="small", world_size=p, steps=4, optimizer="sgd",
                     options=(("schedule", schedule), ("microbatches", m)),
                     save_state=str(tmp_path / "pp.pt"))
    run = launch(spec)
    summary = run.wait()
    assert_equals_one_process(spec, summary)
    state = torch.load(spec.save_state)
    torch.testing.assert_close(state["head.weight"], state["tok_emb.weight"])
    theory = theoretical_bubble_fraction(p, m, v)
    print(f"\n{strategy} {schedule} p={p} v={v} m={m}: bubble measured "
          f"{summary['bubble_fraction']:.2f}, theory (p-1)/(v·m+p-1) = {theory:.2f}")
    events, stages = step_events(run.records, 2), step_stages(run.records, 2)
    owned = {0: {0, 3}, 1: {1, 2}} if schedule == "zbv" else {0: {0, 2}, 1: {1, 3}}
    kinds = ("F", "B", "W") if schedule in ("interleaved-zero-bubble", "zbv") else ("F", "B")
    for rank, stage_events in events.items():   # every pass of every micro-batch and chunk
        assert {(k, i, s) for (k, i, _, _), s in zip(stage_events, stages[rank])} == \
            {(k, i, s) for k in kinds for i in range(m) for s in owned[rank]}
    assert handoff_s(events, stages) > 0
    fig = gantt(events, stages=stages)   # a bar trace per kind of pass; later chunks lighter
    assert [t.name for t in fig.data] == [NAMES[k] for k in kinds]
    for trace in fig.data:
        assert set(trace.marker.opacity) == {1.0, 0.55}


def test_interleaved_on_four_ranks_equals_one_process(tmp_path):
    spec = tiny_spec(strategy="pp", model_size="large", world_size=4, steps=4, optimizer="sgd",
                     seq_len=16,
                     options=(("schedule", "interleaved-1f1b"), ("microbatches", 4)),
                     save_state=str(tmp_path / "pp4.pt"), timeout=60.0)
    summary = launch(spec).wait()
    assert_equals_one_process(spec, summary)
    print(f"\npp interleaved-1f1b p=4 v=2 m=4: bubble measured {summary['bubble_fraction']:.2f}, "
          f"theory {theoretical_bubble_fraction(4, 4, 2):.2f}")


def test_handoff_follows_virtual_stages():
    # rank 0 runs virtual stages 0 and 2, rank 1 stage 1: 0 -> 1 takes 0.1 s, 1 -> 2 0.3 s
    events = {0: [["F", 0, 0.0, 1.0], ["F", 0, 2.4, 3.0]], 1: [["F", 0, 1.1, 2.1]]}
    assert handoff_s(events, {0: [0, 2], 1: [1]}) == pytest.approx(0.1)
    events[0][0][3] = 0.9
    assert handoff_s(events, {0: [0, 2], 1: [1]}) == pytest.approx(0.2)


@pytest.mark.parametrize("changes,message", [
    (dict(options=(("schedule", "interleaved-1f1b"), ("virtual_stages", 3))),
     r"option virtual_stages=3 is invalid with world_size=2 and model_size='small': its 4 "
     r"blocks must split evenly into 2 x 3 chunks: allowed is 2$"),
    (dict(options=(("schedule", "interleaved-1f1b"), ("microbatches", 3)), batch_size=6),
     r"option microbatches=3 is invalid with schedule='interleaved-1f1b' on 2 pipeline ranks: "
     r"allowed is a multiple of 2"),
    (dict(options=(("schedule", "1f1b"), ("virtual_stages", 2))),
     r"option virtual_stages=2 is invalid with schedule='1f1b' \(one stage per rank\): allowed "
     r"is None or 1 \(more only with schedule 'interleaved-1f1b'"),
    (dict(options=(("schedule", "interleaved-1f1b"), ("virtual_stages", 1))),
     r"virtual_stages=1 is invalid with schedule='interleaved-1f1b': allowed is 2 or more"),
    (dict(strategy="pp-torch", options=(("schedule", "zbv"), ("virtual_stages", 4)),
          model_size="large"), r"virtual_stages=4 is invalid with schedule='zbv': allowed is 2"),
    (dict(model_size="tiny", options=(("schedule", "interleaved-1f1b"),)),
     r"its 2 blocks must split evenly into 2 x 2 chunks: allowed is none"),
    (dict(world_size=1, options=(("schedule", "interleaved-1f1b"),)),
     r"world_size=1 is invalid with schedule='interleaved-1f1b': allowed is 2 or more"),
    (dict(strategy="ddp+pp", world_size=4, mesh=(("dp", 2), ("pp", 2)),
          options=(("schedule", "interleaved-1f1b"),)),
     r"schedule='interleaved-1f1b' is invalid for strategy='ddp\+pp': allowed is .* with a "
     r"pipeline alone"),
])
def test_bad_chunked_specs_are_clear_errors(changes, message):
    with pytest.raises(ValueError, match=message):
        tiny_spec(**{"strategy": "pp", "model_size": "small", **changes})
