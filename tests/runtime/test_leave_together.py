"""A rank that finishes first waits for its peers before closing its connections: a rank whose
task needs no collective could otherwise close while a peer still talks to the group (in the
row-parallel checker's test, a peer still inside gloo's rendezvous failed with "connectFullMesh
failed ... Connection closed by peer"). (That race is not reproducible on
demand; these tests check the wait itself, and that ranks finishing a second apart end well.)"""
import time

import torch.distributed as dist

from gpututor import RunSpec, launch


def first_rank_leaves_at_once(spec, rank, world, device, emit):
    emit({"step": 0, "rank": rank})
    if rank == 0:
        return                      # nothing to do: returns while rank 1 still needs it
    time.sleep(1.0)
    emit({"step": 1, "rank": rank})


def test_ranks_that_finish_a_second_apart_both_end_well():
    records = launch(RunSpec(world_size=2, device="cpu", timeout=20),
                     task=first_rank_leaves_at_once).wait(timeout=60)
    assert sorted((r["rank"], r["step"]) for r in records) == [(0, 0), (1, 0), (1, 1)]


def test_leave_together_waits_for_the_last_rank(tmp_path):
    import threading
    from gpututor.runtime.joining import leave_together
    store = dist.FileStore(str(tmp_path / "store"), 2)
    left = []
    first = threading.Thread(target=lambda: (leave_together(store, 0, 2, 10), left.append(0)))
    first.start()
    time.sleep(0.3)
    assert left == []               # rank 0 waits while rank 1 works
    leave_together(dist.FileStore(str(tmp_path / "store"), 2), 1, 2, 10)
    first.join(5)
    assert left == [0]
