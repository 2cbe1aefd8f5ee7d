"""The translated lessons, built from the English notebooks and each lesson's catalog.

A lesson is written once, in English (``notebooks/NN_<name>.ipynb``). What a translator
translates is in the lesson's catalog, ``gpututor/lessons/<name>/zh.po``: each markdown
paragraph (context ``markdown``) and each code comment (context ``comment``; a block of
full-line comments is one entry). The Chinese notebook (``notebooks/zh/NN_<name>.ipynb``) is
built from the two: the same cells and code, the paragraphs and comments translated, and a first
code cell that sets the language. Code is never translated, so it cannot drift.

    python -m gpututor.i18n.notebooks           # update the catalogs, then build the notebooks
    python -m gpututor.i18n.notebooks --check   # exit 1 if a build or catalog is out of date

Updating a catalog works as ``msgmerge`` does: an English paragraph that changed becomes a
*fuzzy* entry carrying the old translation (and the old English, ``#| msgid``) for a translator
to review; a new one is an empty entry; one that is gone is dropped. Fuzzy and empty entries are
built in English, and ``tests/test_zh.py`` names each one.
"""
from __future__ import annotations

import argparse
import difflib
import io
import json
import re
import sys
import tokenize
from pathlib import Path

from . import catalogs

ROOT = catalogs.PACKAGE.parent
NOTEBOOKS = ROOT / "notebooks"
TRANSLATED = ("zh",)
# the first code cell of a translated lesson starts with this (the kernel speaks the language)
LANGUAGE_CELL = {"zh": 'from gpututor.ui import set_language\n'
                       'set_language("zh")   # 控件、图表和练习检查使用中文\n\n'}
MAGIC = re.compile(r"^\s*[%!]")
FENCE = re.compile(r"^\s*(```|~~~)")


def lesson_catalog(notebook: Path, language: str) -> Path:
    """``notebooks/02_data_parallel.ipynb`` -> ``gpututor/lessons/data_parallel/zh.po``."""
    return catalogs.PACKAGE / "lessons" / notebook.stem.split("_", 1)[1] / f"{language}.po"


