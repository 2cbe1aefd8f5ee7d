"""gpututor installed as a package (not editable): the wheel carries the corpora and the lessons'
kernelspec, a run trains from a folder outside the checkout, and an install without its data
says so from the rank instead of multiprocessing's bare EOFError."""
import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA_FILES = ["corpus.txt", "corpus_zh.txt", "README.md", "GPL-3.0.txt"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A wheel built from this checkout, installed into a fresh venv that sees this environment's
    torch and other dependencies (a .pth file) but not this checkout."""
    tmp = tmp_path_factory.mktemp("install")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(tmp / "dist"), str(ROOT)], capture_output=True, text=True,
                           timeout=300)
    assert built.returncode == 0, built.stderr
    wheel, = (tmp / "dist").glob("gpututor-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # The fresh venv's own pip, before it can see this environment: pip run from here (even with
    # --prefix) would uninstall this environment's gpututor first.
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                           str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "parent_env.pth").write_text(sysconfig.get_path("purelib") + "\n")  # torch & co.
    here = subprocess.run([sys.executable, "-c", "import gpututor.runtime.worker"], cwd=tmp,
                          capture_output=True, text=True)
    assert here.returncode == 0, "installing the wheel broke this environment:\n" + here.stderr
    return wheel, venv, python


def test_wheel_carries_the_corpora_and_the_kernelspec(installed):
    wheel, venv, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    data = next(n.split("/data/")[0] for n in names if ".data/data/" in n) + "/data/"
    for name in DATA_FILES:
        assert f"{data}share/gpututor/data/{name}" in names, name
    assert f"{data}share/jupyter/kernels/gpututor/kernel.json" in names
    assert {"gpututor/ui/live_figure.js", "gpututor/runtime/kernelspec/kernel.json"} <= names
    # the translations: every catalog of the checkout (an installed kernel would speak English)
    catalogs = {p.relative_to(ROOT).as_posix() for p in (ROOT / "gpututor").rglob("zh.po")}
    assert len(catalogs) > 20 and catalogs <= names, sorted(catalogs - names)
    for name in DATA_FILES:   # and the install put them where gpututor.data looks
        assert (venv / "share" / "gpututor" / "data" / name).read_bytes() == \
            (ROOT / "data" / name).read_bytes()


def test_installed_package_trains_outside_the_checkout(installed, tmp_path):
    _, venv, python = installed
    out = tmp_path / "summary.json"
    result = subprocess.run(
        [str(python), "-m", "gpututor", "run", "--model-size", "tiny", "--strategy", "ddp",
         "--world-size", "2", "--steps", "2", "--batch-size", "8", "--seq-len", "32",
         "--corpus", "zh", "--quiet", "--json", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    summary = json.loads(out.read_text())
    assert summary["world_size"] == 2 and len(summary["losses"]) == 2
    where = subprocess.run([str(python), "-c", "import gpututor.data as d; print(d.corpus_path('en'))"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(venv), where   # read from the install, not the checkout


def test_missing_corpus_is_reported_by_the_rank_not_as_eoferror(installed, tmp_path):
    _, venv, python = installed
    broken = tmp_path / "broken"
    shutil.copytree(venv, broken, symlinks=True)
    shutil.rmtree(broken / "share" / "gpututor" / "data")
    script = ("from gpututor import RunSpec, launch\n"
              "if __name__ == '__main__':\n"
              "    launch(RunSpec(strategy='ddp', world_size=2, steps=2, batch_size=8,"
              " model_size='tiny')).wait()\n")
    (tmp_path / "train.py").write_text(script)
    result = subprocess.run([str(broken / "bin" / "python"), "train.py"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode != 0
    assert "EOFError" not in result.stderr, result.stderr
    assert "could not import gpututor's worker" in result.stderr, result.stderr
    assert "'corpus.txt'" in result.stderr and "none of these folders" in result.stderr
    assert "pip install ." in result.stderr
