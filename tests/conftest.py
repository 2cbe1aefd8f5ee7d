import atexit
import json
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import shutil
import signal
import tempfile
import time

import psutil
import pytest
import torch
import torch.nn.functional as F

from gpututor import RunSpec, batches, build_model
from gpututor.moe import auxiliary_loss
from gpututor.parallel import check_spec
from gpututor.runtime.guard import check_machine

# pytest-xdist (`make test` runs two workers): each worker, and the ranks and kernels it starts,
# gets a temporary folder of its own, so a test that checks what it left in the temporary folder
# never counts another worker's files.
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Inductor's compile cache stays where torch keeps it by default (the machine's temporary
    # folder, shared, as in a one-process run): lesson 01c and the compile tests compile the same
    # graphs, and a worker of its own would compile them again (about 30 s on 2 cores). A cache hit
    # changes no result those tests check (run_and_get_code still returns the kernels).
    import getpass
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(
        tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}"))
    _WORKER_TMP = tempfile.mkdtemp(prefix=f"pytest-{os.environ['PYTEST_XDIST_WORKER']}-")
    os.environ["TMPDIR"] = _WORKER_TMP
    tempfile.tempdir = None            # gettempdir() reads TMPDIR again
    atexit.register(shutil.rmtree, _WORKER_TMP, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """The slow tests (whole notebooks, browser sessions: a minute or more each) first, so that
    with two workers they start early and the short tests fill in around them; otherwise in
    collection order."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


# Equivalence tests train with plain SGD (momentum, no normalisation) at a large learning rate: a
# step moves every weight by lr x its gradient, so a gradient off by a factor (a missing
# /world_size or /grad_accum) moves the weights by that factor, far outside the comparison's
# tolerance. AdamW would hide it: it divides by sqrt(v), so twice the gradient takes the same
# steps (measured on the tiny GPT, 4 steps: losses within 6e-7 relative, all but 174 of 267k
# weights within 5e-5). tests/parallel/test_data_parallel.py shows the comparison failing for
# such a run.
SGD = dict(optimizer="sgd", lr=0.1)


def tiny_spec(**changes) -> RunSpec:
    """A run small enough for tests: tiny GPT, small batch, few steps, 2 ranks."""
    base = dict(model="gpt", model_size="tiny", strategy="ddp", world_size=2,
                batch_size=8, seq_len=32, steps=4, timeout=20.0)
    base.update(changes)
    spec = check_spec(RunSpec(**base))   # the strategy's checks too, as launch() runs them,
    check_machine(spec)                  # and what this machine can do
    return spec


# What the one-process loop below does not read: the layout the run under test used, where it
# saves, how long a rank waits. Runs that differ only in these (a test's layouts and schedules
# against the same batches) have the same reference, computed once per process.
_NOT_IN_REFERENCE = {"strategy", "world_size", "mesh", "options", "save_state", "timeout"}
_references: dict[str, tuple] = {}


def reference_run(spec):
    """The plain one-process loop: build_model + batches + AdamW (or SGD with momentum, as
    ``spec.optimizer`` says), nothing else (a MoE's loss includes its auxiliary loss). Its
    values depend only on the spec's other fields and torch's thread count: a second call with
    those equal returns copies of the first's (the loop is deterministic on CPU)."""
    import dataclasses
    key = repr(([(f.name, getattr(spec, f.name)) for f in dataclasses.fields(spec)
                 if f.name not in _NOT_IN_REFERENCE], torch.get_num_threads()))
    if key not in _references:
        _references[key] = _reference_run(spec)
    losses, state = _references[key]
    return list(losses), {name: value.clone() for name, value in state.items()}


def _reference_run(spec):
    model = build_model(spec)
    if spec.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=0.9)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    losses = []
    for inputs, targets in batches(spec):
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        loss = loss + auxiliary_loss(model)   # a MoE's load-balancing term; 0 for the others
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, model.state_dict()


def assert_equals_one_process(spec, summary: dict, weights_atol: float = 1e-6) -> None:
    """The run of ``spec`` (its ``summary``, its weights saved at ``spec.save_state``) against
    :func:`reference_run`: losses to float rounding, every weight within ``weights_atol``."""
    ref_losses, ref_state = reference_run(spec)
    torch.testing.assert_close(torch.tensor(summary["losses"]), torch.tensor(ref_losses),
                               rtol=1e-5, atol=1e-6)
    state = torch.load(spec.save_state)
    assert set(state) == set(ref_state)
    for name, ref in ref_state.items():
        torch.testing.assert_close(state[name], ref, rtol=1e-5, atol=weights_atol, msg=name)


def helper_pids() -> set[int]:
    """Long-lived helpers of multiprocessing that are not ranks (forkserver, resource tracker)."""
    pids = {getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None),
            getattr(multiprocessing.resource_tracker._resource_tracker, "_pid", None)}
    return {p for p in pids if p}


def rank_processes() -> list[psutil.Process]:
    """Descendants of this test process that are not multiprocessing's own helpers."""
    helpers = helper_pids()
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.pid not in helpers and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.NoSuchProcess:
            pass
    return found


