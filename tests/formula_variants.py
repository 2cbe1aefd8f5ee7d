"""The shared formulas as the restatement search (``restatements.py``) evaluates them.

Each formula becomes one :class:`Variant` per choice of its ``bool`` and named-list parameters,
evaluated at random points (distinct integers for its numeric parameters) with any of them
given and the others at their defaults.

A formula too plain to be told from unrelated arithmetic by its value is not searched for: a
constant times a product of its inputs (``4·b·s·h`` bytes of fp32 activations are not
attention's ``4·L·s·h`` FLOPs), or at most two operations on its inputs and the numbers 1
and 2 (``(n-1)/n``, ``α + S/β``): :func:`too_plain`. The spelling patterns of
``test_one_home.HOMES`` guard those.
"""
from __future__ import annotations

import inspect
import itertools
import math
import operator
import random
from dataclasses import dataclass
from typing import Callable

POINTS = 4             # random points a restatement must agree at
SCALE = "_scale"       # a variable of the expression that multiplies a formula


@dataclass(frozen=True)
class Variant:
    """One formula with its ``bool`` and named-list parameters fixed (``fixed``); ``numeric``
    are the parameters a variable may take, ``required`` those without a default."""

    name: str
    function: Callable
    fixed: tuple
    numeric: tuple
    required: frozenset

    def value(self, point: dict, given: tuple) -> float | None:
        """The formula at ``point`` for the parameters ``given``, defaults for the others."""
        try:
            return float(self.function(**{**dict(self.fixed), **{p: point[p] for p in given}}))
        except (ArithmeticError, TypeError, ValueError):
            return None

    def shown(self, given: tuple, variables: list[str]) -> str:
        args = [f"{p}={v}" for p, v in zip(given, variables)] + \
            [f"{p}={v!r}" for p, v in self.fixed]
        return f"{self.name}({', '.join(args)})"


def variants(module, names, choices: dict) -> list[Variant]:
    """Every formula of ``module`` named in ``names``, once per choice of its ``bool``
    parameters and of those whose allowed values ``choices`` lists by parameter name (a number
    listed there is still a parameter a variable may take)."""
    out = []
    for name in names:
        function = getattr(module, name)
        numeric, required, options = [], set(), []
        for p in inspect.signature(function).parameters.values():
            kind = str(p.annotation)
            if kind in ("int", "float"):
                numeric.append(p.name)
                if p.default is inspect.Parameter.empty:
                    required.add(p.name)
            if p.name in choices or kind == "bool":   # a number listed: each, where not given
                options.append([(p.name, v) for v in choices.get(p.name, (False, True))])
            elif kind not in ("int", "float"):
                raise TypeError(f"{name}: parameter {p.name} ({kind}) has no values to try")
        for fixed in itertools.product(*options):
            out.append(Variant(name, function, tuple(fixed), tuple(numeric), frozenset(required)))
    return out


def random_points(variant: Variant, seed: int) -> list[dict]:
    """``POINTS`` points, each giving the numeric parameters and :data:`SCALE` distinct integers
    (2 to 199)."""
    rng = random.Random(seed)
    names = variant.numeric + (SCALE,)
    return [dict(zip(names, rng.sample(range(2, 200), len(names)))) for _ in range(POINTS)]


def close(a, b) -> bool:
    """Equal to rounding (None, a value that could not be computed, is never close)."""
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def too_plain(value: Callable, given: tuple, points: list[dict]) -> bool:
    """Whether ``value(point)``, a function of the parameters ``given``, is a constant times a
    product of powers of them, or takes at most two operations on them and the numbers 1 and 2
    (see the module's doc)."""
    values = [value(pt) for pt in points]
    if any(v is None for v in values):
        return True
    if all(close(v, values[0]) for v in values):                    # a constant
        return True
    powers = {}
    for p in given:                                                  # a monomial?
        doubled = value({**points[0], p: 2 * points[0][p]})
        ratio = doubled / values[0] if doubled and values[0] else 0
        powers[p] = round(math.log2(ratio)) if ratio > 0 else None
        if powers[p] is None or not close(2 ** powers[p], ratio):
            break
    else:
        if all(close(v / values[0], math.prod((pt[p] / points[0][p]) ** e
                                              for p, e in powers.items()))
               for v, pt in zip(values, points)):
            return True
    leaves = [tuple(float(pt[p]) for pt in points) for p in given] + \
        [(1.0,) * len(points), (2.0,) * len(points)]
    ops = (operator.add, operator.sub, operator.mul, operator.truediv)

    def combine(xs, ys):
        for x, y, op in itertools.product(xs, ys, ops):
            try:
                yield tuple(op(a, b) for a, b in zip(x, y))
            except ZeroDivisionError:
                continue
    one = list(combine(leaves, leaves))                              # two operations at most
    shapes = {tuple(map(lookup_key, v))
              for v in itertools.chain(leaves, one, combine(one, leaves), combine(leaves, one))}
    return tuple(map(lookup_key, values)) in shapes


def lookup_key(value: float | None) -> float | None:
    """``value`` to 7 significant digits: to look a value up (its other points confirm it)."""
    return None if value is None else float(f"{value:.7g}")
