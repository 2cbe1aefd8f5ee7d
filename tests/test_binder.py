"""The Binder files agree with pyproject.toml, and Binder opens JupyterLab on lesson 00.

Binder (repo2docker) installs ``binder/environment.yml`` from conda-forge and then runs
``binder/postBuild``; ``binder/start`` sets environment variables before JupyterLab starts. The
package names differ between conda-forge and PyPI only for PyTorch (``pytorch-cpu`` is the CPU
build of ``torch``). Versions agree when every version Binder may install is one that
pyproject.toml allows, and when the versions this repository's tests run with fit both.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
PYPI_TO_CONDA = {"torch": "pytorch-cpu"}   # every other package has the same name on both
CONDA_ONLY = {"python", "pip"}             # the environment itself, not a dependency
LESSON_00 = "notebooks/00_start_here.ipynb"


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def pyproject_requirements() -> dict[str, Requirement]:
    """The package's runtime dependencies, keyed by their conda-forge name."""
    reqs = [Requirement(line) for line in pyproject()["project"]["dependencies"]]
    return {PYPI_TO_CONDA.get(canonicalize_name(r.name), canonicalize_name(r.name)): r
            for r in reqs}


def environment() -> dict:
    return yaml.safe_load((BINDER / "environment.yml").read_text())


def conda_specs() -> dict[str, str]:
    """``{name: version spec}`` from environment.yml (``python=3.12`` -> ``==3.12.*``)."""
    specs = {}
    for entry in environment()["dependencies"]:
        assert isinstance(entry, str), f"environment.yml: {entry!r} (a pip section is not used)"
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(.*)", entry.strip())
        name, version = canonicalize_name(match.group(1)), match.group(2).replace(" ", "")
        if re.fullmatch(r"=[0-9][0-9.]*", version):   # conda's "=3.12" means "3.12.*"
            version = f"=={version[1:]}.*"
        specs[name] = version
    return specs


def probe_versions(*specifier_sets: SpecifierSet) -> list[Version]:
    """Versions around every boundary the specifiers name: enough to compare two of them."""
    probes = set()
    for specs in specifier_sets:
        for spec in specs:
            base = Version(spec.version.replace(".*", ""))
            parts = list(base.release) + [0] * (3 - len(base.release))
            for delta in (-1, 0, 1):
                for i in range(3):
                    bumped = parts.copy()
                    bumped[i] = max(0, bumped[i] + delta)
                    probes.add(Version(".".join(map(str, bumped))))
    probes.update(Version(v) for v in ("0.1", "1.0", "99.0"))
    return sorted(probes)


# ---- the files Binder reads -----------------------------------------------------------------

def test_binder_folder_has_the_files_binder_reads():
    assert (BINDER / "environment.yml").is_file()
    # repo2docker ignores environment.yaml, and would install a requirements.txt *instead of*
    # the conda environment if no environment.yml were there: neither belongs here.
    assert not (BINDER / "environment.yaml").exists()
    assert not (BINDER / "requirements.txt").exists()
    for script in ("postBuild", "start"):
        path = BINDER / script
        assert path.is_file() and os.access(path, os.X_OK), f"binder/{script} must be executable"
        assert path.read_text().startswith("#!/usr/bin/env bash\n"), f"binder/{script}: shebang"
        check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, f"binder/{script} is not valid bash: {check.stderr}"


def test_environment_uses_conda_forge_and_cpu_pytorch_only():
    env = environment()
    assert env["channels"] == ["conda-forge"], "conda-forge only (the pytorch channel is retired)"
    names = set(conda_specs())
    assert "pytorch-cpu" in names
    assert not names & {"pytorch", "pytorch-gpu", "torch", "cudatoolkit", "cuda-version"}, \
        "Binder has no GPU: CPU PyTorch only"


def test_environment_has_the_same_packages_as_pyproject():
    wanted, have = set(pyproject_requirements()), set(conda_specs()) - CONDA_ONLY
    assert wanted - have == set(), f"in pyproject.toml but not in environment.yml: {wanted - have}"
    assert have - wanted == set(), f"in environment.yml but not in pyproject.toml: {have - wanted}"


@pytest.mark.parametrize("name", sorted(pyproject_requirements()))
def test_binder_versions_are_ones_pyproject_allows(name: str):
    requirement, specs = pyproject_requirements()[name], conda_specs()
    assert name in specs, f"{name} is missing from binder/environment.yml"
    binder = SpecifierSet(specs[name])
    probes = probe_versions(binder, requirement.specifier)
    too_loose = [str(v) for v in probes if binder.contains(v, prereleases=True)
                 and not requirement.specifier.contains(v, prereleases=True)]
    assert not too_loose, (f"binder/environment.yml allows {name} {too_loose}, which "
                           f"pyproject.toml ({requirement}) does not")
    installed = Version(metadata.version(requirement.name).split("+")[0])
    assert binder.contains(installed, prereleases=True), (
        f"the tests here run {requirement.name} {installed}, which binder/environment.yml "
        f"({name}{binder}) excludes")


def test_binder_python_satisfies_requires_python():
    requires = SpecifierSet(pyproject()["project"]["requires-python"])
    python = conda_specs()["python"]
    assert python.startswith("=="), "pin Python's minor version, e.g. python=3.12"
    assert requires.contains(Version(python[2:].replace(".*", ""))), \
        f"environment.yml's python{python} is outside requires-python {requires}"


def test_postbuild_installs_the_package_without_pulling_dependencies_from_pip():
    text = (BINDER / "postBuild").read_text()
    assert re.search(r"^set -e", text, re.M), "postBuild must stop at the first failing command"
    install = re.search(r"pip install\b.*", text)
    assert install, "postBuild must pip-install the package"
    assert "--no-deps" in install.group(0), "conda-forge provides the dependencies (CPU torch)"
    assert re.search(r"\s(-e\s+)?\.(\s|$)", install.group(0)), "install the repository itself"


def test_start_sets_thread_counts_and_execs_the_command():
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(name, None)
    result = subprocess.run(["bash", str(BINDER / "start"), sys.executable, "-c",
                             "import os; print(os.environ['OMP_NUM_THREADS'], "
                             "os.environ['MKL_NUM_THREADS'])"],
                            env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    omp, mkl = result.stdout.split()
    from gpututor.hardware import usable_cpu_cores
    assert int(omp) == int(mkl) == usable_cpu_cores()


# ---- opening lesson 00 ----------------------------------------------------------------------

def test_readme_binder_link_opens_lesson_00_in_jupyterlab():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"https://mybinder\.org/v2/gh/[^)\s]+", readme)
    assert links, "README.md needs a Binder badge/link"
    assert any(f"urlpath=lab/tree/{LESSON_00}" in link.replace("%2F", "/") for link in links), \
        f"the Binder link must open JupyterLab on {LESSON_00}: {links}"
    assert (ROOT / LESSON_00).is_file()
