"""What the ranks' forkserver preloads (runtime/warm.py PRELOAD) is what every rank imports anyway,
whatever its strategy (issue 41): each test runs in a fresh interpreter, as a rank starts."""
import subprocess
import sys

import pytest

from gpututor import RunSpec, launch


def _fresh(code: str) -> str:
    """What ``code`` prints in a new interpreter."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


HEAVY = ("torch._dynamo", "sympy", "torch._inductor", "torch.distributed.tensor",
         "torch.distributed.fsdp")


def _new_modules_in_first_step(spec, rank, world_size, device, emit):
    """A rank's setup and first step, as the worker trains them: the modules they imported."""
    from gpututor.runtime.worker import train
    before = set(sys.modules)
    train(spec, rank, world_size, device, emit=lambda record: None)
    emit({"step": 0, "new": sorted(set(sys.modules) - before)})


@pytest.mark.parametrize("strategy", ["single", "fsdp"])
def test_a_rank_forked_from_the_forkserver_imports_nothing_heavy_to_train(strategy):
    """Everything heavy a rank's first step needs was preloaded; ``fsdp`` (FSDP2, DTensor) too."""
    spec = RunSpec(model_size="tiny", strategy=strategy, world_size=1 if strategy == "single"
                   else 2, steps=1, batch_size=4, seq_len=16, device="cpu")
    records = launch(spec, task=_new_modules_in_first_step).wait(timeout=120)
    for record in records:
        heavy = [m for m in record["new"] if m.split(".")[0] == "sympy"
                 or any(m == h or m.startswith(h + ".") for h in HEAVY)]
        assert heavy == [], f"rank {record['rank']} imported {heavy[:10]}"


def test_making_an_optimizer_imports_torch_dynamo_so_every_rank_needs_it():
    """torch wraps Optimizer.add_param_group in torch._disable_dynamo, which imports dynamo on
    its first call: every strategy's rank imports it, compiling or not. When a torch release
    stops doing so, this fails: take torch._dynamo out of PRELOAD then (it costs ~1 s there)."""
    code = ("import sys, torch\n"
            "model = torch.nn.Linear(4, 4)\n"
            "before = 'torch._dynamo' in sys.modules\n"
            "torch.optim.AdamW(model.parameters())\n"
            "print(before, 'torch._dynamo' in sys.modules)")
    assert _fresh(code) == "False True"


def test_the_worker_brings_what_the_forkserver_used_to_list_one_by_one():
    """preload.py imports the worker, and with it torch.distributed, DDP and the FLOP counter,
    which PRELOAD named on their own before (the same modules are preloaded as then)."""
    code = ("import sys, gpututor.runtime.preload as p\n"
            "print(p.FAILED is None, all(m in sys.modules for m in ('torch.distributed', "
            "'torch.nn.parallel', 'torch.utils.flop_counter', 'gpututor.runtime.worker')))")
    assert _fresh(code) == "True True"
