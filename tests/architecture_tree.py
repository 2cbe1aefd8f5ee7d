"""The package's tree as ``docs/architecture.md`` draws it, made from the code: every folder and
module of ``gpututor/`` with the first line of its docstring. ``tests/test_architecture.py``
fails while the doc's tree differs from this one; ``python tests/architecture_tree.py`` redraws
the doc's tree (between its ``<!-- tree -->`` and ``<!-- /tree -->`` lines)."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE, DOC = ROOT / "gpututor", ROOT / "docs" / "architecture.md"
START, END = "<!-- tree -->", "<!-- /tree -->"


def summary(path: Path, width: int = 96) -> str:
    """The first sentence of a module's docstring, cut at a word to ``width`` characters."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    sentence = " ".join(doc.strip().split("\n\n")[0].split()).split(". ")[0].rstrip(".")
    if len(sentence) > width:
        sentence = sentence[:width].rsplit(" ", 1)[0] + " …"
    return sentence


def tree() -> str:
    """The tree, one line per folder or module: ``name`` then ``# what its docstring says``."""
    lines = ["gpututor/"]

    def walk(folder: Path, depth: int) -> None:
        entries = sorted(p for p in folder.iterdir()
                         if (p.is_dir() and (p / "__init__.py").exists())
                         or (p.suffix == ".py" and p.name != "__init__.py"))
        for entry in entries:
            indent = "    " * depth
            if entry.is_dir():
                lines.append(f"{indent}{entry.name}/".ljust(44) + f"# {summary(entry / '__init__.py')}")
                walk(entry, depth + 1)
            else:
                lines.append(f"{indent}{entry.name}".ljust(44) + f"# {summary(entry)}")

    walk(PACKAGE, 1)
    return "\n".join(line.rstrip() for line in lines)


def drawn() -> str:
    """The tree as the doc draws it now (the fenced block between the markers)."""
    text = DOC.read_text(encoding="utf-8")
    block = text[text.index(START) + len(START):text.index(END)]
    return block.strip().removeprefix("```text").removesuffix("```").strip("\n")


def redraw() -> None:
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n```text\n{tree()}\n```\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    redraw()
    sys.exit(0)
