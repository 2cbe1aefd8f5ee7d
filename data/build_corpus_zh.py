"""Rebuild data/corpus_zh.txt: classical Chinese poems from Debian's ``fortunes-zh`` package.

The package (2.98, GPL-3.0-or-later, see data/README.md) ships two collections as fortune files:
``tang300`` (Three Hundred Tang Poems, 唐诗三百首) and ``song100`` (a hundred Song lyrics,
宋词一百首). Each entry is a title line and an author line, coloured with ANSI escape codes, then
the poem; entries are separated by ``%`` lines. This keeps the text, drops the colour codes and
the separators, and puts a blank line between poems.

    apt-get download fortunes-zh && dpkg-deb -x fortunes-zh_*.deb /tmp/fortunes-zh
    python data/build_corpus_zh.py /tmp/fortunes-zh/usr/share/games/fortunes

(or, with the package installed: ``python data/build_corpus_zh.py /usr/share/games/fortunes``).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

COLLECTIONS = ("tang300", "song100")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def poems(path: Path) -> list[str]:
    text = ANSI.sub("", path.read_text(encoding="utf-8"))
    entries = [e.strip() for e in re.split(r"^%\s*$", text, flags=re.M)]
    return [e for e in entries if e]


def main(folder: str) -> None:
    out = []
    for name in COLLECTIONS:
        out.extend(poems(Path(folder) / name))
    target = Path(__file__).resolve().parent / "corpus_zh.txt"
    target.write_text("\n\n".join(out) + "\n", encoding="utf-8")
    print(f"{target}: {len(out)} poems, {target.stat().st_size:,} bytes, "
          f"{len(set(target.read_text(encoding='utf-8')))} distinct characters")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/games/fortunes")
