"""The package's validators: one home for "this value is wrong, here is what is allowed".

Every check raises :class:`InvalidValue`, a ``ValueError`` that carries the field, the value as
given, what is allowed and, where it helps, why, and is worded from them the same way, e.g.
``precision='fp8' is invalid: allowed values are 'fp32', 'bf16', 'fp16'``; the rest of the package
raises it too. A Chinese notebook shows its frame in Chinese from those fields
(``gpututor.i18n.error_text``).
A bool is never a number here: Python counts ``True`` as the int 1, so ``bucket_cap_mb=True``
would otherwise pass as 1 MiB. Ground floor: imports nothing of gpututor, so the run's spec,
the planner's formulas, the strategies and the lessons all say it alike.

Three layers, smallest first:

- predicates say yes or no: :func:`is_number`, :func:`is_int`, :func:`is_bool`,
  :func:`is_one_of`;
- predicate makers build one for a range or a list, for tables of checks such as a strategy's
  ``options``: :func:`number_in`, :func:`int_in`, :func:`one_of`;
- checks raise the error (:class:`InvalidValue`) for one named value: :func:`where` (any
  predicate), :func:`choice`, :func:`integer`, :func:`positive`, :func:`fraction`,
  :func:`number_where`.

The text forms some fields accept (``"48MB"``, ``"dp=2,tp=2"``) are parsed here too
(:func:`parse_bytes`, :func:`parse_mesh`): ``RunSpec`` turns them into its normal forms, and
the command line and the planner read the same forms.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

Predicate = Callable[[object], bool]

# ---- the error every check raises ---------------------------------------------------------------


class InvalidValue(ValueError):
    """A bad input, as facts: ``field``, ``value`` (as given), ``allowed`` (what is allowed, in
    words) and, optionally, ``why`` (a condition or reason: ``"with a task"``).

    ``allowed`` may instead be the allowed values themselves (a tuple, or a dict's keys): then
    ``choices`` holds them and the message lists them. The message is built from the facts:
    ``max_restarts=1 is invalid with a task: allowed is 0``, ``zero_stage=4 is invalid: allowed
    values are 0, 1, 2, 3``.
    """

    def __init__(self, field: str, value, allowed, why: Optional[str] = None):
        self.field, self.value, self.why = field, value, why
        self.choices = None if isinstance(allowed, str) else tuple(allowed)
        self.allowed = allowed if self.choices is None else \
            ", ".join(repr(a) for a in self.choices)
        frame = "allowed is" if self.choices is None else "allowed values are"
        super().__init__(f"{field}={value!r} is invalid{' ' + why if why else ''}: "
                         f"{frame} {self.allowed}")

    def __reduce__(self):   # pickled (a rank's error) from its facts, not from its message
        return type(self), (self.field, self.value,
                            self.allowed if self.choices is None else self.choices, self.why)


# ---- predicates ---------------------------------------------------------------------------------


def is_number(value) -> bool:
    """A finite int or float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)


