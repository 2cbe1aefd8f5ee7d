"""An FP8 linear layer from scratch: the three matmuls of a linear layer on FP8 operands.

A linear layer runs three matmuls per step, and each casts both of its operands to FP8:

- forward      ``out = x @ Wᵀ``               x and W in E4M3;
- grad_input   ``dx  = dout @ W``             dout in E5M2 (tensorwise) or E4M3, W in E4M3;
- grad_weight  ``dW  = doutᵀ @ x``            dout and x as above.

E4M3 carries weights and activations, E5M2 the gradients [ref: micikevicius2022-formats].
**Emulated**: each operand is cast to FP8 and read back (``data.float() / scale``) and the matmul
runs in float32; an H100's FP8 tensor cores take the FP8 bytes and the scales directly
(``torch._scaled_mm``), with the same numbers going in, but accumulate the sums in fewer bits
(about 14 on Hopper [ref: deepseek2024-accumulation]): the emulation is an optimistic bound on
the accumulation error. The output is cast back to the input's
dtype. Bias, the optimizer and the master weights stay in high precision.

The recipes (:data:`FP8_RECIPES`) differ in which values share a scale. The scales always run
along the dimension the matmul sums over (one per row of ``x``, one per row of ``W`` in the
forward), so each scale can be taken out of the sum and applied to the result:

- ``tensorwise``: one dynamic scale per operand; E5M2 gradients. torchao's default
  ``Float8LinearConfig()``.
- ``rowwise``: one scale per row along the summed dimension, every operand in E4M3, scales
  rounded down to a power of two: torchao's ``Float8LinearConfig.from_recipe_name("rowwise")``.
- ``mxfp8``: blocks of 32 along the summed dimension, E8M0 scales, every operand in E4M3, the
  scale's exponent rounded down (FLOOR) as in the OCP MX formats [ref: ocp2023-mx-conversion]
  (torchao's MXFP8 training rounds it up by default, RCEIL, which this module does not do).

:func:`convert_linears` swaps a model's ``nn.Linear`` layers for :class:`Fp8Linear`, keeping
those ``skip`` names in high precision (the output layer, usually: its logits feed a softmax
over the whole vocabulary, and its inputs and outputs are few compared with the blocks').
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import torch
from torch import nn

from .fp8_casts import Fp8Cast, mx_block_cast, rowwise_cast, tensorwise_cast


@dataclass(frozen=True)
class Fp8Recipe:
    """How a linear layer's operands are cast: which values share a scale, and to which format."""
    name: str
    granularity: str          # "tensor", "row" or "block"
    input_format: str         # activations
    weight_format: str
    grad_format: str          # the gradient of the output, in both backward matmuls
    power_of_2: bool = False  # round scales down to a power of two (block scales always are)


FP8_RECIPES = {
    "tensorwise": Fp8Recipe("tensorwise", "tensor", "e4m3", "e4m3", "e5m2"),
    "rowwise": Fp8Recipe("rowwise", "row", "e4m3", "e4m3", "e4m3", power_of_2=True),
    "mxfp8": Fp8Recipe("mxfp8", "block", "e4m3", "e4m3", "e4m3", power_of_2=True),
}


def fp8_recipe(recipe: str | Fp8Recipe) -> Fp8Recipe:
    """A recipe by name (one of :data:`FP8_RECIPES`), or the recipe itself."""
    if isinstance(recipe, Fp8Recipe):
        return recipe
    if recipe not in FP8_RECIPES:
        raise ValueError(f"FP8 recipe {recipe!r}: choose one of {list(FP8_RECIPES)}")
    return FP8_RECIPES[recipe]


def cast_operand(t: torch.Tensor, recipe: Fp8Recipe, fmt: str, summed_dim: int) -> Fp8Cast:
    """Cast one matmul operand of a 2-d matmul, with scales along ``summed_dim`` (0 or -1)."""
    if recipe.granularity == "tensor":
        return tensorwise_cast(t, fmt, recipe.power_of_2)
    if recipe.granularity == "row":
        return rowwise_cast(t, fmt, dim=summed_dim, power_of_2=recipe.power_of_2)
    if summed_dim in (-1, t.dim() - 1):
        return mx_block_cast(t, fmt)
    cast = mx_block_cast(t.transpose(0, 1), fmt)      # blocks run along the summed dim
    return Fp8Cast(cast.data.transpose(0, 1), cast.scale.transpose(0, 1),
                   cast.overflow, cast.flushed)


def _note(stats: dict | None, name: str, cast: Fp8Cast) -> torch.Tensor:
    if stats is not None:
        stats[name] = {"overflow": cast.overflow, "flushed": cast.flushed,
                       "values": cast.data.numel()}
    return cast.dequantize()


