"""Mixed precision from scratch: number formats, a dynamic loss scaler, fp32 master weights.

Three ideas, each small enough to read in one go:

- **Number formats** (:func:`format_table`, :func:`cast_table`, :func:`flush_to_zero_fraction`):
  what fp32, bf16 and fp16 can hold, found by casting real tensors, not copied from a table.
- **Dynamic loss scaling** (:class:`DynamicLossScaler`): fp16 flushes gradients below ~6e-8 to
  zero, so backward runs on ``loss × scale``. If any gradient overflowed (inf/nan) the step is
  skipped and the scale halved; after ``growth_interval`` clean steps the scale doubles.
  Micikevicius et al. 2018, *Mixed Precision Training*, §3.2 [ref: micikevicius2018-loss-scaling]
  (the halving and doubling rule is ``GradScaler``'s). The production twin is
  ``torch.amp.GradScaler``, and a test feeds both the same gradient stream.
- **Master weights** (:class:`MasterWeightsTrainer`): the optimizer updates fp32 weights; each
  step copies them into a bf16/fp16 model that does the forward and backward. The production way
  is ``torch.autocast`` (``gpututor.parallel.base.Strategy.train_step``), which keeps the weights
  in fp32 and casts per operation instead, and ``GradScaler`` for fp16.
- **8-bit optimizer state** (``adam8bit.Adam8bit``): Adam whose two moments are stored as one
  byte per number plus a scale per block (about 2 bytes per parameter instead of 8).
- **FP8** (``fp8_casts``, ``fp8_linear``): casts to E4M3 and E5M2 with a scale per tensor
  (dynamic or delayed), per row or per block of 32 (OCP MX), with counts of what overflows or
  flushes to zero, and :class:`Fp8Linear`, whose three matmuls run on FP8 operands (emulated),
  swapped into a model by :func:`convert_linears`. The production twin is torchao's
  ``convert_to_float8_training``, and a test shows both give the same numbers.
"""
from .fp8_casts import (DelayedScaler, Fp8Cast, cast_counts, fp8_format_facts, mx_block_cast,
                        rowwise_cast, tensorwise_cast)
from .fp8_linear import FP8_RECIPES, Fp8Linear, Fp8Recipe, convert_linears, fp8_cast_counts
from .formats import (DTYPES, cast_table, cpu_matrix_features, flush_to_zero_fraction,
                      format_table, model_gradients, overflow_fraction, smallest_subnormal)
from .loss_scaling import DynamicLossScaler, replay_scalers
from .master_weights import MasterWeightsRun, MasterWeightsTrainer, StepResult, train_master_weights

__all__ = ["DTYPES", "cast_table", "cpu_matrix_features", "flush_to_zero_fraction",
           "format_table", "model_gradients", "overflow_fraction", "smallest_subnormal",
           "DynamicLossScaler", "replay_scalers", "MasterWeightsRun", "MasterWeightsTrainer",
           "StepResult", "train_master_weights", "DelayedScaler", "Fp8Cast", "cast_counts",
           "fp8_format_facts", "mx_block_cast", "rowwise_cast", "tensorwise_cast", "FP8_RECIPES",
           "Fp8Linear", "Fp8Recipe", "convert_linears", "fp8_cast_counts"]
