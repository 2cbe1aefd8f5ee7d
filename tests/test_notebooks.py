"""Every lesson in notebooks/ runs top to bottom under nbval, and is stored without outputs.

Each notebook runs in its own ``pytest --nbval-lax`` subprocess (a fresh kernel from this
environment), so a new lesson is tested as soon as its file exists. Cells marked
``# NBVAL_CHECK_OUTPUT`` must reproduce their stored output; the rest must just not raise.

To strip outputs and widget state before committing:
``python tests/test_notebooks.py --strip notebooks/*.ipynb``
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NOTEBOOK_TIMEOUT_S = 600


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


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_stripped(notebook: Path):
    nb = nbformat.read(notebook, as_version=4)
    assert not unstripped_parts(nb), (
        f"{notebook.name} has {unstripped_parts(nb)}; run "
        f"`python tests/test_notebooks.py --strip notebooks/{notebook.name}`")


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_top_to_bottom(notebook: Path, tmp_path: Path):
    command = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
               "--nbval-cell-timeout=300", "-p", "no:cacheprovider", "-q",
               "-o", f"cache_dir={tmp_path}", str(notebook)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                            timeout=NOTEBOOK_TIMEOUT_S)
    assert result.returncode == 0, (
        f"{notebook.name} failed under nbval:\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}")


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "--strip":
        sys.exit("usage: python tests/test_notebooks.py --strip NOTEBOOK.ipynb ...")
    for path in sys.argv[2:]:
        nbformat.write(strip_notebook(nbformat.read(path, as_version=4)), path)
        print("stripped", path)
