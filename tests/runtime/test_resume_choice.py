"""Issue 44: the ranks of a restarted torchrun job resume from one checkpoint, rank 0's, even
where their own reading of the checkpoint folder differs (another node's clock or file
attributes); checked in two real gloo ranks."""
from gpututor import RunSpec, launch
from gpututor.runtime.resume_choice import rank_zeros_attempt


def choose_differently(spec, rank, world, device, emit):
    # what each rank found for itself: rank 1 saw an older checkpoint and no failure
    own = spec.replace(resume=f"/ckpt/step-{8 if rank == 0 else 4}",
                       inject_fault=None if rank == 0 else "1:3")
    failures = [{"attempt": 1, "rank": None, "step": None, "error": None,
                 "resumed_from": 9}] if rank == 0 else []
    agreed, failures, attempt = rank_zeros_attempt(own, failures, 2 if rank == 0 else 1)
    emit({"step": 0, "rank": rank, "resume": agreed.resume, "fault": agreed.inject_fault,
          "failures": len(failures), "chosen_attempt": attempt})


def test_every_rank_resumes_from_rank_zeros_choice():
    records = launch(RunSpec(world_size=2, device="cpu", timeout=20),
                     task=choose_differently).wait(timeout=60)
    chosen = {(r["resume"], r["fault"], r["failures"], r["chosen_attempt"]) for r in records}
    assert chosen == {("/ckpt/step-8", None, 1, 2)}, records
