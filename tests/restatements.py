"""Find arithmetic that computes what a shared formula computes: by its value, not its spelling.

A formula restated elsewhere need not look like its home: ``(stages - 1) / (micro + stages - 1)``
and ``1 - m / (m + p - 1)`` are both the pipeline bubble. So :func:`restatements` reads every
arithmetic expression of a module (each ``+ - * / // **`` node of its syntax tree, with a name
its function assigns once replaced by what was assigned), takes each distinct operand that is
not a number (a name, an attribute, a call, a subscript) as a variable, and tries every way of
giving those variables to a formula's numeric parameters, one parameter each, the others at
their defaults (``formula_variants.py``: the formulas, their random points, and which are too
plain to look for). An expression equal at every point to the formula, to one step from it
(:data:`TRANSFORMS`: ``1 - f``, ``1/(1 - f)``, ...) or to that times one of its own variables
restates it, whatever its names. One that calls the formula does not.
"""
from __future__ import annotations

import ast
import copy
import itertools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from formula_variants import SCALE, close, lookup_key, random_points, too_plain, variants

MAX_VARIABLES = 6      # an expression with more distinct operands is not compared
# what counts as computing a formula ``f``: itself, or one step from it (the bubble's fraction
# f = (p-1)/(m+p-1) is also written as its complement m/(m+p-1) or as the step's stretch
# 1/(1-f) = (m+p-1)/m)
TRANSFORMS = {"{f}": lambda f: f, "1 - {f}": lambda f: 1 - f, "1 + {f}": lambda f: 1 + f,
              "1 / {f}": lambda f: 1 / f, "1 / (1 - {f})": lambda f: 1 / (1 - f)}
ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


@dataclass(frozen=True)
class Found:
    """``expression`` at ``line`` of ``path`` computes ``formula``: the one named ``name``,
    with the expression's variables as its arguments."""

    path: str
    line: int
    expression: str
    name: str
    formula: str


# ---- the expressions of a module -----------------------------------------------------------------

def _arithmetic(node) -> bool:
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ARITHMETIC)) or \
        (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub))


