"""Model compression: int8 quantization, pruning and distillation, each from scratch and with
PyTorch's API, and a side-by-side measurement of size, latency and loss.

- :mod:`.quantize` — per-channel symmetric int8 weights; torchao and ``torch.ao`` int8 paths
- :mod:`.prune` — magnitude (unstructured) and neuron (structured) pruning, fine-tuning
- :mod:`.distill` — the distillation loss and the student's task (launched by
  ``gpututor.lessons.compression.runs``)
- :mod:`.measure` — bytes, CPU latency, validation loss (figures: ``gpututor.lessons.compression.figures``)
"""
from . import distill, measure, prune, quantize

__all__ = ["distill", "measure", "prune", "quantize"]
