"""What English each Chinese markdown cell translates, recorded in the cell (gettext's "fuzzy").

Each markdown cell of a lesson's zh twin keeps, in ``metadata["gpututor"]["translates"]``, a
short hash of the English cell it translates (the English lesson's cell at the same index). When
the English cell changes, the hash no longer matches and ``tests/test_zh.py`` fails, naming the
twin and the cell to review. After reviewing (and fixing) the Chinese cell, record it:

    python tests/zh_drift.py --reviewed notebooks/zh/03_sharding.ipynb [--cells 6,7]

(without ``--cells``: every markdown cell of that twin). Code cells need no record: they must
equal the English ones character for character (``tests/test_zh.py``).
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
KEY = "gpututor"


def english_hash(source: str) -> str:
    """A short, stable hash of an English cell's text (trailing spaces and newlines ignored)."""
    text = "\n".join(line.rstrip() for line in source.strip().splitlines())
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def english_twin(chinese: Path) -> Path:
    return ROOT / "notebooks" / chinese.name


def stale_cells(chinese: Path, english: Path | None = None) -> list[int]:
    """Indices of the twin's markdown cells whose recorded English is not the English now
    (``english``: the English lesson, by default the one of the same name in notebooks/)."""
    en = nbformat.read(english or english_twin(chinese), as_version=4)
    zh = nbformat.read(chinese, as_version=4)
    return [i for i, (e, z) in enumerate(zip(en.cells, zh.cells))
            if z.cell_type == "markdown"
            and z.metadata.get(KEY, {}).get("translates") != english_hash(e.source)]


def record(chinese: Path, cells: list[int] | None = None) -> list[int]:
    """Record the English each of ``cells`` (default: every markdown cell) now translates;
    returns the cells recorded."""
    en = nbformat.read(english_twin(chinese), as_version=4)
    zh = nbformat.read(chinese, as_version=4)
    if len(en.cells) != len(zh.cells):
        raise SystemExit(f"{chinese}: {len(zh.cells)} cells, the English lesson has "
                         f"{len(en.cells)}: give the twin the same cells first")
    wanted = [i for i, c in enumerate(zh.cells) if c.cell_type == "markdown"] \
        if cells is None else cells
    done = []
    for i in wanted:
        if zh.cells[i].cell_type != "markdown":
            raise SystemExit(f"{chinese}: cell {i} is a {zh.cells[i].cell_type} cell; only "
                             "markdown cells record what they translate")
        zh.cells[i].metadata.setdefault(KEY, {})["translates"] = english_hash(en.cells[i].source)
        done.append(i)
    chinese.write_text(nbformat.writes(zh) + "\n", encoding="utf-8")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reviewed", nargs="+", type=Path, required=True,
                        help="the zh twins whose cells were reviewed against the English")
    parser.add_argument("--cells", default=None,
                        help="comma-separated cell indices (default: every markdown cell)")
    args = parser.parse_args(argv)
    cells = None if args.cells is None else [int(c) for c in args.cells.split(",")]
    for path in args.reviewed:
        done = record(path, cells)
        print(f"{path}: recorded {len(done)} markdown cell(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
