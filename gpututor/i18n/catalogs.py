"""The translations, as gettext catalogs: one ``zh.po`` beside each lesson and each package area.

A catalog is an ordinary gettext ``.po`` file (Poedit, Weblate and ``msgfmt`` read it): each
entry's ``msgid`` is the English, its ``msgstr`` the translation. Catalogs hold two kinds of
entries:

- what the package shows while it runs (``tr``, ``say``, ``ntr`` in ``gpututor.i18n``): entries
  with no context, found in every ``zh.po`` of the package and merged into one table;
- what a lesson's notebook says: its markdown paragraphs (context ``markdown``) and its code
  comments (context ``comment``), in the lesson's own ``gpututor/lessons/<name>/zh.po``, from
  which ``gpututor.i18n.notebooks`` builds the Chinese notebook.

An entry marked *fuzzy* (its English changed since it was translated) or left empty is not
used: the English shows instead, as gettext does, and the tests name it.

Babel reads and writes the files (``babel.messages``: the catalog model, ``.po`` reading and
writing with fuzzy flags, previous msgids and plural forms); JupyterLab already depends on it.
"""
from __future__ import annotations

import gettext
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent
NOTEBOOK_CONTEXTS = ("markdown", "comment")   # a lesson notebook's entries, not shown by tr()


def catalog_paths(language: str) -> list[Path]:
    """Every catalog of ``language`` in the package (``<folder>/<language>.po``), sorted."""
    return sorted(PACKAGE.rglob(f"{language}.po"))


def read(path: Path):
    """The ``babel.messages.Catalog`` in ``path``."""
    from babel.messages.pofile import read_po
    with open(path, "rb") as f:
        return read_po(f, abort_invalid=True)


def write(path: Path, catalog) -> None:
    """Write ``catalog`` to ``path`` (no line wrapping, so a changed sentence is one diff line)."""
    from babel.messages.pofile import write_po
    with open(path, "wb") as f:
        write_po(f, catalog, width=0, include_previous=True, sort_output=False)


def new_catalog(language: str, area: str):
    """An empty catalog of ``language`` for ``area`` (a lesson's or a package folder's name)."""
    from babel.messages.catalog import Catalog
    header = (f"# {language} translations of gpututor's {area}: msgid is the English, msgstr the\n"
              "# translation. Edit with any gettext tool (Poedit, Weblate); an entry whose English\n"
              "# changed is marked fuzzy and shows in English until it is reviewed.\n#")
    return Catalog(locale=language, project=f"gpututor ({area})", header_comment=header,
                   charset="utf-8", fuzzy=False, msgid_bugs_address="",
                   last_translator="gpututor", language_team=language)


def usable(message) -> bool:
    """An entry whose translation may be shown: translated, and not fuzzy."""
    strings = message.string if isinstance(message.string, (tuple, list)) else [message.string]
    return bool(message.id) and not message.fuzzy and all(strings)


class Table:
    """The runtime entries of every catalog of one language: ``text[english]`` and
    ``plurals[(singular, plural)]`` (the forms, chosen by ``plural_index(n)``)."""

    def __init__(self, language: str):
        self.text: dict[str, str] = {}
        self.plurals: dict[tuple[str, str], tuple[str, ...]] = {}
        self.plural_index = lambda n: 0 if n == 1 else 1
        for path in catalog_paths(language):
            catalog = read(path)
            self.plural_index = gettext.c2py(catalog.plural_expr)
            for message in catalog:
                if message.context in NOTEBOOK_CONTEXTS or not usable(message):
                    continue
                if isinstance(message.id, (tuple, list)):
                    self.plurals[tuple(message.id)] = tuple(message.string)
                else:
                    self.text[message.id] = message.string
