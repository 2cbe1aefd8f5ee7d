"""``RunSpec(precision="fp8")``: FP8 training with torchao's production API.

Every ``nn.Linear`` but the output layer (``head``: its logits feed the softmax over the whole
vocabulary) becomes torchao's ``Float8Linear`` (``convert_to_float8_training``) with its default
recipe, tensorwise dynamic scaling: E4M3 for inputs and weights, E5M2 for the output's gradient,
as ``fp8_linear``'s from-scratch ``tensorwise`` recipe. Everything else computes in float32 (no
autocast), the weights and the optimizer included: the run isolates what FP8 matmuls do.

Where it runs: on a CPU it is emulated (``Float8LinearConfig(emulate=True)``: the casts exact,
the matmuls in float32 on the cast values: FP8's numbers, not its speed); on a CUDA GPU it needs
FP8 tensor cores (compute capability 8.9, Ada, or newer; the A100, V100 and T4 have none) and
is refused before the run starts on one without; it needs torchao (``gpututor[compress]``).
Strategies that take it: ``single``; the data-parallel ones, ``ddp``, ``dp-naive``,
``dp-bucketed``, ``local-sgd`` and ``diloco`` (torchao converts the modules; their float32
gradients or weights are averaged as any others); ZeRO from scratch, ``zero1``-``zero3`` (its
flat vectors hold the converted Linears' float32 weights, gathered in float32); and ``fsdp``
(FSDP2 gathers the converted weights in FP8,
1 byte each, cast before the gather: torchao's ``enable_fsdp_float8_all_gather``; the run then
builds the whole model before sharding it, as torchao converts real modules). Each rank scales by its own batch's amax, so an FP8
data-parallel run is not bit for bit one process's FP8 run, as a fp32 one is.
"""
from __future__ import annotations

from ..checks import InvalidValue
from ..config import FP8_KEPT, PRECISIONS
from ..optional import quiet_import

FP8_CAPABILITY = (8, 9)   # Ada (8.9) and Hopper (9.0) have FP8 tensor cores; Ampere (8.0) none
OTHERS = ", ".join(map(repr, PRECISIONS[:-1])) + f" or {PRECISIONS[-1]!r}"   # the others


def torchao_float8():
    """torchao's ``(Float8LinearConfig, convert_to_float8_training)``, or ``InvalidValue`` for
    ``precision="fp8"`` saying how to install it."""
    try:
        with quiet_import():   # torchao logs, on import, the GPU-only extensions it cannot load
            from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    except Exception as exc:  # noqa: BLE001 - missing, or built for another torch
        raise InvalidValue("precision", "fp8", OTHERS,
                           "here: torchao's Float8 training does not load "
                           f"({type(exc).__name__}); pip install \"gpututor[compress]\"") from None
    return Float8LinearConfig, convert_to_float8_training


def check_fp8(device: str, gpu: int | None = None) -> None:
    """Before a run starts: torchao loads, and a CUDA GPU ``gpu`` has FP8 tensor cores."""
    torchao_float8()
    if device == "cuda" and gpu is not None:
        import torch
        major, minor = torch.cuda.get_device_capability(gpu)
        if (major, minor) < FP8_CAPABILITY:
            name = torch.cuda.get_device_name(gpu)
            raise InvalidValue("precision", "fp8", OTHERS + " on this GPU",
                               f"on {name} (compute capability {major}.{minor}): FP8 tensor "
                               "cores need 8.9 (Ada) or newer")


def to_fp8_training(model, emulate: bool, kept=FP8_KEPT, all_gather: bool = False) -> list[str]:
    """Convert ``model``'s Linears but ``kept`` to torchao's ``Float8Linear`` in place (tensorwise
    scaling; ``emulate``: FP8 numerics in float32, for a CPU; ``all_gather``: FSDP2 gathers
    their weights already cast, 1 byte each, ``enable_fsdp_float8_all_gather``); the names
    converted."""
    config_class, convert = torchao_float8()
    convert(model, config=config_class(emulate=emulate, enable_fsdp_float8_all_gather=all_gather),
            module_filter_fn=lambda _module, name: name not in kept)
    return [n for n, m in model.named_modules() if type(m).__name__ == "Float8Linear"]
