"""The language the widgets and checkers speak: English, or Simplified Chinese (``"zh"``).

A notebook asks for its language in its first code cell, ``gpututor.ui.set_language("zh")``;
the Chinese lessons (``notebooks/zh/``, built by ``gpututor.i18n.notebooks``) do, the English
ones leave the default. From then on the kernel shows in that language what it draws and says to
the learner: the run panel's labels and status lines, plot titles and axis labels, and the
exercise checkers' messages. Error messages of the package stay in English (they name fields and
values, and are searched for as they are); a widget shows a bad-input error's frame in Chinese
(:func:`error_text`, built from the fields of ``gpututor.checks.InvalidValue``), and so does a
code cell, on a line under the traceback (``gpututor.ui.errors``).

Lessons show their sentences with :func:`say` (:func:`tr`, then :func:`show`: rendered in a
notebook, printed elsewhere).

Text is looked up by its English form, as gettext does: ``tr("Run")`` or, for a sentence with
values, ``tr("{what}: not answered yet.", what=...)``, whose English template is the msgid; a
count chooses its plural form with :func:`ntr`. A template with no translation is shown in
English, so a missing entry is visible, never an error. The translations are gettext catalogs,
``zh.po`` beside each lesson and each package area (``gpututor.i18n.catalogs``), read once, when a
kernel first speaks that language.

The language is a setting of the kernel (one notebook, one language), held here and read only
where text is shown; ranks never read it.
"""
from __future__ import annotations

from ..checks import InvalidValue, choice
from .shown import show, show_code, show_table, verdict

__all__ = ["LANGUAGES", "error_text", "language", "not_measured", "ntr", "say", "set_language",
           "show", "show_code", "show_table", "show_verdict", "table", "tr"]

LANGUAGES = ("en", "zh")
_current = ["en"]
_tables: dict = {}


def set_language(language: str) -> None:
    """Speak ``language`` ("en" or "zh") in this kernel's widgets, figures and checkers."""
    choice("language", language, LANGUAGES)
    _current[0] = language


def language() -> str:
    """The language set with :func:`set_language` ("en" unless asked)."""
    return _current[0]


def table(language: str):
    """The runtime entries of ``language``'s catalogs (a ``catalogs.Table``; None for English)."""
    if language == "en":
        return None
    if language not in _tables:
        from .catalogs import Table
        _tables[language] = Table(language)
    return _tables[language]


def __getattr__(name: str):
    if name == "ZH":   # English template -> Chinese, as the catalogs give it
        return table("zh").text
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def not_measured(value, spec: str, scale: float = 1.0, unit: str = "") -> str:
    """``value / scale`` formatted with ``spec`` and followed by ``unit``, or "not measured" (in
    the current language, with no unit) where the run left it unmeasured (None): never shown
    as 0."""
    return tr("not measured") if value is None else format(value / scale, spec) + unit


def tr(template: str, **values) -> str:
    """``template`` in the current language, formatted with ``values`` (``str.format``)."""
    found = table(_current[0])
    text = found.text.get(template, template) if found else template
    return text.format(**values) if values else text


def ntr(singular: str, plural: str, n: int, **values) -> str:
    """The form of ``singular``/``plural`` that ``n`` takes in the current language (gettext's
    ``ngettext``), formatted with ``n`` and ``values``: ``ntr("{n} rank", "{n} ranks", k)``."""
    found = table(_current[0])
    forms = found.plurals.get((singular, plural)) if found else None
    if forms:
        text = forms[min(found.plural_index(n), len(forms) - 1)]
    else:
        text = singular if n == 1 else plural
    return text.format(n=n, **values)


def say(template: str, **values) -> None:
    """Show ``tr(template, **values)``: a lesson's sentence, in the notebook's language, rendered
    in a notebook and printed elsewhere (:func:`.shown.show`). Write ``say("{n} ranks ran {x:.2f}x
    as fast", n=n, x=x)`` where a lesson would print an f-string; the English words are the same."""
    show(tr(template, **values))


def show_verdict(headline: str, details: str = "", tone: str = "mixed") -> None:
    """What a run showed, first: ``headline`` with ``details`` one click away, in a callout of
    ``tone`` ("good", "bad", "mixed"; :func:`.shown.verdict`), the toggle in the notebook's
    language."""
    verdict(headline, details, tone, tr("details"))


def error_text(error: BaseException | str) -> str:
    """A bad-input error as a learner sees it in a widget. In Chinese, an
    :class:`~gpututor.checks.InvalidValue`'s frame ("... is invalid:", "allowed is") is built in
    Chinese from its fields; the field, the value, what is allowed and why stay as the package
    wrote them (they are searched for as they are). Any other error, or a message given as
    text, passes through as its English text: nothing here reads the English back."""
    if not isinstance(error, InvalidValue) or table(_current[0]) is None:
        return str(error)
    facts = dict(field=error.field, value=repr(error.value),
                 rest=tr("allowed: {what}", what=error.allowed))
    if error.why:
        return tr("{field}={value} is invalid {why}: {rest}", why=error.why, **facts)
    return tr("{field}={value} is invalid: {rest}", **facts)
