"""The Chinese lessons (``notebooks/zh/``) keep in step with the English ones.

Every English lesson has a zh twin, built from it and the lesson's catalog
(``gpututor/lessons/<name>/zh.po``) by ``python -m gpututor.i18n.notebooks``: the same cells in
the same order, the same code (comments translated), the first code cell with
``set_language("zh")`` in front (so widgets, figures and checkers speak Chinese). Most of each
twin's markdown is Chinese, its Solutions hold the same code, and it is stored stripped. One zh
lesson is also executed by nbval (``tests/test_exercises.py``); the others run the same code.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from test_exercises import solution_items

ROOT = Path(__file__).resolve().parent.parent
ENGLISH = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHINESE = sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))
PREAMBLE = 'from gpututor.ui import set_language\nset_language("zh")   # 控件、图表和练习检查使用中文\n\n'
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
LATIN = re.compile(r"[A-Za-z]")
NOT_PROSE = re.compile(r"```.*?```|`[^`]*`|\$[^$]*\$|https?://\S+|<[^>]+>|\([^)]*\.(?:py|md|ipynb)\)",
                       re.S)


def chinese_share(markdown: str) -> float:
    """Share of the prose's letters that are Chinese characters (code, math, links left out);
    a Chinese character counts as much as 3 Latin letters (a short word)."""
    prose = NOT_PROSE.sub(" ", markdown)
    cjk, latin = len(CJK.findall(prose)), len(LATIN.findall(prose))
    return 1.0 if cjk + latin == 0 else 3 * cjk / (3 * cjk + latin)


def code_of(source: str) -> list[str]:
    """A code cell's non-blank lines without their comments (the comments are translated)."""
    import io
    import tokenize
    lines = source.split("\n")
    python = "\n".join("" if re.match(r"\s*[%!]", line) else line for line in lines)
    for token in tokenize.generate_tokens(io.StringIO(python).readline):
        if token.type == tokenize.COMMENT and not token.string.startswith("# NBVAL"):
            row, col = token.start
            lines[row - 1] = lines[row - 1][:col]
    return [line.rstrip() for line in lines if line.strip()]


def test_every_english_lesson_has_a_chinese_twin_and_no_other():
    assert [p.name for p in CHINESE] == [p.name for p in ENGLISH]


@pytest.mark.parametrize("english", ENGLISH, ids=lambda p: p.stem)
def test_the_twin_has_the_same_cells_and_the_same_code(english: Path):
    zh_path = ROOT / "notebooks" / "zh" / english.name
    en, zh = nbformat.read(english, as_version=4), nbformat.read(zh_path, as_version=4)
    assert [c.cell_type for c in zh.cells] == [c.cell_type for c in en.cells], \
        f"{zh_path.name}: the cells differ in number or kind from the English lesson"
    codes = [(e.source, z.source) for e, z in zip(en.cells, zh.cells) if e.cell_type == "code"]
    first_en, first_zh = codes[0]
    assert first_zh.startswith(PREAMBLE) and code_of(first_zh[len(PREAMBLE):]) == code_of(first_en), \
        f"{zh_path.name}: the first code cell must be the English one after set_language('zh')"
    for index, (e, z) in enumerate(codes[1:], start=2):
        assert code_of(z) == code_of(e), f"{zh_path.name}: code cell {index} differs from the English lesson's"
    # the solutions' code, its comments translated (a comment is prose: the learner reads it)
    assert [code_of(c) for c in solution_items(zh)] == [code_of(c) for c in solution_items(en)], \
        f"{zh_path.name}: the solutions' code differs"


@pytest.mark.parametrize("chinese", CHINESE, ids=lambda p: p.stem)
def test_most_of_the_markdown_is_chinese(chinese: Path):
    cells = [c.source for c in nbformat.read(chinese, as_version=4).cells if c.cell_type == "markdown"]
    shares = [chinese_share(text) for text in cells]
    mostly = sum(s >= 0.5 for s in shares) / len(shares)
    assert mostly >= 0.8, (f"{chinese.name}: only {mostly:.0%} of the markdown cells are mostly "
                           f"Chinese (least: {min(shares):.0%})")


def test_the_share_counter_tells_english_from_chinese():
    assert chinese_share("Data parallel copies the model onto every device.") < 0.2
    assert chinese_share("数据并行把模型复制到每个设备上，每个设备各算一份数据 (`ddp`)。") > 0.9


