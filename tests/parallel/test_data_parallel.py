"""From-scratch data parallel (naive and bucketed) equals one process, like DDP does."""
import pytest
import torch

from gpututor import build_model, launch
from conftest import SGD, assert_equals_one_process, reference_run, tiny_spec



def largest_change(spec, state) -> float:
    """How far training moved the weights: the largest |trained - initial| of any weight."""
    init = build_model(spec).state_dict()
    return max((state[k] - init[k]).abs().max().item() for k in init)


@pytest.mark.parametrize("strategy,world,options", [
    ("dp-naive", 2, ()),
    ("dp-bucketed", 2, (("bucket_cap_mb", 0.25),)),   # several buckets: overlap really happens
    ("dp-naive", 3, ()),                              # 3 ranks: the average is /3, not /2
    ("dp-bucketed", 3, (("bucket_cap_mb", 0.25),)),
])
def test_from_scratch_data_parallel_equals_one_process(tmp_path, strategy, world, options):
    spec = tiny_spec(strategy=strategy, world_size=world, steps=4, batch_size=4 * world,
                     options=options, save_state=str(tmp_path / "dp.pt"), **SGD)
    summary = launch(spec).wait()
    assert_equals_one_process(spec, summary)   # losses and every trained weight, to ~1e-6
    assert summary["comm_bytes_per_step"] > 0


def test_the_comparison_fails_for_a_gradient_off_by_world_size_or_grad_accum(tmp_path):
    """The equivalence check above can fail: 3 ranks x 2 micro-batches must average over 6
    gradients; a run that forgets /world_size (3x the gradient), /grad_accum (2x) or divides
    twice (0.5x) does not pass it. With SGD, k x every gradient is exactly k x the learning
    rate, so one process at lr x k is that mis-scaled run."""
    spec = tiny_spec(strategy="dp-bucketed", world_size=3, batch_size=12, grad_accum=2, steps=4,
                     options=(("bucket_cap_mb", 0.25),), save_state=str(tmp_path / "dp.pt"),
                     **SGD)
    summary = launch(spec).wait()
    assert_equals_one_process(spec, summary)
    assert largest_change(spec, torch.load(spec.save_state)) > 0.1   # the weights did move
    for scale in (3, 2, 0.5):
        wrong = spec.replace(lr=spec.lr * scale)
        with pytest.raises(AssertionError):
            assert_equals_one_process(wrong, summary)
        # the weights alone tell it too: here the losses compared are the wrong run's own
        with pytest.raises(AssertionError):
            assert_equals_one_process(wrong, {"losses": reference_run(wrong)[0]})


def test_bucketed_with_accumulation_equals_big_batch(tmp_path):
    spec = tiny_spec(strategy="dp-bucketed", world_size=2, steps=3, grad_accum=2,
                     save_state=str(tmp_path / "dp.pt"), **SGD)
    # reference_run trains on the whole global batch at once: no micro-batches
    assert_equals_one_process(spec, launch(spec).wait())


def test_unknown_or_bad_option_is_a_clear_error():
    with pytest.raises(ValueError, match="option='bucket_size' is invalid for strategy='ddp'"):
        tiny_spec(options=(("bucket_size", 1),))
    with pytest.raises(ValueError, match="comm_hook='zip' is invalid: allowed is one of none"):
        tiny_spec(options=(("comm_hook", "zip"),))


def test_ddp_accumulation_with_no_sync_equals_big_batch(tmp_path):
    spec = tiny_spec(strategy="ddp", world_size=2, steps=3, grad_accum=2,
                     options=(("bucket_cap_mb", 0.25),), save_state=str(tmp_path / "ddp.pt"),
                     **SGD)
    assert_equals_one_process(spec, launch(spec).wait())


@pytest.fixture(scope="module")
def plain_ddp(tmp_path_factory):
    """DDP on 2 ranks with plain all-reduce (no hook): the reference for the compression hooks."""
    spec = tiny_spec(strategy="ddp", world_size=2, steps=6,
                     save_state=str(tmp_path_factory.mktemp("ddp") / "plain.pt"), **SGD)
    return spec, launch(spec).wait(), torch.load(spec.save_state)


