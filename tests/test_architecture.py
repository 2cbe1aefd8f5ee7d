"""The package's imports flow one way, and a rank imports no plotting or widget code.

An AST walk reads every ``import`` in ``gpututor/`` (function-local ones too: a circle hidden
inside a function is still a circle) and checks two things:

- there is no import circle, counting that importing ``a.b.c`` first runs ``a/b/__init__.py``;
- each module imports only from rooms below its own (or from its own room):

      lessons  ->  ui  ->  runtime  ->  plan  ->  parallel, precision, compression  ->  measure
      ->  models  ->  data, moe  ->  config, hardware, catalog, formulas  ->  i18n  ->  checks, files

Within ``lessons``, a lesson's folder imports only itself and ``lessons.common``, and a module a
rank may unpickle (every lesson module without ``figures`` in its name) imports no plotting or
widget code and nothing from ``ui``, however indirectly.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

from gpututor import RunSpec, launch

PACKAGE = Path(__file__).resolve().parent.parent / "gpututor"

# room -> level; a module may import rooms of a lower level, or its own room
ROOMS = {
    "references": -1,   # every source cited, once (data only)
    "checks": -1,   # the validators everything below config uses
    "files": -1,    # writing a file whole or not at all (os.replace)
    "i18n": -0.5,   # the tables of words, below everything that speaks to the learner
    "model_sizes": -0.25,   # the sizes a spec names (no torch): below config, which checks them
    "config": 0, "hardware": 0, "catalog": 0, "formulas": 0,
    "optional": 0,   # optional packages (torchao) imported quietly
    "data": 1, "moe": 1,   # moe.py: the MoE layer, which models.py builds into the GPT
    "models": 2, "attention": 2,
    "measure": 3,
    "parallel": 4, "precision": 4, "compression": 4,
    "plan": 4.5,   # the planner reads what each registered strategy says about itself
    "runtime": 5,
    "ui": 5.5,      # what every lesson shows: the run panel, live figures, comparisons
    "lessons": 6,   # a folder per lesson (and common/): runs, checkers, the lesson's figures
    "": 7, "__main__": 7,   # the package's front door: gpututor/__init__.py and __main__.py
}


def modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name (without the leading ``gpututor.``) -> (file, is a package's __init__)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


def imports_of(name: str, path: Path, is_package: bool, known) -> set[str]:
    """The modules of the package that ``name`` imports anywhere in its file."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.split(".")[0] == "gpututor"]
            targets = [t.partition(".")[2] for t in targets]
        elif isinstance(node, ast.ImportFrom):
            if node.level:   # relative: from the module's package, up level - 1
                base = name.split(".") if name else []
                if not is_package:
                    base = base[:-1]
                base = base[:len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").split(".")[0] == "gpututor":
                origin = node.module.partition(".")[2]
            else:
                continue
            for alias in node.names:   # "from .x import y": y may be a module of its own
                sub = f"{origin}.{alias.name}" if origin else alias.name
                targets.append(sub if sub in known else origin)
        for target in targets:
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in known and target != name:
                out.add(target)
    return out


def import_graph(with_parents: bool = True) -> dict[str, set[str]]:
    """Module -> the modules it imports; ``with_parents`` adds the packages whose
    ``__init__`` runs first (for circles; the flow rule reads what a file names)."""
    known = modules()
    graph = {name: imports_of(name, path, pkg, known) for name, (path, pkg) in known.items()}
    if not with_parents:
        return graph
    for name in graph:   # importing a.b.c runs a/__init__ and a/b/__init__ first
        for target in list(graph[name]):
            parts = target.split(".")
            for k in range(1, len(parts)):
                parent = ".".join(parts[:k])
                if parent in graph and parent != name and not name.startswith(parent + "."):
                    graph[name].add(parent)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def room(name: str) -> str:
    """The room a module belongs to: the longest entry of ROOMS its name starts with."""
    parts = name.split(".") if name else [""]
    for k in range(len(parts), 0, -1):
        candidate = ".".join(parts[:k])
        if candidate in ROOMS:
            return candidate
    raise AssertionError(f"gpututor.{name} is in no room of ROOMS: add it there")


def test_the_walk_sees_function_local_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from ..launcher import launch\n")
    assert imports_of("pkg.m", source, False, {"launcher", "pkg", "pkg.m"}) == {"launcher"}


def test_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_in_the_package():
    found = circles(import_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def folder_graph() -> dict[str, set[str]]:
    """Top-level folder (or module) of the package -> those its modules import."""
    graph: dict[str, set[str]] = {}
    for name, targets in import_graph(with_parents=False).items():
        mine = name.split(".")[0]
        graph.setdefault(mine, set()).update(t.split(".")[0] for t in targets
                                             if t.split(".")[0] != mine)
    return graph


def test_folder_circle_finder_sees_two_folders_importing_each_other():
    assert circles({"measure": {"plan"}, "plan": {"measure"}, "ui": {"plan"}}) == \
        [["measure", "plan"]]


def test_no_folder_imports_a_folder_that_imports_it_back():
    found = circles(folder_graph())
    assert not found, "folders importing each other: " + "; ".join(" <-> ".join(c) for c in found)


def test_imports_flow_one_way():
    wrong = []
    for name, targets in import_graph(with_parents=False).items():
        mine = room(name)
        for target in targets:
            theirs = room(target)
            same_room = theirs == mine or target.startswith(mine + ".") if mine else True
            if mine and not (same_room or ROOMS[theirs] < ROOMS[mine]):
                wrong.append(f"gpututor.{name} ({mine}) imports gpututor.{target} ({theirs})")
    assert not wrong, "imports against the flow:\n" + "\n".join(sorted(wrong))


def _rank_modules_task(spec, rank, world_size, device, emit):
    """In a rank: train as the worker does, load every lesson helper a task may come from, then
    report which front-end libraries the rank has imported."""
    import importlib
    import pkgutil
    import sys

    import gpututor.lessons
    from gpututor.runtime.worker import train

    train(spec, rank, world_size, device, emit=lambda record: None)
    for info in pkgutil.walk_packages(gpututor.lessons.__path__, "gpututor.lessons."):
        if "figures" not in info.name.rsplit(".", 1)[-1]:
            importlib.import_module(info.name)
    emit({"step": 0, "front_end": sorted(m for m in sys.modules if m.split(".")[0] in
                                          ("plotly", "ipywidgets", "IPython", "anywidget")
                                          or m.startswith("gpututor.ui"))})


def lesson_of(name: str) -> str | None:
    """``lessons.sharding.figures`` -> ``sharding``; None outside a lesson folder."""
    parts = name.split(".")
    return parts[1] if parts[0] == "lessons" and len(parts) > 2 else None


def test_lesson_folders_import_only_themselves_and_common():
    wrong = []
    for name, targets in import_graph(with_parents=False).items():
        mine = lesson_of(name)
        for target in targets:
            theirs = lesson_of(target)
            if mine and theirs and theirs not in (mine, "common"):
                wrong.append(f"gpututor.{name} imports gpututor.{target}")
            if mine == "common" and theirs and theirs != "common":
                wrong.append(f"gpututor.{name} (shared) imports a lesson's gpututor.{target}")
    assert not wrong, "lesson folders importing each other:\n" + "\n".join(sorted(wrong))


FRONT_END = ("plotly", "ipywidgets", "IPython", "anywidget")


def test_what_a_rank_unpickles_imports_no_front_end_however_indirectly():
    """Every lesson module without ``figures`` in its name, and every package module it imports
    (transitively), imports no plotting or widget library and nothing from ``gpututor.ui``."""
    graph = import_graph(with_parents=True)
    found = modules()
    wrong = []
    for start in (n for n in found if n.startswith("lessons.") and "figures" not in n.rsplit(".", 1)[-1]):
        seen, todo = set(), [start]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name == "ui" or name.startswith("ui."):
                wrong.append(f"gpututor.{start} reaches gpututor.{name}")
                continue
            path, _ = found[name]
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
                wrong += [f"gpututor.{start} reaches {n} (in gpututor.{name})" for n in names
                          if n.split(".")[0] in FRONT_END]
            todo += graph.get(name, ())
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_a_rank_imports_no_plotting_or_widget_code():
    import plotly  # this process has it: the rank must not get it from here
    spec = RunSpec(model="gpt", model_size="tiny", strategy="ddp", world_size=2, batch_size=4,
                   seq_len=16, steps=3, timeout=20.0)
    records = launch(spec, task=_rank_modules_task).wait()
    assert len(records) == 2
    for record in records:
        assert record["front_end"] == [], f"rank {record['rank']} imported {record['front_end']}"
    assert plotly.__name__ in sys.modules


def test_modules_stay_small():
    big = {f"gpututor/{path.relative_to(PACKAGE)}": lines for path, _ in modules().values()
           if (lines := len(path.read_text().splitlines())) > 350}
    assert not big, "modules over 350 lines, split them: " + \
        ", ".join(f"{name} ({lines})" for name, lines in sorted(big.items()))


def test_import_gpututor_and_its_strategies_import_no_dtensor_or_dynamo():
    """`import gpututor` imports no torch (the forkserver imports it meanwhile, runtime/warm.py),
    and registering every strategy imports none of DTensor, FSDP, pipelining or dynamo (about
    1.2 s here), so the kernel's import overlaps the forkserver's. torch itself imports dynamo
    (and with it DTensor and FSDP) when a model is built, so the forkserver preloads it."""
    import subprocess
    import sys
    code = ("import sys, gpututor; light = 'torch' not in sys.modules\n"
            "import gpututor.parallel, gpututor.runtime.launcher\n"
            "heavy = [m for m in ('torch._dynamo', 'torch.distributed.tensor', "
            "'torch.distributed.fsdp', 'torch.distributed.pipelining') if m in sys.modules]\n"
            "print(light, heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True []", out.stdout + out.stderr


def test_no_text_points_outside_the_repository():
    """A reader of the package, the docs or a lesson can follow every relative path it names:
    each ``../...`` resolves to a file inside the repository (notes kept beside the checkout,
    such as a ``shared/`` folder, are not shipped)."""
    import re
    root = PACKAGE.parent
    texts = [*PACKAGE.rglob("*.py"), *(root / "docs").rglob("*.md"), *root.glob("README*.md"),
             *(root / "notebooks").rglob("*.ipynb")]
    bad = []
    for path in texts:
        for found in re.findall(r"(?<![\w/:.])((?:\.\./)+[\w./-]*\w)", path.read_text()):
            target = (path.parent / found).resolve()
            if not (target.is_relative_to(root) and target.exists()):
                bad.append(f"{path.relative_to(root)}: {found}")
        if re.search(r"(?<![\w/])shared/(pitfalls|design|style)\.md", path.read_text()):
            bad.append(f"{path.relative_to(root)}: shared/...md")
    assert not bad, "paths that lead outside the repository: " + ", ".join(bad)


def test_the_architecture_doc_draws_the_tree_as_it_is():
    """docs/architecture.md's tree is drawn from the code: every folder and module, with its
    docstring's first sentence (redraw it with ``python tests/architecture_tree.py``)."""
    from architecture_tree import drawn, tree
    assert drawn() == tree(), "the package changed: run python tests/architecture_tree.py"


def test_no_two_test_files_share_a_name():
    """The test folders are not packages: pytest imports each test file by its bare name, so a
    second ``test_devices.py`` anywhere under tests/ stops the whole run at collection ("import
    file mismatch"; a fresh-clone make test failed so)."""
    from collections import Counter
    tests = Path(__file__).resolve().parent
    names = Counter(p.name for p in tests.rglob("test_*.py"))
    assert not [n for n, count in names.items() if count > 1], names.most_common(3)
