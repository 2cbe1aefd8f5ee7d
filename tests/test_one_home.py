"""Each shared formula and named list is written in one module only.

A maintainer who changes a fact changes it in its home; every other module calls it. Each entry
below is a pattern that writes the fact out, and the one file of ``gpututor/`` where it may
appear. A second module that restates it fails here, named.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import gpututor
from gpututor import formulas

PACKAGE = Path(gpututor.__file__).resolve().parent

HOMES = {
    # the ring's step counts and bus factors, 2(n-1) and (n-1)/n
    "ring steps": (r"2 \* \(\s*[\w.]+ - 1\)|\(\s*[\w.]+ - 1\) / [\w.]+\b(?! \+)", "formulas.py"),
    # the α-β time of a collective, k·(α + S/(n·β))
    "alpha-beta time": (r"latency \+ nbytes / \(", "formulas.py"),
    # 12·h² parameters per block
    "parameters per block": (r"12 \* (\w+(?:\.\w+)*) \*\* 2|12 \* (\w+) \* \2\b|13 \* \w+",
                             "formulas.py"),
    # attention's 2·2·L·s·h FLOPs per token
    "attention FLOPs": (r"2 \* 2 \* [\w.]+ \* [\w.]+ \* [\w.]+", "formulas.py"),
    # the bubble, (p-1)/(m+p-1) and (p-1)/m
    "pipeline bubble": (r"return stages - 1, |\((?:stages|p|pp) - 1\) /", "formulas.py"),
    # ring attention's messages of a K/V block per layer and step, 3·cp - 2
    "ring attention messages": (r"3 \* [\w.]+ - 2\b|3 \* \([\w.]+ - 1\)", "formulas.py"),
    # bytes per value and per optimizer state
    "bytes per value": (r'"fp32": 4, "bf16": 2|4 if [\w.]*precision == .fp32. else 2',
                        "formulas.py"),
    "optimizer state bytes": (r'"sgd": 4\}|4 if [\w.]*optimizer == .sgd. else 8', "formulas.py"),
    # precision -> dtype
    "precision to dtype": (r"\"bf16\": torch\.bfloat16|torch\.bfloat16 if [\w.]*precision",
                           "config.py"),
    # a corpus's vocabulary size
    "vocabulary of a corpus": (r"\)\[0\]\.vocab_size|tokenizer\.vocab_size", "data.py"),
    # the named lists
    "recomputation policies": (r"^RECOMPUTE\s*=", "formulas.py"),
    "optimizers a run trains with": (r"^OPTIMIZERS\s*=\s*\(", "config.py"),
    "the GPT's attention": (r"^ATTENTION\s*=", "config.py"),
    "precision names": (r"^PRECISIONS\s*=", "config.py"),
}


def sources() -> dict[str, str]:
    return {str(p.relative_to(PACKAGE)): p.read_text() for p in PACKAGE.rglob("*.py")}


def code_lines(text: str) -> str:
    """The text without comments and docstrings: a formula in prose is an explanation, not a
    second home."""
    out, in_doc = [], None
    for line in text.splitlines():
        stripped = line.strip()
        if in_doc:
            if in_doc in stripped:
                in_doc = None
            continue
        for quote in ('"""', "'''"):
            if stripped.startswith(quote) or stripped.startswith("r" + quote):
                if stripped.count(quote) == 1:
                    in_doc = quote
                stripped = None
                break
        if stripped is None:
            continue
        out.append(line.split("  #")[0] if not stripped.startswith("#") else "")
    return "\n".join(out)


def where(pattern: str) -> set[str]:
    rx = re.compile(pattern, re.MULTILINE)
    return {name for name, text in sources().items() if rx.search(code_lines(text))}


@pytest.mark.parametrize("fact", sorted(HOMES))
def test_each_fact_is_written_in_its_home_only(fact):
    pattern, home = HOMES[fact]
    found = where(pattern)
    assert home in found, f"{fact}: its home gpututor/{home} no longer writes it (pattern moved?)"
    others = sorted(found - {home})
    assert not others, (f"{fact} is written out in {', '.join('gpututor/' + o for o in others)} "
                        f"too: call gpututor/{home} instead")


def test_the_search_sees_a_restated_formula(tmp_path, monkeypatch):
    (tmp_path / "formulas.py").write_text("def f(n):\n    return 2 * (n - 1)\n")
    (tmp_path / "copy.py").write_text('"""2 * (n - 1) in prose is fine"""\n'
                                      "t = 2 * (world - 1) * x  # but not in code\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path)
    assert where(HOMES["ring steps"][0]) == {"formulas.py", "copy.py"}


def test_derived_quantities_agree_with_their_definition():
    for p, m, v in ((2, 8, 1), (4, 4, 1), (4, 4, 2), (8, 32, 1)):
        f = formulas.theoretical_bubble_fraction(p, m, v)
        assert formulas.bubble_to_compute_ratio(p, m, v) == pytest.approx(f / (1 - f))
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        for n in (2, 3, 8):
            # what a rank sends: its steps x S/n, i.e. the bus factor x S
            assert formulas.collective_seconds(op, 1e6, n, 1e9) == \
                pytest.approx(formulas.bus_factor(op, n) * 1e6 / 1e9)
    assert formulas.training_flops_per_token(1e6, 2, 64, 96, "full") == \
        pytest.approx(4 / 3 * formulas.training_flops_per_token(1e6, 2, 64, 96))


def test_a_spec_gets_its_own_corpus_vocabulary():
    from gpututor import RunSpec
    from gpututor.data import load_corpus
    from gpututor.lessons.choosing_hardware.calibrate import step_flops
    from gpututor.models import config_of

    en, zh = RunSpec(world_size=1, strategy="single"), RunSpec(world_size=1, strategy="single",
                                                              corpus="zh")
    assert config_of(zh).vocab_size == load_corpus("zh")[0].vocab_size != \
        config_of(en).vocab_size
    # the calibration's FLOPs count the Chinese corpus's head for a Chinese run (it read the
    # English corpus's vocabulary for every run before)
    assert step_flops(zh) > step_flops(en)