def wait_no_ranks(seconds: float = 30.0) -> list[psutil.Process]:
    """The rank processes still alive after polling up to ``seconds`` for none to be left. It
    returns as soon as none is: the default is a ceiling for a busy machine (reaping a killed
    rank there took several seconds), not a speed the launcher promises."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = rank_processes()
        if not left:
            return []
        time.sleep(0.05)
    return rank_processes()


@pytest.fixture
def interruptible():
    """SIGINT raises KeyboardInterrupt in this test, as in a kernel or a terminal: a process
    started in the background by a non-interactive shell (`nohup ... &`) begins with SIGINT
    ignored, and Python then never raises it. The handler before is restored afterwards."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


# torch's intra-op thread count is process-wide: a test that changes it changes every later
# test's timings and results. Tests that need one thread ask for `one_thread`; the checks below
# fail a test, a module or a test file's import that leaves the count changed.
THREADS_AT_START = torch.get_num_threads()


@pytest.fixture
def one_thread():
    """torch runs on one thread in this test; the count before is restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _threads_left(before: int, what: str) -> None:
    after = torch.get_num_threads()
    assert after == before, (f"{what} left torch on {after} thread(s); it started on {before}: "
                             "use the one_thread fixture, or restore torch.get_num_threads()")


@pytest.fixture(autouse=True)
def threads_restored_by_test():
    before = torch.get_num_threads()
    yield
    _threads_left(before, "this test")


@pytest.fixture(scope="module", autouse=True)
def threads_restored_by_module():
    before = torch.get_num_threads()
    yield
    _threads_left(before, "this module's fixtures")


def pytest_collection_finish(session):
    if torch.get_num_threads() != THREADS_AT_START:
        raise pytest.UsageError(
            f"importing the test files left torch on {torch.get_num_threads()} thread(s) "
            f"(it started on {THREADS_AT_START}): set threads inside a test or fixture")


@pytest.fixture
def spec_factory():
    return tiny_spec


@pytest.fixture(autouse=True)
def no_rank_left_behind():
    yield
    left = wait_no_ranks(5.0)
    assert not left, f"processes left behind: {[(p.pid, p.cmdline()) for p in left]}"


os.environ.setdefault("PYTHONUNBUFFERED", "1")



def spawn_gloo_ranks(body, world: int, folder) -> list:
    """Start ``world`` gloo ranks (spawned) that each run ``body(rank, world)`` in a process
    group on a file rendezvous in ``folder``; return what each rank returned, read back as JSON
    from a file per rank (a pipe would fill while this process waits for the ranks to exit).
    ``body`` must be a module-level function (spawn imports it again). Each rank runs torch on
    one thread, as the launcher's ranks do: the models here are far below torch's intra-op grain
    size, so no result changes, and 2 or 3 ranks of 2 threads each on 2 cores spent most of
    their time waiting for a core between the collectives (test_any_module's 3 ranks: 21.6 s of
    training on 2 threads, 9.4 s on 1)."""
    import torch.multiprocessing as mp
    mp.start_processes(_gloo_rank, args=(body, world, str(folder)), nprocs=world,
                       start_method="spawn")
    return [json.loads(open(os.path.join(folder, f"rank{r}.json")).read()) for r in range(world)]


def _gloo_rank(rank: int, body, world: int, folder: str) -> None:
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank,
                            world_size=world)
    try:
        out = body(rank, world)
    finally:
        dist.destroy_process_group()
    with open(os.path.join(folder, f"rank{rank}.json"), "w") as f:
        json.dump(out, f)


# The test files whose rank bodies share one spawned group per world size (each file's
# ``_rank(rank, world)``, run one after the other in the same ranks). A spawned group costs
# seconds before its first case (starting and importing, then torch's first collective and
# optimizer step); these files had one group per file and world size.
SHARED_GLOO_FILES = ("test_foreign_models", "test_any_module", "test_registry_any_module",
                     "test_local_sgd", "test_exchange")
_shared_gloo: dict[int, list] = {}


def _every_shared_body(rank: int, world: int) -> dict:
    import importlib
    import traceback
    out = {}
    for name in SHARED_GLOO_FILES:
        try:
            out[name] = importlib.import_module(name)._rank(rank, world)
        except Exception:  # noqa: BLE001 - the file's tests report it; the other files go on
            out[name] = {"__error__": traceback.format_exc()}
    return out


def shared_gloo_ranks(name: str, world: int, tmp_path_factory) -> list:
    """What ``name``'s ``_rank`` returned on each of ``world`` gloo ranks, from one group per
    world size that runs every file of SHARED_GLOO_FILES. The group runs once per session: with
    pytest-xdist (worksteal) a file's tests are split between the workers and a module-scoped
    fixture ran again on each, so the results go in a file in the session's temporary folder
    (shared by the workers) under a lock, and a second worker reads them."""
    import fcntl
    if world not in _shared_gloo:
        root = tmp_path_factory.getbasetemp()
        if os.environ.get("PYTEST_XDIST_WORKER"):
            root = root.parent
        done = root / f"shared-gloo-{world}.json"
        with open(root / f"shared-gloo-{world}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                results = spawn_gloo_ranks(_every_shared_body, world,
                                           tmp_path_factory.mktemp(f"ranks{world}"))
                done.with_suffix(".part").write_text(json.dumps(results))
                done.with_suffix(".part").rename(done)
            _shared_gloo[world] = json.loads(done.read_text())
    results = [ranks[name] for ranks in _shared_gloo[world]]
    for rank, got in enumerate(results):
        if isinstance(got, dict) and "__error__" in got:
            pytest.fail(f"{name}._rank raised on rank {rank}:\n{got['__error__']}")
    return results
