"""Citations have one home: ``gpututor/references/``.

A lesson cites as ``[text](url "ref:key")`` and code as ``[ref: key]``; each key is known, each
entry is used, a link's text and address are its entry's, and no citation is written by hand
("Korthikanti et al. 2022 §4.2" with no key beside it: the kind that drifted to a wrong section).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpututor import references
from gpututor.references import USES, WORKS, cite, uses_a_k, uses_l_o, uses_p_z

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r'\[([^\]]*)\]\(([^)\s]*) "ref:([^"]*)"\)')
CODE_REF = re.compile(r"\[ref: ?([^\]]*)\]")
# a citation by hand: "Someone et al. 2022", "Someone et al. (2022", or a known source's
# authors and year ("Dao 2023", "Young 1974")
BY_HAND = re.compile(r"[A-Z][\w\-]+ et al\.?,? \(?(?:19|20)\d\d|" + "|".join(
    rf"\b{re.escape(s.authors)},? \(?{s.year}\b" for s in WORKS.values()))

# files whose citations are still written by hand: issue 42 converts them one lesson at a time;
# this list only shrinks (a file here with no citation by hand fails, to be taken off it)
NOT_YET: set[str] = set()


def texts() -> dict[str, str]:
    """Every text a citation may sit in: each notebook (en and zh; its cells' sources) and each
    module of the package."""
    out = {}
    for path in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        out[str(path.relative_to(ROOT))] = "\n".join("".join(c["source"]) for c in cells)
    for path in sorted((ROOT / "gpututor").rglob("*.py")):
        if "references" not in path.relative_to(ROOT / "gpututor").parts:
            out[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    return out


def english_of(name: str) -> str:
    return name.replace("notebooks/zh/", "notebooks/")


def problems(found: dict[str, str]) -> tuple[list[str], set[str]]:
    """What is wrong with the citations in ``found`` (name -> text), and the keys they use."""
    wrong, used = [], set()
    for name, text in found.items():
        for words, url, key in LINK.findall(text):
            used.add(key)
            if key not in USES:
                wrong.append(f"{name}: unknown key {key!r} (known: gpututor/references/)")
                continue
            if words != cite(key):
                wrong.append(f"{name}: the link to {key} reads {words!r}, its entry says {cite(key)!r}")
            if url != WORKS[USES[key].source].url:
                wrong.append(f"{name}: the link to {key} goes to {url}, its source is "
                             f"{WORKS[USES[key].source].url}")
        for key in CODE_REF.findall(text):
            used.add(key)
            if key not in USES:
                wrong.append(f"{name}: unknown key {key!r} in [ref: ...]")
        if english_of(name) in NOT_YET:
            continue
        lines = LINK.sub("", text).splitlines()
        for i, line in enumerate(lines):
            near = "\n".join(lines[max(0, i - 2):i + 3])
            for match in BY_HAND.finditer(line):
                if not name.endswith(".py") or "[ref:" not in near:
                    wrong.append(f"{name}: {match.group(0)!r} cited by hand: write "
                                 f"references.link(key) (or [ref: key] in code)")
    return wrong, used


def test_every_citation_has_a_known_key_and_reads_as_its_entry():
    wrong, _ = problems(texts())
    assert not wrong, "\n".join(wrong)


def test_every_entry_is_used_and_every_source_has_a_use():
    _, used = problems(texts())
    assert not set(USES) - used, f"entries no lesson or module cites: {sorted(set(USES) - used)}"
    assert not set(WORKS) - {u.source for u in USES.values()}, "a source nothing uses"
    for key, use in USES.items():
        assert use.source in WORKS, f"{key}: unknown source {use.source!r}"
        assert use.where.strip() and len(use.supports) > 40, f"{key}: says too little"


def test_the_not_yet_list_only_shrinks():
    found = texts()
    done = [name for name in NOT_YET
            if not any(BY_HAND.search(LINK.sub("", text)) for n, text in found.items()
                       if english_of(n) == name)]
    assert not done, f"no citation by hand is left in {done}: take them off NOT_YET"


@pytest.mark.parametrize("planted, says", [
    ('[Dao et al. 2022, §3.1](https://arxiv.org/abs/2205.14135 "ref:dao2022-nope")', "unknown key"),
    ('[Dao et al. 2022, §4](https://arxiv.org/abs/2205.14135 "ref:dao2022-io")', "its entry says"),
    ('[Dao et al. 2022, §3.1](https://example.org "ref:dao2022-io")', "its source is"),
    ("attention [ref: flash-nope]", "unknown key"),
    ("as Korthikanti et al. 2022 §4.2 shows", "cited by hand"),
    ("FlashAttention-2 (Dao 2023) keeps one statistic", "cited by hand"),
])
def test_a_planted_wrong_citation_is_found(planted, says):
    wrong, _ = problems({"notebooks/zz_planted.ipynb": planted})
    assert any(says in w for w in wrong), wrong


def test_a_right_citation_passes():
    text = f"the core is recomputed ({references.link('korthikanti2022-selective')})"
    assert problems({"notebooks/zz_planted.ipynb": text}) == ([], {"korthikanti2022-selective"})
    code = "# Korthikanti et al. 2022, §5 [ref: korthikanti2022-selective]"
    assert problems({"gpututor/zz.py": code})[0] == []


def test_the_references_page_is_fresh():
    assert references.PAGE.read_text(encoding="utf-8") == references.page(), \
        "docs/references.md is stale: run python -m gpututor.references"


def test_each_use_is_in_its_file_by_key_and_once():
    files = (uses_a_k.USES, uses_l_o.USES, uses_p_z.USES)
    assert sum(len(f) for f in files) == len(USES), "a key in two files"
    assert all("a" <= k[0] <= "k" for k in uses_a_k.USES), "a key beginning l-z in uses_a_k"
    assert all("l" <= k[0] <= "o" for k in uses_l_o.USES), "a key not beginning l-o in uses_l_o"
    assert all("p" <= k[0] <= "z" for k in uses_p_z.USES), "a key not beginning p-z in uses_p_z"
    assert all(k.startswith(u.source) for k, u in USES.items()), \
        [k for k, u in USES.items() if not k.startswith(u.source)]
