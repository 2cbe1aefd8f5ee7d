"""Every lesson in notebooks/ is stored without outputs and widget state.

That every lesson runs top to bottom under nbval is tested in ``tests/test_exercises.py``: one
nbval run per notebook (a fresh kernel, ``--nbval-lax``), of a copy with each exercise's
solution and a wrong answer added. Lesson 00 (English and Chinese) runs that copy in a real
browser instead, where ``tests/test_browser.py`` can run: each notebook executes once in CI.

To strip outputs and widget state before committing:
``python tests/test_notebooks.py --strip notebooks/*.ipynb``
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))   # the Chinese lessons in zh/ too


def strip_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Remove outputs, execution counts and saved widget state (in place); return ``nb``."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cell.metadata.pop("execution", None)
    return nb


def unstripped_parts(nb: nbformat.NotebookNode) -> list[str]:
    """What in ``nb`` should not be committed (empty when the notebook is clean)."""
    found = ["metadata.widgets"] if "widgets" in nb.metadata else []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None):
            found.append(f"cell {i}: outputs or execution_count")
    return found


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_notebook_is_stored_stripped(notebook: Path):
    nb = nbformat.read(notebook, as_version=4)
    assert not unstripped_parts(nb), (
        f"{notebook.name} has {unstripped_parts(nb)}; run "
        f"`python tests/test_notebooks.py --strip notebooks/{notebook.name}`")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_notebook_asks_for_the_gpututor_kernel(notebook: Path):
    """The lessons' kernel starts the ranks' forkserver at kernel start (runtime/kernel.py)."""
    spec = nbformat.read(notebook, as_version=4).metadata.get("kernelspec", {})
    assert spec.get("name") == "gpututor", f"{notebook.name} asks for kernel {spec.get('name')!r}"


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "--strip":
        sys.exit("usage: python tests/test_notebooks.py --strip NOTEBOOK.ipynb ...")
    for path in sys.argv[2:]:
        nbformat.write(strip_notebook(nbformat.read(path, as_version=4)), path)
        print("stripped", path)