class Fp8Matmul(torch.autograd.Function):
    """``x @ Wᵀ`` with all three matmuls (forward, grad_input, grad_weight) on FP8 operands.

    ``stats``, when a dict, gets each cast's overflow and flush-to-zero counts, named by operand
    (``input``, ``weight``, ``grad_output`` in the forward and for grad_input, and ``*_for_dw``
    for grad_weight's own casts).
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, recipe: Fp8Recipe,
                stats: dict | None) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.recipe, ctx.stats = recipe, stats
        x2 = x.reshape(-1, x.shape[-1])
        # Wᵀ is the right operand, summed over its rows (dim 0): one scale per row of W
        out = torch.mm(_note(stats, "input", cast_operand(x2, recipe, recipe.input_format, -1)),
                       _note(stats, "weight", cast_operand(weight.t(), recipe,
                                                           recipe.weight_format, 0)))
        return out.reshape(*x.shape[:-1], weight.shape[0]).to(x.dtype)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        x, weight = ctx.saved_tensors
        recipe, stats = ctx.recipe, ctx.stats
        g2 = grad_out.reshape(-1, grad_out.shape[-1])
        x2 = x.reshape(-1, x.shape[-1])
        # grad_input = dout @ W: summed over the output features (dout's dim -1, Wᵀ's dim -1)
        grad_x = torch.mm(
            _note(stats, "grad_output", cast_operand(g2, recipe, recipe.grad_format, -1)),
            _note(stats, "weight_for_dx", cast_operand(weight.t(), recipe,
                                                       recipe.weight_format, -1)).t())
        # grad_weight = doutᵀ @ x: summed over the tokens (dim 0 of both)
        grad_w = torch.mm(
            _note(stats, "grad_output_for_dw", cast_operand(g2, recipe, recipe.grad_format,
                                                            0)).t(),
            _note(stats, "input_for_dw", cast_operand(x2, recipe, recipe.input_format, 0)))
        return (grad_x.reshape(x.shape).to(x.dtype), grad_w.to(weight.dtype), None, None)


class Fp8Linear(nn.Linear):
    """``nn.Linear`` whose three matmuls run on FP8 operands (emulated: see the module text).

    ``last_casts`` holds the overflow and flush-to-zero counts of the latest forward and
    backward, per operand.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 recipe: str | Fp8Recipe = "tensorwise", device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.recipe = fp8_recipe(recipe)
        self.last_casts: dict = {}

    @classmethod
    def from_linear(cls, linear: nn.Linear, recipe: str | Fp8Recipe) -> "Fp8Linear":
        """An Fp8Linear that shares ``linear``'s weight and bias (the same Parameters)."""
        with torch.device("meta"):
            new = cls(linear.in_features, linear.out_features, bias=False, recipe=recipe)
        new.weight, new.bias = linear.weight, linear.bias
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.last_casts = {}
        out = Fp8Matmul.apply(x, self.weight, self.recipe, self.last_casts)
        return out if self.bias is None else out + self.bias.to(out.dtype)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, recipe={self.recipe.name}"


def convert_linears(model: nn.Module, recipe: str | Fp8Recipe,
                    skip: Iterable[str] | Callable[[str, nn.Linear], bool] = ()) -> list[str]:
    """Swap every ``nn.Linear`` of ``model`` (in place) for an :class:`Fp8Linear` with ``recipe``.

    ``skip`` keeps layers in high precision: a collection of module names (as in
    ``named_modules``), or a function ``(name, module) -> True to keep``. Returns the names
    converted. torchao's ``convert_to_float8_training`` takes the opposite filter,
    ``module_filter_fn(module, name) -> True to convert``.
    """
    chosen = fp8_recipe(recipe)
    if type(model) is nn.Linear:
        raise ValueError("convert_linears swaps the layers inside a model: wrap a lone nn.Linear "
                         "in a module, or use Fp8Linear.from_linear")
    keep = skip if callable(skip) else (lambda name, _m, names=set(skip): name in names)
    swaps = [(name, module) for name, module in model.named_modules()
             if type(module) is nn.Linear and not keep(name, module)]
    for name, module in swaps:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, Fp8Linear.from_linear(module, chosen))
    return [name for name, _ in swaps]


def fp8_cast_counts(model: nn.Module) -> dict[str, dict]:
    """The latest step's overflow and flush counts of each Fp8Linear of ``model``, by name."""
    return {name: dict(m.last_casts) for name, m in model.named_modules()
            if isinstance(m, Fp8Linear)}