def hooked(plain_ddp, tmp_path, **options):
    spec = plain_ddp[0].replace(options=tuple(options.items()), save_state=str(tmp_path / "h.pt"))
    return launch(spec).wait(), torch.load(spec.save_state)


@pytest.mark.parametrize("hook,bits", [("bf16", 8), ("fp16", 11)])
def test_16_bit_hooks_change_the_weights_only_by_their_rounding(plain_ddp, tmp_path, hook, bits):
    spec, plain, plain_state = plain_ddp
    summary, state = hooked(plain_ddp, tmp_path, comm_hook=hook)
    # Each rank's gradient is rounded to `bits` significant bits before the all-reduce and the
    # sum again after it: relative error 2 x 2^-bits of every update, so of the weights' whole
    # change (measured: bf16 7e-4 of a 1.8e-3 allowance, fp16 7e-5 of 2.3e-4, for a change of
    # 0.23; a gradient off by 2x differs by 0.23). Against one process (plain DDP equals it to
    # ~1e-6) and against plain DDP on the same ranks
    tolerance = 2 * 2.0**-bits * largest_change(spec, plain_state)
    _, one_process = reference_run(spec)
    for reference in (plain_state, one_process):
        for name, ref in reference.items():
            torch.testing.assert_close(state[name], ref, rtol=0, atol=tolerance, msg=name)
    assert summary["comm_bytes_per_step"] / plain["comm_bytes_per_step"] == pytest.approx(0.5)


def test_powersgd_is_plain_until_it_starts_then_low_rank(plain_ddp, tmp_path):
    """PowerSGD (Vogels et al. 2019) is lossy, so it is checked against what it must equal:
    plain DDP before it starts and at a rank that compresses nothing; in between, its error
    shrinks as the rank grows and stays a few % of what training changed."""
    spec, plain, plain_state = plain_ddp
    change = largest_change(spec, plain_state)
    error, ratio, losses = {}, {}, {}
    for rank in (1, 4, 64):
        summary, state = hooked(plain_ddp, tmp_path, comm_hook="powersgd", powersgd_rank=rank)
        losses[rank] = summary["losses"]
        # start_powerSGD_iter=2: steps 0 and 1 all-reduce plainly, so the losses up to step 2
        # (the first after those two updates) are plain DDP's
        torch.testing.assert_close(torch.tensor(summary["losses"][:3]),
                                   torch.tensor(plain["losses"][:3]), rtol=1e-5, atol=1e-6)
        error[rank] = max((state[k] - plain_state[k]).abs().max().item() for k in plain_state)
        ratio[rank] = summary["comm_bytes_per_step"] / plain["comm_bytes_per_step"]
    # rank 64: PowerSGD sends a matrix as it is unless n·m >= 2·(n+m)·r, and no matrix of the
    # tiny GPT (96 x 384 at most) is: plain all-reduce, equal to plain DDP to rounding
    assert ratio[64] == 1 and error[64] < 1e-6
    # ranks 1 and 4 send P (n x r) and Q (m x r) per matrix: fewer bytes for a lower rank, and
    # an error above a 16-bit rounding's (the approximation really happens) that the larger
    # rank makes smaller. Error feedback sends what a step left out with the next one, so it
    # does not pile up: measured 2.5 % (rank 1) and 1.3 % (rank 4) of the weights' change (0.23),
    # a gradient off by 2x 99 %; we allow 10 %.
    assert ratio[1] < ratio[4] < 0.5
    assert 2 * 2.0**-8 * change < error[4] < error[1] < 0.1 * change
    assert losses[1][-1] < losses[1][0]   # rank 1 trains: the loss falls


