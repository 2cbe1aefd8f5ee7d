"""Ways of training across ranks. Each strategy is one module; register it here."""
from .base import Strategy
from .data_parallel import BucketedDataParallel, NaiveDataParallel
from .ddp import DataParallelDDP
from .single import Single

STRATEGIES: dict[str, Strategy] = {
    s.name: s for s in (Single(), NaiveDataParallel(), BucketedDataParallel(), DataParallelDDP())
}

from .fsdp import FullyShardedFSDP2  # noqa: E402  (lesson 03: sharding)
from .zero import ZeROStage1, ZeROStage2, ZeROStage3  # noqa: E402
STRATEGIES.update({s.name: s for s in (ZeROStage1(), ZeROStage2(), ZeROStage3(), FullyShardedFSDP2())})
from . import pipeline, pp_torch, tensor_parallel, tp_dtensor  # noqa: E402  (lessons 04, 05)
STRATEGIES.update({s.name: s for s in (tensor_parallel.TensorParallel(), tp_dtensor.TensorParallelDTensor(), pipeline.PipelineParallel(), pp_torch.PipelineTorch())})


def get_strategy(name: str) -> Strategy:
    return STRATEGIES[name]


__all__ = ["STRATEGIES", "Strategy", "get_strategy"]
