"""The test extra of pyproject.toml is installed: `make test` installs it, so a missing piece is
an error naming it, never a test that quietly skips (torchao for lesson 07's production int8,
Playwright for the browser tests). Only what the README says may be absent skips: a GPU, and
Debian's Chromium (and a CJK font) for the browser tests."""
from __future__ import annotations

from importlib import metadata

import pytest
from packaging.requirements import Requirement


def requirements_of_extra(extra: str) -> list[Requirement]:
    """The requirements gpututor's installed metadata lists for ``extra`` (pyproject.toml)."""
    listed = [Requirement(r) for r in metadata.requires("gpututor") or []]
    return [r for r in listed if r.marker is not None and r.marker.evaluate({"extra": extra})]


TEST_EXTRA = requirements_of_extra("test")


def test_the_test_extra_is_listed():
    assert {"pytest", "nbval", "playwright", "torchao"} <= {r.name for r in TEST_EXTRA}


@pytest.mark.parametrize("requirement", TEST_EXTRA, ids=lambda r: r.name)
def test_the_test_extra_is_installed(requirement: Requirement):
    try:
        version = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        pytest.fail(f"{requirement.name} is missing: the tests need "
                    f"{requirement.name}{requirement.specifier} (pyproject.toml's "
                    "test extra; `make test` installs it, or pip install -e '.[test]')")
    assert requirement.specifier.contains(version, prereleases=True), \
        f"{requirement.name} {version} is installed; the tests need {requirement}"
