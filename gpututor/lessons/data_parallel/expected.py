"""What the planner expects of lesson 02's data-parallel run on GPUs of the catalogue: the same
model and global batch on one GPU and on ``world`` GPUs joined by a link, each step's time from
``gpututor.plan.recommend.estimate`` (compute at the planner's share of peak, the ring
all-reduce hidden behind backward as far as it fits). Nothing here is measured: it is the
formula the lesson's measured CPU speedup is drawn beside (issue 47, "CPU beside GPU")."""
from __future__ import annotations

from ...plan.layouts import transformer_of
from ...plan.recommend import DEFAULT_COMM_EFFICIENCY, DEFAULT_HFU, Config, estimate

GPU, LINK = "H100-80GB", "nvlink4"   # a named GPU and its link, from gpututor.catalog
LINK_NAMES = {"nvlink4": "NVLink 4", "nvlink3": "NVLink 3", "pcie4": "PCIe 4.0",
              "pcie5": "PCIe 5.0"}


def planner_speedup(spec, gpu: str = GPU, link: str = LINK, world: int = 2) -> dict:
    """The planner's speedup of data parallel on ``world`` GPUs ``gpu`` joined by ``link`` over
    one of them, for ``spec``'s model, global batch and precision (each GPU computes its share
    of the batch in one pass): ``speedup``, ``step_one_s`` and ``step_many_s``, the all-reduce's
    ``comm_s`` and what of it backward did not hide (``exposed_s``), and the assumptions."""
    model = transformer_of(spec)
    tokens = spec.batch_size * spec.seq_len

    def step(count: int) -> dict:
        config = Config(gpu=gpu, count=count, link=link, micro_batch=spec.batch_size // count)
        return estimate(model, tokens, config, precision=spec.precision,
                        tokens_per_step=tokens).step

    one, many = step(1), step(world)
    return {"gpu": gpu, "link": link, "link_name": LINK_NAMES.get(link, link), "world_size": world,
            "speedup": one["step_s"] / many["step_s"], "step_one_s": one["step_s"],
            "step_many_s": many["step_s"], "comm_s": many["dp_comm_s"],
            "exposed_s": many["dp_exposed_s"], "hfu": DEFAULT_HFU,
            "comm_efficiency": DEFAULT_COMM_EFFICIENCY, "precision": spec.precision}
