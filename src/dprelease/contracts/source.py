"""The package's source files and their hash: what a stage's cache key, a release's ``code_version`` and the
service's fingerprint hash of a list of package-relative paths (a stage's :attr:`Stage.code`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from dprelease.contracts.code_scope import PACKAGE_DIR

SOURCE_SUFFIXES = {".py", ".csv"}


def code_files(paths: list[str]) -> list[Path]:
    """The source files under ``paths`` (package-relative files or folders), sorted; caches ignored.

    Args:
        paths: package-relative files or folders (``"."``: the whole package).

    Returns:
        The files, sorted."""
    files: set[Path] = set()
    for rel in paths:
        p = PACKAGE_DIR / rel
        if p.is_dir():
            files |= {f for f in p.rglob("*") if f.suffix in SOURCE_SUFFIXES and "__pycache__" not in f.parts}
        elif p.is_file():
            files.add(p)
        else:
            raise FileNotFoundError(f"declared stage code does not exist: {rel}")
    return sorted(files)


def code_hash(paths: list[str]) -> str:
    """The hash of the source files under ``paths``: each file's package-relative name and content.

    Args:
        paths: package-relative files or folders, as :func:`code_files` takes them.

    Returns:
        A sha256 hex digest; it changes when a file is added, removed, renamed or edited."""
    h = hashlib.sha256()
    for f in code_files(paths):
        h.update(f.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def package_version() -> str:
    """Hash of the whole package's source (recorded in release manifests, not used for caching)."""
    return code_hash(["."])[:16]