def test_powersgd_bytes_are_what_its_hook_all_reduces(plain_ddp, tmp_path):
    """The meter's bytes for a PowerSGD step are torch's: P and Q of each matrix its rule
    compresses, every other tensor whole (powersgd_bytes; the rule checked against torch's
    _should_compress), and plain DDP's bytes before start_powerSGD_iter."""
    from torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import _should_compress
    from gpututor.parallel.data_parallel.ddp import POWERSGD_START_ITER, powersgd_bytes
    for n, m, r in [(96, 384, 1), (8, 8, 2), (8, 8, 1), (4, 12, 1), (3, 3, 1), (64, 1, 4)]:
        grad = torch.zeros(n, m)
        rank = min(n, m, r)
        compress = _should_compress(n, m, rank, 2.0)[0]
        assert powersgd_bytes(grad, r) == ((n + m) * rank * 4 if compress else n * m * 4)
    assert powersgd_bytes(torch.zeros(7, dtype=torch.bfloat16), 1) == 14
    spec, plain, _ = plain_ddp
    run = launch(spec.replace(options=(("comm_hook", "powersgd"), ("powersgd_rank", 1))))
    run.wait()
    model = build_model(spec)
    compressed = sum(powersgd_bytes(p.detach(), 1) for p in model.parameters())
    whole = sum(p.nbytes for p in model.parameters())
    by_step = {r["step"]: r["comm_bytes"] for r in run.records if r["rank"] == 0}
    assert [by_step[s] for s in range(POWERSGD_START_ITER)] == [whole] * POWERSGD_START_ITER
    assert all(by_step[s] == compressed for s in range(POWERSGD_START_ITER, spec.steps))
    assert compressed < whole / 2


def test_equivalent_link_keeps_flops_per_byte_and_flops_per_message():
    from gpututor.parallel.link import EmulatedLink, equivalent_bandwidth, equivalent_latency
    device, here = 100e12, 50e9              # a device 2000x faster than this machine
    bandwidth = equivalent_bandwidth(device, 32e9, here)
    latency = equivalent_latency(device, 10e-6, here)
    assert bandwidth == pytest.approx(16e6) and latency == pytest.approx(20e-3)
    real, emulated = EmulatedLink(32e9, 10e-6), EmulatedLink(bandwidth, latency)
    for nbytes in (4, 4e6, 4e9):      # latency-bound to bandwidth-bound: every message x2000
        assert emulated.allreduce_seconds(nbytes, 4) == pytest.approx(
            2000 * real.allreduce_seconds(nbytes, 4))


def test_the_lessons_one_scaling_rule_stretches_a_catalogue_link_in_both_parts():
    """scaled_link: the catalogue's bandwidth and latency (one home), both scaled by the
    reference's achieved FLOP/s over this machine's; every message, small or large, costs the
    same multiple of its real time; a RunSpec carries it as options; a bad rate is refused."""
    from gpututor import RunSpec
    from gpututor.catalog import get_link
    from gpututor.parallel.link import EmulatedLink, reference_flops, scaled_link
    here = 5e9
    ratio = reference_flops() / here
    assert reference_flops() == pytest.approx(0.4 * 312e12)   # A100 bf16 datasheet, 40 %
    real = get_link("pcie4")
    emulated = scaled_link("pcie4", here)
    assert emulated.bandwidth == pytest.approx(real.bandwidth / ratio)
    assert emulated.latency == pytest.approx(real.latency * ratio)
    for nbytes in (4, 4e6, 4e9):
        assert emulated.allreduce_seconds(nbytes, 2) == pytest.approx(
            ratio * EmulatedLink(real.bandwidth, real.latency).allreduce_seconds(nbytes, 2))
        assert emulated.send_seconds(nbytes) == pytest.approx(
            ratio * (real.latency + nbytes / real.bandwidth))
    spec = RunSpec(strategy="ddp", world_size=2, options=emulated.options())
    carried = EmulatedLink.from_spec(spec)
    assert carried.bandwidth == pytest.approx(emulated.bandwidth)
    assert carried.latency == pytest.approx(emulated.latency)
    for bad in (None, 0, -1.0):
        with pytest.raises(ValueError, match=rf"here_flops={bad!r} is invalid: allowed is"):
            scaled_link("pcie4", bad)