def paragraphs(markdown: str) -> list[str]:
    """A markdown cell's paragraphs: blocks between blank lines (a fenced block stays whole)."""
    blocks, current, fenced = [], [], False
    for line in markdown.strip("\n").split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        if not line.strip() and not fenced:
            if current:
                blocks.append("\n".join(current))
            current = []
        else:
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def comments(code: str) -> list[tuple[list[int], int, str]]:
    """A code cell's comments as ``(line numbers, column, text)``: a block of full-line comments
    at one column is one entry (its lines joined by newlines); a trailing comment is its own.
    IPython magics are read as blank lines; ``NBVAL_*`` markers are not translated."""
    lines = code.split("\n")
    python = "\n".join("" if MAGIC.match(line) else line for line in lines)
    found = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(python).readline))
        found = [(t.start[0] - 1, t.start[1], t.string) for t in tokens if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        found = [(i, line.index("#"), line[line.index("#"):]) for i, line in enumerate(lines)
                 if line.lstrip().startswith("#")]
    units: list[tuple[list[int], int, str]] = []
    for row, col, token in found:
        text = re.sub(r"^#+\s?", "", token).rstrip()
        if not re.search(r"[A-Za-z]", text) or text.startswith("NBVAL"):
            continue
        whole_line = not lines[row][:col].strip()
        last = units[-1] if units else None
        if whole_line and last and last[0][-1] == row - 1 and last[1] == col and \
                not lines[row - 1][:col].strip():
            last[0].append(row)
            units[-1] = (last[0], col, last[2] + "\n" + text)
        else:
            units.append(([row], col, text))
    return units


def units(notebook: dict) -> list[tuple[str, str, int]]:
    """What a translator translates in ``notebook``: ``(context, English, cell index)``."""
    out = []
    for index, cell in enumerate(notebook["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            out += [("markdown", p, index) for p in paragraphs(source)]
        elif cell["cell_type"] == "code":
            out += [("comment", text, index) for _, _, text in comments(source)]
    return out


def update(catalog, notebook: dict, where: str):
    """``catalog`` with the notebook's current English merged in (as ``msgmerge``), and what
    changed, one line each. The package's own entries (no context) are kept as they are."""
    from babel.messages.catalog import Catalog
    wanted = units(notebook)
    old = {(m.context, m.id): m for m in catalog if m.id and m.context in catalogs.NOTEBOOK_CONTEXTS}
    keep = [m for m in catalog if m.id and m.context not in catalogs.NOTEBOOK_CONTEXTS]
    wanted_keys = {(c, e) for c, e, _ in wanted}
    gone = {key: m for key, m in old.items() if key not in wanted_keys}
    merged, changes, seen = Catalog(locale=catalog.locale, header_comment=catalog.header_comment,
                                    project=catalog.project, fuzzy=False), [], set()
    merged.mime_headers = catalog.mime_headers
    for context, english, index in wanted:
        if (context, english) in seen:
            merged.get(english, context=context).locations.append((where, index))
            continue
        seen.add((context, english))
        before = old.get((context, english))
        if before is not None:
            merged.add(english, before.string, locations=[(where, index)], context=context,
                       flags=before.flags, previous_id=before.previous_id)
            continue
        candidates = [e for c, e in gone if c == context]
        close = difflib.get_close_matches(english, candidates, n=1, cutoff=0.6)
        if close:
            previous = gone[(context, close[0])]
            merged.add(english, previous.string, locations=[(where, index)], context=context,
                       flags={"fuzzy"}, previous_id=close[0])
            changes.append(f"fuzzy: cell {index} {context}: {english[:60]!r}")
        else:
            merged.add(english, "", locations=[(where, index)], context=context)
            changes.append(f"new: cell {index} {context}: {english[:60]!r}")
    matched = {m.previous_id[0] for m in merged if m.fuzzy and m.previous_id}
    changes += [f"dropped: {c}: {e[:60]!r}" for (c, e) in gone if e not in matched]
    for m in keep:
        merged[m.id] = m
    return merged, changes


def translate(text: str, context: str, messages: dict) -> str:
    """``text`` in the catalog's language where a usable entry exists, else as it is."""
    found = messages.get((context, text))
    return found.string if found is not None and catalogs.usable(found) else text


def build(notebook: dict, catalog, language: str) -> dict:
    """The translated notebook: ``notebook``'s cells and code with its paragraphs and comments
    translated from ``catalog``, and the language set in its first code cell."""
    messages = {(m.context, m.id): m for m in catalog if m.id}
    cells, first_code = [], True
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            source = "\n\n".join(translate(p, "markdown", messages) for p in paragraphs(source))
        elif cell["cell_type"] == "code":
            lines = source.split("\n")
            for rows, col, text in reversed(comments(source)):
                chinese = translate(text, "comment", messages)
                if chinese == text:
                    continue
                mark = re.match(r"#+\s?", lines[rows[0]][col:]).group(0)
                head = lines[rows[0]][:col]
                new = [(head if i == 0 else " " * col) + mark + part
                       for i, part in enumerate(chinese.split("\n"))]
                lines[rows[0]:rows[-1] + 1] = new
            source = "\n".join(lines)
            if first_code:
                source, first_code = LANGUAGE_CELL[language] + source, False
        cells.append({**cell, "source": source.splitlines(keepends=True),
                      "metadata": {k: v for k, v in cell.get("metadata", {}).items()
                                   if k != "gpututor"}})
    return {**notebook, "cells": cells}


def dumps(notebook: dict) -> str:
    """A notebook as ``nbformat`` writes it (sorted keys, one-space indent, UTF-8 as is)."""
    return json.dumps(notebook, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def refresh(english: Path, language: str, write: bool) -> list[str]:
    """Update ``english``'s lesson catalog and build its translation; with ``write`` save both.
    Return what is out of date (empty when both files already match)."""
    notebook = json.loads(english.read_text(encoding="utf-8"))
    path = lesson_catalog(english, language)
    catalog = catalogs.read(path) if path.exists() else catalogs.new_catalog(language, path.parent.name)
    before = _po_text(catalog)
    catalog, changes = update(catalog, notebook, f"notebooks/{english.name}")
    stale = [f"{path.relative_to(ROOT)}: {c}" for c in changes]
    if _po_text(catalog) != before and not changes:
        stale.append(f"{path.relative_to(ROOT)}: entries moved")
    target = NOTEBOOKS / language / english.name
    built = dumps(build(notebook, catalog, language))
    if not target.exists() or target.read_text(encoding="utf-8") != built:
        stale.append(f"{target.relative_to(ROOT)}: differs from a fresh build")
    if write:
        if _po_text(catalog) != before:
            catalogs.write(path, catalog)
        target.write_text(built, encoding="utf-8")
    return stale


def _po_text(catalog) -> str:
    from babel.messages.pofile import write_po
    buffer = io.BytesIO()
    write_po(buffer, catalog, width=0, include_previous=True, sort_output=False)
    return buffer.getvalue().decode()


def untranslated(language: str, notebooks=None) -> list[str]:
    """Every lesson catalog entry of ``language`` that is fuzzy or empty, as ``file: English``
    (of ``notebooks``' lessons, or of every lesson)."""
    out = []
    for english in notebooks if notebooks is not None else sorted(NOTEBOOKS.glob("*.ipynb")):
        path = lesson_catalog(english, language)
        for m in catalogs.read(path) if path.exists() else []:
            if m.id and not catalogs.usable(m):
                state = "fuzzy" if m.fuzzy else "untranslated"
                out.append(f"{path.relative_to(ROOT)}: {state} {m.context or 'text'}: {str(m.id)[:70]!r}")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpututor.i18n.notebooks",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a catalog or a built notebook is out of date")
    parser.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                        help="only these English notebooks (a name such as 02_data_parallel); "
                             "all when none is named")
    args = parser.parse_args(argv)
    chosen = sorted(NOTEBOOKS.glob("*.ipynb"))
    if args.notebooks:
        names = {Path(n).stem for n in args.notebooks}
        unknown = names - {e.stem for e in chosen}
        if unknown:
            parser.error(f"no English notebook named {', '.join(sorted(unknown))}; "
                         f"allowed: {', '.join(e.stem for e in chosen)}")
        chosen = [e for e in chosen if e.stem in names]
    stale = []
    for language in TRANSLATED:
        for english in chosen:
            stale += refresh(english, language, write=not args.check)
    print("\n".join(stale) or "the catalogs and the translated notebooks are up to date")
    for line in untranslated("zh", chosen):
        print("to translate:", line)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
