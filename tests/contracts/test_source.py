"""The package's source files and their hash (what cache keys, code_version and fingerprints hash)."""

from __future__ import annotations

import shutil

import pytest

from dprelease.contracts import source


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A copy of the package source that the hash functions read instead of the real one."""
    code = tmp_path / "dprelease"
    shutil.copytree(source.PACKAGE_DIR, code, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(source, "PACKAGE_DIR", code)
    return code


def test_package_version_hashes_the_whole_package(package_copy):
    before = source.package_version()
    with open(package_copy / "core/plots.py", "a", encoding="utf-8") as fh:
        fh.write("\n# edited\n")
    assert source.package_version() != before and len(before) == 16


def test_code_files_refuses_a_path_that_does_not_exist():
    with pytest.raises(FileNotFoundError, match="declared stage code does not exist: nope.py"):
        source.code_files(["nope.py"])
