"""Lesson 06's words for the precision refusals of ``check_machine``, in the notebook's language.

The refusal is an :class:`~gpututor.checks.InvalidValue` whose ``why`` and ``allowed`` stay in
English (``error_text`` builds only its frame in Chinese); :func:`refusal_words` says the same
in Chinese from the error's fields, so a zh lesson prints it beside the error.
"""
from __future__ import annotations

from ...checks import InvalidValue
from ...i18n import language, tr


def refusal_words(error: BaseException, spec) -> str | None:
    """``check_machine``'s refusal of ``spec.precision`` in the notebook's language: fp16 on a
    CPU, bf16 on a GPU below compute capability 8.0 (read again from ``spec.first_gpu``). None
    in English, where the error's own message says it, and for any other error."""
    if language() == "en" or not isinstance(error, InvalidValue) or error.field != "precision":
        return None
    if error.value == "fp16":
        return tr("precision='fp16' is refused on a CPU: most x86 CPUs have no fp16 arithmetic, so "
                  "PyTorch emulates it, many times slower than fp32, and a run would time the "
                  "emulation (this lesson measures this CPU's rate). Allowed here: 'fp32' or 'bf16'")
    if error.value == "bf16":
        import torch
        major, minor = torch.cuda.get_device_capability(spec.first_gpu)
        return tr("precision='bf16' is refused on a GPU of compute capability {major}.{minor}: "
                  "bf16 arithmetic needs 8.0 (Ampere) or newer. Allowed on this GPU: 'fp32' or "
                  "'fp16'", major=major, minor=minor)
    return None