def is_int(value) -> bool:
    """An int, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_bool(value) -> bool:
    """``True`` or ``False`` (not 0 or 1)."""
    return isinstance(value, bool)


def is_one_of(value, allowed) -> bool:
    """``value`` equals one of ``allowed``; a bool only where a bool is listed (``True == 1``).
    Never raises, whatever ``value`` is (a list is not looked up in a dict)."""
    return any(value == a and is_bool(value) == is_bool(a) for a in tuple(allowed))


# ---- predicate makers, for tables of checks -----------------------------------------------------


def number_in(low: float, high: float, low_open: bool = False) -> Predicate:
    """Yes for a finite number (not a bool) in ``[low, high]``; ``(low, high]`` with
    ``low_open``."""
    return lambda v: is_number(v) and (v > low if low_open else v >= low) and v <= high


def int_in(low: int, high: Optional[int] = None) -> Predicate:
    """Yes for an int (not a bool) in ``[low, high]`` (no upper end if ``high`` is None)."""
    return lambda v: is_int(v) and v >= low and (high is None or v <= high)


def one_of(allowed) -> Predicate:
    """Yes for one of ``allowed`` (a tuple, or a dict's keys): :func:`is_one_of`."""
    allowed = tuple(allowed)
    return lambda v: is_one_of(v, allowed)


# ---- checks: raise the error for one named value ------------------------------------------------


def where(name: str, value, ok: Predicate, allowed: str) -> None:
    """``ok(value)`` must hold (any type); ``allowed`` says what is allowed in words."""
    if not ok(value):
        raise InvalidValue(name, value, allowed)


def choice(name: str, value, allowed) -> None:
    """``value`` must be one of ``allowed`` (a tuple, or a dict's keys)."""
    allowed = tuple(allowed)
    if not is_one_of(value, allowed):
        raise InvalidValue(name, value, allowed)


def integer(name: str, value, low: int = 1, high: int | None = None) -> None:
    """``value`` must be an int (not a bool) in ``[low, high]`` (no upper end if ``high`` is
    None); with the defaults, a positive integer."""
    if high is not None:
        allowed = f"an integer in [{low}, {high}]"
    else:
        allowed = "a positive integer" if low == 1 else f"an integer >= {low}"
    where(name, value, int_in(low, high), allowed)


def positive(name: str, value, allow_zero: bool = False) -> None:
    """``value`` must be a finite number > 0 (>= 0 with ``allow_zero``)."""
    number_where(name, value, (lambda v: v >= 0) if allow_zero else (lambda v: v > 0),
                 "a finite number " + (">= 0" if allow_zero else "> 0"))


def fraction(name: str, value, allow_zero: bool = False, allow_one: bool = True) -> None:
    """``value`` must be a number in (0, 1]; ``allow_zero`` closes the left end, ``allow_one``
    =False opens the right one."""
    low_ok = (lambda v: v >= 0) if allow_zero else (lambda v: v > 0)
    high_ok = (lambda v: v <= 1) if allow_one else (lambda v: v < 1)
    number_where(name, value, lambda v: low_ok(v) and high_ok(v), "a fraction in "
                 + ("[0" if allow_zero else "(0") + ", " + ("1]" if allow_one else "1)"))


def number_where(name: str, value, ok: Predicate, allowed: str) -> None:
    """``value`` must be a finite number for which ``ok(value)`` holds; ``allowed`` says which
    in words (e.g. ``"a number > 1"``)."""
    where(name, value, lambda v: is_number(v) and ok(v), allowed)


# ---- text forms a field accepts -----------------------------------------------------------------

BYTE_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20,
              "GIB": 2**30}
MAX_DEVICE_MEMORY = 2**50   # bytes per rank (1 PiB): more is a typo, not a device
MESH_DIMS = ("dp", "pp", "cp", "ep", "tp")   # grid order: outermost first, tp innermost


def parse_bytes(value, name: str = "device_memory") -> Optional[int]:
    """``None``, a number of bytes, or a string such as ``"48MB"``, ``"1.5GB"``, ``"512MiB"``
    (MB = 10^6 bytes, MiB = 2^20) -> bytes as an int (or None). The range is the caller's."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        where(name, value, is_number, "a finite number")
        return int(value)
    size = math.nan
    if isinstance(value, str):
        text = value.strip().upper().replace(" ", "")
        number = text.rstrip("BKMGI")
        try:
            size = float(number) * BYTE_UNITS.get(text[len(number):] or "B", math.nan)
        except ValueError:
            pass
    if not (math.isfinite(size) and abs(size) <= MAX_DEVICE_MEMORY):   # "1e300GB" is inf bytes
        raise InvalidValue(name, value, f"a number of bytes up to 2**50 ({MAX_DEVICE_MEMORY}) "
                           "or a string like '48MB', '1.5GB' or '512MiB'")
    return int(size)


def parse_mesh(mesh) -> Optional[tuple]:
    """``{"dp": 2, "tp": 2}``, ``(("dp", 2), ("tp", 2))`` or ``"dp=2,tp=2"`` -> pairs in grid
    order (:data:`MESH_DIMS`), or None."""
    if mesh is None:
        return None
    allowed = (f"a grid such as {{'dp': 2, 'tp': 2}} or 'dp=2,tp=2' with dims in "
               f"{', '.join(MESH_DIMS)}, each a positive integer, each at most once")
    try:
        if isinstance(mesh, str):
            pairs = [part.split("=") for part in mesh.split(",") if part.strip()]
            pairs = [(name.strip(), int(degree)) for name, degree in pairs]
        else:
            pairs = list(mesh.items()) if isinstance(mesh, dict) else [tuple(p) for p in mesh]
    except (ValueError, TypeError, AttributeError):
        raise InvalidValue("mesh", mesh, allowed) from None
    ok = bool(pairs) and all(len(p) == 2 and is_one_of(p[0], MESH_DIMS) and int_in(1, 4096)(p[1])
                             for p in pairs)
    if not ok or len({name for name, _ in pairs}) != len(pairs):   # each dim at most once
        raise InvalidValue("mesh", mesh, allowed)
    return tuple(sorted(pairs, key=lambda p: MESH_DIMS.index(p[0])))
