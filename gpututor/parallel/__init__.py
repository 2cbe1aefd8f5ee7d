"""Ways of training across ranks. Each strategy is one module; register it here."""
from .base import Strategy
from .data_parallel import BucketedDataParallel, NaiveDataParallel
from .ddp import DataParallelDDP
from .single import Single

STRATEGIES: dict[str, Strategy] = {
    s.name: s for s in (Single(), NaiveDataParallel(), BucketedDataParallel(), DataParallelDDP())
}


def get_strategy(name: str) -> Strategy:
    return STRATEGIES[name]


__all__ = ["STRATEGIES", "Strategy", "get_strategy"]