def test_the_emulated_delay_starts_when_the_cuda_all_reduce_is_done(monkeypatch):
    """NCCL returns (and completes its futures) when the all-reduce is queued: the link waits
    for the device's work before sleeping, in the blocking form (the current stream) and in
    then_delay (on the link's thread); on CPU it does not touch CUDA."""
    from gpututor.measure.timing import CommMeter
    from gpututor.parallel import link as link_module
    events = []

    class Stream:
        def synchronize(self):
            events.append("synchronize")

    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())
    monkeypatch.setattr(link_module.time, "sleep", lambda s: events.append("sleep"))
    link, meter = link_module.EmulatedLink(1e9, 1e-5), CommMeter()
    link.delay_allreduce(4096, 2, meter, torch.device("cuda", 0))
    assert events == ["synchronize", "sleep"]
    events.clear()
    link.delay_allreduce(4096, 2, meter, torch.device("cpu"))
    assert events == ["sleep"]
    events.clear()
    # then_delay: the link's own thread waits for the collective's work on its own stream
    # (``_link_stream``, which needs a GPU: stood in for here), then sleeps
    import contextlib
    import threading

    @contextlib.contextmanager
    def link_stream(fut, device):
        events.append(("work done", str(device), threading.current_thread().name))
        yield

    monkeypatch.setattr(link_module, "_link_stream", link_stream)
    monkeypatch.setattr(link_module, "_device_future", lambda device: torch.futures.Future())
    future = torch.futures.Future()
    delayed = link.then_delay(future, 4096, 2, meter, "cuda:1")
    future.set_result(torch.ones(1))
    delayed.wait()
    assert events == [("work done", "cuda:1", "gpututor-emulated-link"), "sleep"]
    assert meter.emulated_s == pytest.approx(3 * link.allreduce_seconds(4096, 2))


@pytest.mark.parametrize("strategy", ["ddp", "dp-naive", "dp-bucketed"])
def test_emulated_link_adds_exactly_the_modelled_delay(strategy):
    from gpututor.parallel.link import EmulatedLink
    base = tiny_spec(strategy=strategy, world_size=2, steps=4, **SGD)   # SGD: see the top
    fast = launch(base).wait()
    # 2 MB/s: slow on purpose, so the added delay (tenths of a second per step) stands well above
    # a shared machine's step-time noise (at 10 MB/s it was ~40 ms, and flaked under load)
    options = (("link_gbps", 0.002), ("link_latency_us", 100.0))
    slow_run = launch(base.replace(options=options))
    slow = slow_run.wait()
    torch.testing.assert_close(torch.tensor(slow["losses"]), torch.tensor(fast["losses"]))
    link = EmulatedLink(0.002e9, 100e-6)
    record = slow_run.records[-1]
    # every bucket / tensor all-reduced this step got its modelled delay, and nothing more
    assert record["emulated_comm_s"] >= link.allreduce_seconds(record["comm_bytes"], 2)
    assert record["emulated_comm_s"] <= link.allreduce_seconds(record["comm_bytes"], 2) + \
        2 * link.latency * 200
    assert slow["step_time_s"] > fast["step_time_s"] + 0.5 * link.allreduce_seconds(
        record["comm_bytes"], 2)


