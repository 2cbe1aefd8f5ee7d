"""Rebuild data/corpus.txt: English prose from the docstrings of Python's standard library.

The text ships with every CPython install and is covered by the PSF License (see data/README.md).
Run with the Python you want to sample from:  python data/build_corpus.py
The output is deterministic for a given Python version: modules sorted by path, docstrings in
source order, non-ASCII lines dropped, duplicate docstrings kept once.
"""
from __future__ import annotations

import ast
import inspect
import sysconfig
from pathlib import Path

TARGET_BYTES = 1_000_000
MIN_DOC_CHARS = 200          # short docstrings ("Return x.") teach the model little
SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "site-packages", "turtledemo", "__pycache__"}


def stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in root.rglob("*.py") if not SKIP_DIRS & set(p.relative_to(root).parts))


def docstrings(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return []
    nodes = [tree] + [n for n in ast.walk(tree)
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    docs = []
    for node in nodes:
        doc = ast.get_docstring(node, clean=True)
        if doc and len(doc) >= MIN_DOC_CHARS:
            lines = [ln.rstrip() for ln in inspect.cleandoc(doc).splitlines() if ln.isascii()]
            docs.append("\n".join(lines).strip())
    return docs


def build(out: Path) -> int:
    seen, parts, size = set(), [], 0
    for path in stdlib_files():
        for doc in docstrings(path):
            if doc in seen:
                continue
            seen.add(doc)
            parts.append(doc)
            size += len(doc) + 2
        if size >= TARGET_BYTES:
            break
    text = "\n\n".join(parts) + "\n"
    out.write_text(text, encoding="ascii")
    return len(text)


if __name__ == "__main__":
    n = build(Path(__file__).with_name("corpus.txt"))
    print(f"wrote data/corpus.txt: {n} bytes")
