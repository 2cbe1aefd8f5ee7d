"""A bad-input error raised in a Chinese lesson's code cell, with its frame also in Chinese.

The package's errors stay English (``gpututor.i18n``: they name the field, the value and what is
allowed, and are searched for as they are). In a notebook that asked for Chinese, a bad-input
error (``gpututor.checks.InvalidValue``: "batch_size=0 is invalid: allowed is ...") is shown as
usual, and one line follows it with the frame in Chinese ("batch_size=0 无效：允许的值：..."),
built from the error's fields. Other errors, a learner's own ``ValueError`` among them, are shown
untouched. IPython's ``set_custom_exc`` is the hook (IPython's documentation,
"InteractiveShell.set_custom_exc"); it is set while the language is not English.
"""
from __future__ import annotations

from ..checks import InvalidValue
from ..i18n import error_text, language


def translated_line(value: BaseException, tb) -> str | None:
    """The Chinese line shown under ``value``'s traceback, or None where none is shown."""
    if language() == "en" or not isinstance(value, InvalidValue):
        return None
    return f"ValueError: {error_text(value)}"


def _show(shell, etype, value, tb, tb_offset=None):
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    line = translated_line(value, tb)
    if line is not None:
        print(line)


def follow_language(shell) -> None:
    """Show bad-input errors in ``shell`` with a Chinese line while the language is not English;
    without one (English, or outside IPython) the shell's own handler stays."""
    if shell is None:
        return
    if language() == "en":
        if getattr(shell, "CustomTB", None) is not None and \
                shell.custom_exceptions == (InvalidValue,):
            shell.set_custom_exc((), None)
        return
    shell.set_custom_exc((InvalidValue,), _show)
