"""``%%ranks`` on GPUs: lesson cells all-reduce CPU tensors, and NCCL has no CPU backend, so the
ranks' group carries gloo for CPU tensors beside NCCL. NCCL cannot run here; gloo stands in for
it under the ``cuda`` key, which is enough to show the failure (an NCCL-shaped group has no CPU
backend) and the fix (a group shaped like ``backend_for``'s has one), and that the
``--no-collectives`` guard works on either."""
import os
import subprocess
import sys
import textwrap

import torch

from gpututor.runtime.joining import backend_for

SCRIPT = textwrap.dedent('''
    import os, sys, tempfile, torch, torch.distributed as dist
    from gpututor.runtime.refuse import OnlyPointToPoint
    dist.init_process_group(sys.argv[1], rank=0, world_size=1,
                            store=dist.FileStore(os.path.join(tempfile.mkdtemp(), "s"), 1))
    try:
        t = torch.ones(3)
        dist.all_reduce(t)                       # what lesson 02's %%ranks cells do
        print("all_reduce ok")
    except RuntimeError as exc:
        print("all_reduce failed:", exc)
    with OnlyPointToPoint() as guard:             # %%ranks --no-collectives
        try:
            dist.all_reduce(torch.ones(1))
        except RuntimeError as exc:
            print("guard refused:", "not allowed here" in str(exc))
''')


def run(backend: str) -> str:
    out = subprocess.run([sys.executable, "-c", SCRIPT, backend], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "MASTER_ADDR": "127.0.0.1"})
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_ranks_on_gpus_get_gloo_for_cpu_tensors_beside_nccl():
    assert backend_for(torch.device("cuda", 1), cpu_tensors=True) == "cpu:gloo,cuda:nccl"
    assert backend_for(torch.device("cuda", 0)) == "nccl"           # launch()'s training ranks
    assert backend_for(torch.device("cpu"), cpu_tensors=True) == "gloo"


def test_a_group_without_a_cpu_backend_fails_cpu_collectives_and_the_mixed_one_does_not():
    nccl_shaped = run("cuda:gloo")                 # like "nccl": nothing for CPU tensors
    assert "all_reduce failed: No backend type associated with device type cpu" in nccl_shaped
    assert "guard refused: True" in nccl_shaped    # the guard no longer trips on the lookup
    mixed = run(backend_for(torch.device("cuda", 0), cpu_tensors=True).replace("nccl", "gloo"))
    assert "all_reduce ok" in mixed and "guard refused: True" in mixed
