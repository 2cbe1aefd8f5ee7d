"""The planner: what fits in memory, how long training takes, what it costs, and why.

- ``catalog``: GPUs and links with their datasheet numbers and sources; add your own.
- ``memory``: per-device bytes (ZeRO paper's model states, Korthikanti et al.'s activations),
  and the tiny GPT as built, held as each strategy holds it.
- ``time``: FLOPs over peak x MFU, ring collectives, pipeline bubble, total time and cost.
- ``recommend``: one configuration's estimate with reasons, or a ranking of many.
- ``calibrate``: this machine measured, the lessons' runs predicted and then run.

``python -m gpututor plan`` is the command line (``command.py``); ``gpututor.plan_widget`` the
notebook widget.
"""
from .catalog import GPUS, LINKS, add_gpu, add_link, get_gpu, get_link, set_price
from .memory import (PRESETS, Transformer, activation_bytes_per_layer, bytes_per_param,
                     model_state_bytes, per_device_memory, tiny_gpt_memory,
                     transformer_for_params)
from .recommend import Config, Estimate, Recommendation, estimate, recommend
from .time import bubble_fraction, ring_allreduce_seconds, step_time, training_flops

__all__ = ["GPUS", "LINKS", "add_gpu", "add_link", "get_gpu", "get_link", "set_price",
           "PRESETS", "Transformer", "activation_bytes_per_layer", "bytes_per_param",
           "model_state_bytes", "per_device_memory", "tiny_gpt_memory",
           "transformer_for_params", "Config", "Estimate", "Recommendation", "estimate",
           "recommend", "bubble_fraction", "ring_allreduce_seconds", "step_time",
           "training_flops"]