@pytest.fixture
def one_rank_group(tmp_path):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_the_from_scratch_syncs_time_the_transfer_not_its_launch(one_rank_group, monkeypatch):
    """On a GPU NCCL returns when the all-reduce is queued and ``Future.wait()`` does not block:
    dp-naive synchronises around each blocking all-reduce, and dp-bucketed times its buckets on
    the device's timeline, from the launch mark to a mark made when the bucket completes."""
    import torch.distributed as dist
    from gpututor.measure.timing import CommMeter
    from gpututor.parallel.data_parallel import buckets as bucketed, scratch
    events = []
    monkeypatch.setattr(scratch, "synchronize", lambda device: events.append("synchronize"))
    real_all_reduce = dist.all_reduce
    monkeypatch.setattr(scratch.dist, "all_reduce", lambda *a, **k: events.append("all_reduce")
                        or real_all_reduce(*a, **k))
    model = torch.nn.Linear(3, 2)
    model(torch.ones(4, 3)).sum().backward()
    scratch.allreduce_gradients(model, CommMeter())
    assert events == ["synchronize", "all_reduce", "synchronize"] * 2      # weight, bias

    class Mark:      # a device clock that ticks once per mark
        made = []

        def __init__(self, device):
            self.t = len(Mark.made)
            Mark.made.append(self)
            self.device = device

        def seconds_since(self, earlier):
            return float(self.t - earlier.t)

    monkeypatch.setattr(bucketed, "DeviceMark", Mark)
    meter = CommMeter()
    buckets = bucketed.DataParallel(torch.nn.Linear(3, 2), 1.0, meter=meter,
                                    sync_when_backward_ends=False)
    buckets(torch.ones(4, 3)).sum().backward()     # one bucket: launch mark 0, done mark 1
    buckets.in_flight[0][0].wait()    # gloo runs `then` on its own thread: let mark 1 be made
    buckets.finish_gradient_sync()                 # wait marks 2 and 3
    assert len(Mark.made) == 4
    assert meter.busy_s == 1.0 and meter.exposed_s == 1.0


def test_ddp_records_its_buckets_one_on_the_first_step_then_1_mib_first():
    """DDP's buckets as torch 2.13 makes them with bucket_cap_mb unset: one bucket of every
    gradient on the first iteration, then rebuilt in ready order with a first bucket of at least
    1 MiB (_DEFAULT_FIRST_BUCKET_BYTES) and the rest in 25 MiB ones; for the small GPT
    1,056,768 + 2,296,832 bytes. The first is launched before backward's last gradient; the
    last, which holds that gradient, is not (no overlap). default_bucket_bytes predicts them."""
    from gpututor import RunSpec
    from gpututor.lessons.data_parallel.buckets import bucket_steps, late_share
    from gpututor.parallel.data_parallel.ddp import default_bucket_bytes
    spec = RunSpec(model="gpt", model_size="small", strategy="ddp", world_size=2, steps=3,
                   batch_size=4, seq_len=32, device="cpu", **SGD)
    run = launch(spec)
    summary = run.wait()
    steps = bucket_steps(run.records)
    total = summary["params"] * 4
    assert [b["bytes"] for b in steps[0]] == [total]
    for step in (1, 2):
        sizes = [b["bytes"] for b in steps[step]]
        assert sizes == default_bucket_bytes(build_model(spec)) == [1_056_768, 2_296_832]
        assert steps[step][-1]["before_last_grad_s"] == 0.0
        assert late_share(steps[step]) == pytest.approx(2_296_832 / total)
    # with bucket_cap_mb set, every bucket is capped at it, the first included
    capped = launch(spec.replace(options=(("bucket_cap_mb", 25),)))
    capped.wait()
    assert [len(b) for b in bucket_steps(capped.records).values()] == [1, 1, 1]


def test_powersgd_with_several_buckets_on_a_slow_link_ends():
    """PowerSGD chains three all-reduces per bucket through callbacks; on gloo two buckets'
    chains could start their collectives in a different order on each rank (a hang until the
    timeout). The hook starts each bucket's chain after the last one: several buckets, a delay
    in every callback, and the run ends with the bytes PowerSGD sends."""
    spec = tiny_spec(strategy="ddp", world_size=2, steps=4, timeout=60,
                     options=(("comm_hook", "powersgd"), ("bucket_cap_mb", 0.25),
                              ("link_gbps", 0.05), ("link_latency_us", 2000.0)), **SGD)
    run = launch(spec)
    summary = run.wait()
    assert max(len(r.get("ddp_buckets") or []) for r in run.records) >= 3
    assert summary["comm_bytes_per_step"] < summary["params"] * 4