def _setup_commands(readme: Path) -> list[str]:
    block = re.search(r"```bash\n(.*?)```", readme.read_text(encoding="utf-8"), re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def test_the_chinese_readme_gives_the_same_two_commands_and_is_linked():
    assert _setup_commands(ROOT / "README.zh-CN.md") == _setup_commands(ROOT / "README.md") \
        == ["make lab", "make test"]
    assert "(README.zh-CN.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def _readme_parts(path: Path) -> dict:
    """What README.md and its Chinese twin must share: the number of sections and subsections,
    every code block's code (comments aside), every file or folder linked, every lesson row."""
    text = path.read_text(encoding="utf-8")
    blocks = re.findall(r"```\w*\n(.*?)```", text, re.S)
    code = [[line.split("#")[0].rstrip() for line in block.splitlines()
             if line.split("#")[0].strip()] for block in blocks]
    links = sorted(set(re.findall(r"\]\(((?:docs|notebooks)/[^)#]+)\)", text))
                   - {"notebooks/zh/glossary.md"})   # the Chinese lessons' glossary: zh only
    return {"sections": len(re.findall(r"^## ", text, re.M)),
            "subsections": len(re.findall(r"^### ", text, re.M)), "code": code,
            "links": [link.replace("notebooks/zh/", "notebooks/") for link in links],
            "lessons": re.findall(r"^\| (\d\d\w?) · ", text, re.M)}


def test_the_chinese_readme_carries_what_the_english_one_does():
    """README.zh-CN.md has README.md's sections, code, links and lesson table: a section, a
    command or a lesson added to one and not the other fails here (issue 32)."""
    english, chinese = _readme_parts(ROOT / "README.md"), _readme_parts(ROOT / "README.zh-CN.md")
    for part in english:
        assert chinese[part] == english[part], (
            f"README.zh-CN.md differs from README.md in its {part}: {chinese[part]!r} against "
            f"{english[part]!r}")


@pytest.mark.parametrize("english", ENGLISH, ids=lambda p: p.stem)
def test_each_chinese_lesson_is_its_fresh_build(english: Path):
    """The zh twin and the lesson's catalog are what ``python -m gpututor.i18n.notebooks``
    makes from the English notebook: a code change is made once, in English."""
    from gpututor.i18n.notebooks import refresh
    stale = refresh(english, "zh", write=False)
    assert not stale, "run: python -m gpututor.i18n.notebooks (then translate what it lists)\n" + \
        "\n".join(stale)


def test_every_entry_of_the_lesson_catalogs_is_translated():
    """A fuzzy entry (its English changed) or an empty one is built in English: name each."""
    from gpututor.i18n.notebooks import untranslated
    missing = untranslated("zh")
    assert not missing, "translate these (Poedit, or any .po editor), then run python -m " \
        "gpututor.i18n.notebooks:\n" + "\n".join(missing)


def test_editing_an_english_paragraph_marks_exactly_that_entry_fuzzy():
    import json
    from gpututor.i18n import catalogs
    from gpututor.i18n.notebooks import build, lesson_catalog, paragraphs, update
    english = ENGLISH[3]
    notebook = json.loads(english.read_text(encoding="utf-8"))
    catalog = catalogs.read(lesson_catalog(english, "zh"))
    index = next(i for i, c in enumerate(notebook["cells"]) if c["cell_type"] == "markdown"
                 and len(paragraphs("".join(c["source"]))) > 1)
    first, *rest = paragraphs("".join(notebook["cells"][index]["source"]))
    edited = first + " One more English sentence."
    notebook["cells"][index]["source"] = "\n\n".join([edited, *rest])
    merged, changes = update(catalog, notebook, english.name)
    before = {(m.context, m.id): (m.string, m.fuzzy) for m in catalog if m.id}
    after = {(m.context, m.id): (m.string, m.fuzzy) for m in merged if m.id}
    assert changes == [f"fuzzy: cell {index} markdown: {edited[:60]!r}"]
    assert after[("markdown", edited)] == (before[("markdown", first)][0], True)
    assert {k: v for k, v in after.items() if k != ("markdown", edited)} == \
        {k: v for k, v in before.items() if k != ("markdown", first)}
    built = paragraphs("".join(build(notebook, merged, "zh")["cells"][index]["source"]))
    assert built[0] == edited                   # a fuzzy entry is built in English
    assert built[1:] == [catalog.get(p, context="markdown").string for p in rest]


def _words_the_glossary_retires() -> set[str]:
    """Every X of the glossary's '不写“X”' notes: a variant the lessons no longer use."""
    glossary = ROOT / "notebooks" / "zh" / "glossary.md"
    return set(re.findall(r"不写“([^”]+)”", glossary.read_text(encoding="utf-8")))


def test_the_chinese_lessons_and_tables_use_the_glossary_terms():
    retired = _words_the_glossary_retires()
    assert {"词元", "批大小", "之字形", "拐点", "进程网格"} <= retired
    from gpututor.i18n import ZH
    texts = {p.name: "\n".join(c.source for c in nbformat.read(p, as_version=4).cells
                               if c.cell_type == "markdown") for p in CHINESE}
    texts["gpututor/**/zh.po"] = "\n".join(ZH.values())
    texts["README.zh-CN.md"] = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    found = {(where, word) for where, text in texts.items() for word in retired if word in text}
    assert not found, f"retired variants (notebooks/zh/glossary.md) still used: {sorted(found)}"