def _in_scope(scope) -> Iterator[ast.AST]:
    """The nodes of ``scope``'s own body: not those of the functions and classes inside it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, SCOPES):
            todo.extend(ast.iter_child_nodes(node))


def _assigned_once(scope) -> dict:
    """Name -> value, for the names ``scope`` stores exactly once, by ``name = value`` (or
    ``a, b = x, y``)."""
    stores = Counter(n.id for n in _in_scope(scope)
                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    values = {}
    for node in _in_scope(scope):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            pairs = [(target, value)]
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and \
                    len(target.elts) == len(value.elts):
                pairs = zip(target.elts, value.elts)
            values.update((t.id, v) for t, v in pairs
                          if isinstance(t, ast.Name) and stores[t.id] == 1)
    return values


class _Inline(ast.NodeTransformer):
    """Replace a name by the arithmetic (or number) assigned to it, three levels deep."""

    def __init__(self, values: dict, depth: int = 0):
        self.values, self.depth = values, depth

    def visit_Name(self, node):
        value = self.values.get(node.id)
        if isinstance(node.ctx, ast.Load) and self.depth < 3 and value is not None and \
                (_arithmetic(value) or isinstance(value, ast.Constant)):
            return _Inline(self.values, self.depth + 1).visit(copy.deepcopy(value))
        return node


def expressions(source: str) -> Iterator[tuple[int, ast.expr]]:
    """(line, expression) for every arithmetic node of ``source``, names inlined."""
    tree = ast.parse(source)
    scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, SCOPES)]
    for scope in scopes:
        values = _assigned_once(scope)
        for node in _in_scope(scope):
            if _arithmetic(node):
                yield node.lineno, _Inline(values).visit(copy.deepcopy(node))


class _NotSearched(Exception):
    pass   # the expression calls a formula, or is not arithmetic on numbers


def as_function(expr: ast.expr, formula_names) -> tuple[Callable, list[str]] | None:
    """The expression as a function of its variables, and the variables' text; None where it
    calls a formula, is not arithmetic on numbers, or has too many variables."""
    variables: dict[str, str] = {}

    def replace(node):
        if _arithmetic(node):
            if isinstance(node, ast.BinOp):
                if isinstance(node.op, ast.Pow) and not isinstance(node.right, ast.Constant):
                    raise _NotSearched   # x ** y: not a formula's shape, and may not end
                return ast.BinOp(replace(node.left), node.op, replace(node.right))
            return ast.UnaryOp(node.op, replace(node.operand))
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, float):
                raise _NotSearched
            return node
        for inner in ast.walk(node):
            called = getattr(inner, "func", None)
            if isinstance(inner, ast.Call) and getattr(called, "id", getattr(called, "attr", None)) \
                    in formula_names:
                raise _NotSearched
        key = ast.unparse(node)
        return ast.Name(variables.setdefault(key, f"_v{len(variables)}"), ast.Load())

    try:
        body = replace(expr)
    except _NotSearched:
        return None
    if not 1 <= len(variables) <= MAX_VARIABLES:
        return None
    args = ast.arguments(posonlyargs=[], args=[ast.arg(v) for v in variables.values()],
                         kwonlyargs=[], kw_defaults=[], defaults=[])
    code = ast.fix_missing_locations(ast.Expression(ast.Lambda(args, body)))
    return eval(compile(code, "<expression>", "eval")), list(variables)


# ---- the search -----------------------------------------------------------------------------------

class Search:
    """The formulas' variants with their random points, and the values already computed."""

    def __init__(self, module, names, choices: dict, seed: int = 0):
        self.names = set(names)
        self.variants = [(v, random_points(v, seed + i))
                         for i, v in enumerate(variants(module, names, choices))]
        self._targets, self._plain = {}, {}

    def targets(self, i: int, given: tuple) -> dict:
        """Formula ``i`` on ``given`` and its transforms at the first point: value -> shapes."""
        key = (i, frozenset(given))
        if key not in self._targets:
            variant, points = self.variants[i]
            value = variant.value(points[0], given)
            out = {}
            for shape in TRANSFORMS:
                moved = _transformed(shape, value)
                if moved is not None:
                    out.setdefault(lookup_key(moved), []).append(shape)
            self._targets[key] = out
        return self._targets[key]

    def match(self, function: Callable, variables: list[str]) -> tuple[str, str] | None:
        """The formula's name and what ``function`` computes, if it is a transform
        (:data:`TRANSFORMS`) of the formula, or one times a variable of its own (the formula of
        the others); else None."""
        k = len(variables)
        for scale in (None, *range(k)) if k > 1 else (None,):
            mapped = k - (scale is not None)
            for i, (variant, points) in enumerate(self.variants):
                if not len(variant.required) <= mapped <= len(variant.numeric):
                    continue
                free = [p for p in variant.numeric if p not in variant.required]
                for extra in itertools.combinations(free, mapped - len(variant.required)):
                    chosen = tuple(sorted(variant.required)) + extra
                    targets = self.targets(i, chosen)
                    for given in itertools.permutations(chosen):
                        names = list(given)
                        if scale is not None:
                            names.insert(scale, SCALE)
                        shapes = targets.get(lookup_key(_evaluate(function, names, points[0])))
                        shape = shapes and self._agrees(function, i, tuple(names), given, shapes)
                        if shape:
                            shown = variant.shown(given, [v for j, v in enumerate(variables)
                                                          if j != scale])
                            return variant.name, shape.format(f=shown) + \
                                ("" if scale is None else f" x {variables[scale]}")
        return None

    def _agrees(self, function: Callable, i: int, names: tuple, given: tuple, shapes: list
                ) -> str | None:
        """The one of ``shapes`` (transforms of formula ``i`` on ``given``) that ``function``
        (its arguments the parameters ``names``) computes at every point, if it is not too
        plain."""
        variant, points = self.variants[i]
        for point in points[1:]:
            mine, value = _evaluate(function, names, point), variant.value(point, given)
            shapes = [t for t in shapes if close(mine, _transformed(t, value))]
        for shape in shapes:
            key = (i, frozenset(given), shape)
            if key not in self._plain:
                self._plain[key] = any(too_plain(
                    lambda pt, t=t: _transformed(t, variant.value(pt, given)), given, points)
                    for t in {"{f}", shape})
            if not self._plain[key]:
                return shape
        return None


def _evaluate(function: Callable, names, point: dict) -> float | None:
    """``function`` of the point's values of ``names``, divided by the scale if it is one."""
    try:
        value = float(function(*(point[p] for p in names)))
    except (ArithmeticError, TypeError, ValueError):
        return None
    return value / point[SCALE] if SCALE in names else value


def _transformed(shape: str, value: float | None) -> float | None:
    try:
        return None if value is None else TRANSFORMS[shape](value)
    except ZeroDivisionError:
        return None


def restatements(root: Path, search: Search, skip=()) -> list[Found]:
    """Every expression in the ``.py`` files under ``root`` (but ``skip``, paths relative to
    it) that computes one of the search's formulas without calling it."""
    found = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        if name in skip:
            continue
        seen = set()
        for line, expr in expressions(path.read_text()):
            text = ast.unparse(expr)
            if text in seen:
                continue
            seen.add(text)
            compiled = as_function(expr, search.names)
            formula = compiled and search.match(*compiled)
            if formula:
                found.append(Found(name, line, text, *formula))
    return found
