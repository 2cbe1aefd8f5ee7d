"""Each shared formula, named list and name is written in one module only.

A maintainer who changes a fact changes it in its home; every other module calls it. Three
searches, each failing with the module that restates the fact:

- by spelling: each entry of :data:`HOMES` is a pattern that writes the fact out, and the one
  file of ``gpututor/`` where it may appear;
- by value: every formula named in ``gpututor.formulas.FORMULAS`` is evaluated at random
  inputs, and every arithmetic expression of the package is compared with it, whatever its
  names and however it is written (``tests/restatements.py``);
- by name: a module-level constant is defined in one module; the others import it (one name,
  one meaning: ``OPTIMIZERS`` cannot mean two lists).
"""
from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import gpututor
from gpututor import formulas
from restatements import Search, restatements

PACKAGE = Path(gpututor.__file__).resolve().parent

HOMES = {
    # the ring's step counts and bus factors, 2(n-1) and (n-1)/n
    "ring steps": (r"2 \* \(\s*[\w.]+ - 1\)|\(\s*[\w.]+ - 1\) / [\w.]+\b(?! \+)", "formulas.py"),
    # the α-β time of one message, α + S/β
    "alpha-beta time": (r"latency \+ [\w.]+ /", "formulas.py"),
    # 12·h² parameters per block
    "parameters per block": (r"12 \* (\w+(?:\.\w+)*) \*\* 2|12 \* (\w+) \* \2\b|13 \* \w+",
                             "formulas.py"),
    # attention's 2·2·L·s·h FLOPs per token
    "attention FLOPs": (r"2 \* 2 \* [\w.]+ \* [\w.]+ \* [\w.]+", "formulas.py"),
    # the bubble, (p-1)/(m+p-1) and (p-1)/m
    "pipeline bubble": (r"return stages - 1, |\((?:stages|p|pp) - 1\) /", "formulas.py"),
    # ring attention's messages of a K/V block per layer and step, 3·cp - 2
    "ring attention messages": (r"3 \* [\w.]+ - 2\b|3 \* \([\w.]+ - 1\)", "formulas.py"),
    # Korthikanti's activations: 34 values of s·b·h, 5·a·s/h of the scores
    "activations per layer": (r"\b34 [*+]|\b24 / [\w.]+|5 \* [\w.]+ \* [\w.]+ / |12 \* e \* ",
                              "formulas.py"),
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

# The allowed values of a formula's parameters that are not numbers (and of ``bytes_per_value``,
# a number with named values): the search tries each.
CHOICES = {"recompute": formulas.RECOMPUTE, "op": formulas.COLLECTIVES,
           "precision": tuple(formulas.BYTES_PER_VALUE),
           "optimizer": tuple(formulas.OPTIMIZER_STATE_BYTES),
           "bytes_per_value": tuple(sorted(set(formulas.BYTES_PER_VALUE.values())))}

# Restatements found in files of other areas, left for their owners: (file, formula name) ->
# why, each to be replaced by a call of the formula; the test fails once an entry is stale.
# (Empty: the last one, lessons/choosing_hardware/calibrate.py's compute x (m+p-1)/m, now calls
# formulas.bubble_to_compute_ratio.)
RESTATED_ELSEWHERE: dict[tuple[str, str], str] = {}

# Module-level names defined in more than one module, if one is ever left for its owner: name ->
# the files that define it (import the one definition, or give a different thing another name).
NAMES_DEFINED_TWICE: dict[str, set[str]] = {}

# A tensor's own bytes are PyTorch's ``t.nbytes`` (numel x element size); a file that still
# multiplies it out, if one is ever left for its owner.
TENSOR_BYTES_MULTIPLIED: set[str] = set()


def sources() -> dict[str, str]:
    """Every module's text, but gpututor/references/: it quotes the papers' words and numbers
    ("34 + 5as/h"), the sources a formula's home cites, not a second home of one."""
    return {p.relative_to(PACKAGE).as_posix(): p.read_text() for p in PACKAGE.rglob("*.py")
            if p.relative_to(PACKAGE).parts[0] != "references"}


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


# ---- by spelling ---------------------------------------------------------------------------------

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


def test_tensor_bytes_are_read_not_multiplied_out():
    found = where(r"numel\(\) \* [\w.]*element_size\(\)|element_size\(\) \* [\w.]*numel\(\)")
    assert not found - TENSOR_BYTES_MULTIPLIED, (
        "numel() x element_size() written out in " + ", ".join(sorted(found - TENSOR_BYTES_MULTIPLIED))
        + ": read t.nbytes (or measure.memory.tensor_bytes for the storages a rank holds)")
    assert not TENSOR_BYTES_MULTIPLIED - found, (
        f"no longer multiplied out: remove {sorted(TENSOR_BYTES_MULTIPLIED - found)} from the list")


# ---- by value ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def search() -> Search:
    return Search(formulas, formulas.FORMULAS, CHOICES)


def test_every_formula_is_registered():
    """What the search looks for is every public function of formulas.py."""
    public = {name for name, f in inspect.getmembers(formulas, inspect.isfunction)
              if f.__module__ == formulas.__name__ and not name.startswith("_")}
    assert public == set(formulas.FORMULAS)


def test_no_formula_is_restated_by_value(search):
    found = restatements(PACKAGE, search, skip={"formulas.py"})
    new = [f for f in found if (f.path, f.name) not in RESTATED_ELSEWHERE]
    assert not new, "formulas restated instead of called:\n" + "\n".join(
        f"  gpututor/{f.path}:{f.line}: {f.expression}  computes  {f.formula}" for f in new)
    stale = set(RESTATED_ELSEWHERE) - {(f.path, f.name) for f in found}
    assert not stale, f"fixed: remove {sorted(stale)} from RESTATED_ELSEWHERE"


BUBBLE_RESTATED = '''
def idle_share(stages, micro):
    return (stages - 1) / (micro + stages - 1)


def idle_share_from_the_busy_share(p, m):
    busy = m / (m + p - 1)
    return 1 - busy


def step_with_its_bubble(compute, p, m):   # as lessons/choosing_hardware/calibrate.py had it
    return compute * (m + p - 1) / m
'''

ALLREDUCE_RESTATED = '''
def allreduce_time(N, S, alpha, beta):
    return 2 * (N - 1) / N * S / beta + 2 * (N - 1) * alpha


def allreduce_time_on_a_link(world, size, link):
    steps = 2 * (world - 1)
    return steps * link.latency + steps * size / (world * link.bandwidth)
'''

ACTIVATIONS_RESTATED = '''
def block_bytes(cfg, batch, seq_len, tp):
    bsh, e = batch * seq_len * cfg.d_model, 4
    return e * bsh * (4 + 12 / tp) + e * cfg.n_head * batch * seq_len ** 2 / tp
'''

CALLED_OR_UNRELATED = '''
from gpututor.formulas import collective_seconds, theoretical_bubble_fraction


def bubble(p, m):
    return theoretical_bubble_fraction(p, m) * (m + p - 1)


def allreduce(world, size, link):
    return collective_seconds("all_reduce", size, world, link.bandwidth, link.latency) / 2


def unrelated(b, s, h, n):
    return 4 * b * s * h + (n - 1) / n + (b - 1) / (s + b + 1)
'''


def planted(tmp_path, search, source: str) -> dict[int, list[str]]:
    """Line -> what the search finds there, in ``source`` written to a module of its own."""
    (tmp_path / "planted.py").write_text(source)
    found = {}
    for f in restatements(tmp_path, search):
        found.setdefault(f.line, []).append(f.formula)
    return found


def test_a_bubble_written_differently_is_found(tmp_path, search):
    found = planted(tmp_path, search, BUBBLE_RESTATED)
    assert "theoretical_bubble_fraction(stages=stages, microbatches=micro)" in found[3]
    assert "theoretical_bubble_fraction(microbatches=m, stages=p)" in found[8]   # 1 - busy
    assert "1 - theoretical_bubble_fraction(microbatches=m, stages=p)" in found[7]   # busy
    assert ("1 / (1 - theoretical_bubble_fraction(microbatches=m, stages=p)) x compute"
            in found[12])   # the step stretched by the bubble: compute x 1/(1 - f)


def test_a_ring_allreduce_time_written_differently_is_found(tmp_path, search):
    found = planted(tmp_path, search, ALLREDUCE_RESTATED)
    assert ("collective_seconds(n=N, nbytes=S, bandwidth=beta, latency=alpha, op='all_reduce')"
            in found[3])
    assert ("collective_seconds(n=world, latency=link.latency, nbytes=size, "
            "bandwidth=link.bandwidth, op='all_reduce')" in found[8])


def test_korthikantis_count_written_with_other_names_is_found(tmp_path, search):
    """How plan/as_built.py counted a block's activations before it called the formula."""
    found = planted(tmp_path, search, ACTIVATIONS_RESTATED)
    assert any(f.startswith("activation_bytes_per_layer(") and "bytes_per_value=4" in f and
               "dropout=False" in f and "recompute='none'" in f for f in found[4])


def test_calling_a_formula_or_plain_arithmetic_is_not_a_restatement(tmp_path, search):
    assert planted(tmp_path, search, CALLED_OR_UNRELATED) == {}


# ---- by name -------------------------------------------------------------------------------------

def module_constants(text: str) -> set[str]:
    """The upper-case names a module defines at its top level (imports are not definitions)."""
    names = set()
    for node in ast.parse(text).body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        names |= {t.id for target in targets for t in ast.walk(target)
                  if isinstance(t, ast.Name) and t.id.isupper() and len(t.id) > 1}
    return names


def test_a_name_is_defined_in_one_module():
    defined: dict[str, set[str]] = {}
    for path, text in sources().items():
        for name in module_constants(text):
            defined.setdefault(name, set()).add(path)
    twice = {name: files for name, files in defined.items() if len(files) > 1}
    new = {name: sorted(files) for name, files in twice.items()
           if not files <= NAMES_DEFINED_TWICE.get(name, set())}
    assert not new, f"defined in more than one module (import the one, or rename): {new}"
    stale = set(NAMES_DEFINED_TWICE) - set(twice)
    assert not stale, f"fixed: remove {sorted(stale)} from NAMES_DEFINED_TWICE"


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
