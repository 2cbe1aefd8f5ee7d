"""Every work the lessons and the package cite, once, with the exact place each use relies on.

A lesson cites by key, as a Markdown link whose title names the key::

    [Korthikanti et al. 2022, §5](https://arxiv.org/abs/2205.05198 "ref:korthikanti2022-selective")

The link text is :func:`cite` of the key (authors, year and the section, table or figure), the
target the source's address; code cites with ``[ref: key]`` beside the words it supports.
``tests/test_references.py`` fails on an unknown key, an unused key, a link whose text or address
differs from its entry, and a citation written by hand without a key. ``python -m
gpututor.references`` writes ``docs/references.md``, the page a learner reads them on.

Each :class:`~.entries.Use` says where in the source (``where``) and what it supports (``supports``: the
source's sentence or number, quoted or closely paraphrased), checked against the source's text.
"""
from __future__ import annotations

from pathlib import Path

from .entries import Use, Work
from .uses_a_k import USES as _A_K
from .uses_l_o import USES as _L_O
from .uses_p_z import USES as _P_Z
from .works import WORKS

USES: dict[str, Use] = {**_A_K, **_L_O, **_P_Z}   # a key begins with its work's key: a-k, l-o, p-z


def cite(key: str) -> str:
    """The words a lesson shows for ``key``: "Korthikanti et al. 2022, §5"."""
    use = USES[key]
    source = WORKS[use.source]
    return f"{source.authors} {source.year}, {use.where}"


def link(key: str) -> str:
    """The Markdown a lesson writes for ``key`` (the link text, the source, the key)."""
    return f'[{cite(key)}]({WORKS[USES[key].source].url} "ref:{key}")'


def page() -> str:
    """``docs/references.md``: each source once, with the uses the lessons and code rely on."""
    lines = ["# References", "",
             "Every source the lessons and `gpututor` cite, with the place each citation relies "
             "on and what it says there. Written by `python -m gpututor.references` from "
             "`gpututor/references/`; do not edit by hand.", ""]
    for name, source in sorted(WORKS.items(), key=lambda kv: (kv[1].authors, kv[1].year)):
        lines += [f"## {source.authors} {source.year}: {source.title}", "",
                  f"<{source.url}>", ""]
        for key, use in sorted(USES.items()):
            if use.source == name:
                lines.append(f"- <a id=\"{key}\"></a>**{use.where}** (`{key}`): {use.supports}")
        lines.append("")
    return "\n".join(lines)


PAGE = Path(__file__).resolve().parent.parent.parent / "docs" / "references.md"


def main() -> int:
    PAGE.write_text(page(), encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


__all__ = ["USES", "WORKS", "Use", "Work", "cite", "link", "page"]
