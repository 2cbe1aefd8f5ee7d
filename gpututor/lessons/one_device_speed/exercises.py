"""Lesson 01c's exercise checkers: each takes the learner's answer and derives what it expects
from the package (the roofline's count of a matmul's bytes, the catalog's GPU roofs, the model's
own layers), so the notebook shows only the call. ``...`` means "not answered yet".

- :func:`check_matmul_intensity`: the learner's FLOPs per byte of an ``(m×k) @ (k×n)`` matmul,
  run on several shapes at 4 and at 2 bytes per element, against
  :func:`gpututor.measure.roofline.matmul_intensity` (which refuses while the learner's runs).
- :func:`check_compute_bound_rows`: the fewest rows ``m`` at which a model's MLP up-projection
  is compute-bound on a GPU's datasheet roof (the A100 in bf16 by default).
"""
from __future__ import annotations

import math
import random
from typing import Callable

from ...formulas import bytes_per_value
from ...i18n import say, tr
from ...measure.roofline import catalog_roofs, matmul_elements, matmul_intensity
from ...models import MLP, build_model
from ..common.code_exercise import call_refusing
from ..common.exercises import as_number, check_answer

# (m, k, n): the lesson's MLP up-projection, a square, a matrix-vector product, an output much
# larger than the inputs, and an odd one
SHAPES = ((1024, 128, 512), (512, 512, 512), (1, 4096, 4096), (8192, 64, 8192), (37, 300, 5))
BYTES = (4, 2)


def _mistake(number: float, m: int, k: int, n: int, size: int) -> str:
    """A hint naming the classic mistake ``number`` matches, or the general one. Sizes are tried
    4 first, so a function that ignores ``bytes_per_element`` (fp32 or bf16 always) is off by
    4 / 2 or 2 / 4 at one of them."""
    right = matmul_intensity(m, k, n, size)
    guesses = {
        "bytes_per_element ignored? The bytes are the elements times bytes_per_element.":
            [right * size / fixed for fixed in (4, 2) if fixed != size],
        "m·k·n FLOPs? A multiply and an add are two FLOPs per term: 2·m·k·n.": [right / 2],
        "the output forgotten? The matmul also writes its m×n result once.":
            [2 * m * k * n / ((m * k + k * n) * size)],
    }
    for hint, values in guesses.items():
        if any(math.isclose(number, value, rel_tol=1e-6) for value in values):
            return tr(hint)
    return tr("Count the FLOPs of every multiply-add and the bytes of every element read or "
              "written once.")


def check_matmul_intensity(function: Callable) -> None:
    """Your ``my_matmul_intensity(m, k, n, bytes_per_element)`` on the shapes of :data:`SHAPES`
    at 4 and 2 bytes per element: it must give the roofline's FLOPs per byte of the matmul
    (``2·m·k·n`` FLOPs over both inputs read and the output written once). The package's own
    count refuses while your function runs."""
    if function is ...:
        say("Not answered yet: define my_matmul_intensity and run the cell again.")
        return
    if not callable(function):
        raise AssertionError(tr("my_matmul_intensity must be a function of (m, k, n, "
                                "bytes_per_element)."))
    # and one shape drawn now, which no table filled in beforehand can hold
    draw = random.SystemRandom()
    shapes = SHAPES + ((draw.randint(2, 4096), draw.randint(2, 4096), draw.randint(2, 4096)),)
    for m, k, n in shapes:
        for size in BYTES:
            got = call_refusing(function, (m, k, n, size),
                                refused=(matmul_intensity, matmul_elements),
                                called=tr("matmul intensity: your function called the package's "
                                          "own count (gpututor.measure.roofline): write the "
                                          "count yourself."),
                                failed=tr("matmul intensity: your function failed for m, k, n = "
                                          "{m}, {k}, {n} at {size} bytes: {kind}: {error}"),
                                m=m, k=k, n=n, size=size)
            number = as_number(got)
            if number is None or not math.isclose(number, matmul_intensity(m, k, n, size),
                                                  rel_tol=1e-6):
                raise AssertionError(tr(
                    "matmul intensity: for m, k, n = {m}, {k}, {n} at {size} bytes per element "
                    "your function gives {got}, not the roofline's FLOPs per byte. {hint}",
                    m=m, k=k, n=n, size=size, got=repr(got),
                    hint=_mistake(number, m, k, n, size) if number is not None else ""))
    say("Correct: the roofline's FLOPs per byte for {shapes} shapes, at 4 and at 2 bytes "
             "per element", shapes=len(shapes))


def _up_projection(spec) -> tuple[int, int]:
    """``(k, n)`` of the MLP up-projection of ``spec``'s model, read off its first MLP (the model
    built on the meta device: shapes, no weights)."""
    fc = next(m for m in build_model(spec, meta=True).modules() if isinstance(m, MLP)).fc
    return fc.in_features, fc.out_features


def _fewest_compute_bound_rows(k: int, n: int, bytes_per_element: int, ridge: float) -> int | None:
    """The smallest ``m`` at which an ``(m×k) @ (k×n)`` matmul's intensity reaches ``ridge``, or
    None where no ``m`` does (the intensity grows with ``m`` towards ``2kn / (b(k+n))``)."""
    denominator = 2 * k * n - bytes_per_element * ridge * (k + n)
    if denominator <= 0:
        return None
    m = max(1, math.ceil(bytes_per_element * ridge * k * n / denominator))
    while m > 1 and matmul_intensity(m - 1, k, n, bytes_per_element) >= ridge:   # float edges
        m -= 1
    while matmul_intensity(m, k, n, bytes_per_element) < ridge:
        m += 1
    return m


def check_compute_bound_rows(answer, spec, gpu: str = "A100-80GB", precision: str = "bf16"
                             ) -> None:
    """The fewest rows ``m`` (batch × positions) at which ``spec``'s MLP up-projection, in
    ``precision``, reaches ``gpu``'s datasheet ridge (:func:`catalog_roofs`). Within 1 %: the
    ridge rounded as printed, or the bias's bytes counted too, move it by a row or two."""
    k, n = _up_projection(spec)
    roof = catalog_roofs((gpu,), precision)[0]
    expected = _fewest_compute_bound_rows(k, n, bytes_per_value(precision), roof["ridge"])
    if expected is None:
        raise ValueError(f"no number of rows makes a {k}x{n} matmul compute-bound on the "
                         f"{gpu} in {precision}: pass a wider model")
    number = as_number(answer)
    if answer is not ... and number is not None and number <= 0:
        raise AssertionError(tr("fewest rows: {answer} is not a number of rows. Solved for 4-byte "
                                "elements? Then no m reaches the ridge: the roof is bf16, 2 bytes "
                                "an element.", answer=repr(answer)))
    check_answer(answer, expected, "fewest rows at which the MLP up-projection is compute-bound",
                 rel_tol=0.01, source="formula")
