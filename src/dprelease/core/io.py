"""Atomic artifact writes, private permissions, leftovers of interrupted writes, content hashes.

Every artifact is written to a temporary sibling and renamed into place, so a killed stage never
leaves a half-written file that a later stage (or a cache) would trust. Private artifacts (narratives,
embeddings, SWAG moments, risks, weights) are written with ``private=True``: folders 0700, files 0600,
whatever the umask. Temporary siblings are named ``.<name>.*.tmp`` (and ``.<name>.old`` during a swap),
so :func:`clean_leftovers` can remove what a killed run left behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_path(path: str | Path, *, private: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only if the block succeeds.
    ``private``: the file 0600 (its folder is the caller's to make private)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o600 if private else 0o666 & ~_UMASK)
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


LEFTOVER_SUFFIXES = (".tmp", ".old", ".restore")


def make_private(path: str | Path) -> None:
    """Folders 0700 and files 0600, recursively (owner only)."""
    path = Path(path)
    if path.is_dir():
        os.chmod(path, 0o700)
        for p in path.rglob("*"):
            os.chmod(p, 0o700 if p.is_dir() else 0o600)
    elif path.exists():
        os.chmod(path, 0o600)


def make_private_within(base: str | Path, path: str | Path) -> None:
    """:func:`make_private` on ``path`` if it lies inside ``base`` (a stage output under the artifacts), and
    the folders between them 0700 (``mkdir(parents=True)`` makes them with the umask's mode)."""
    base, path = Path(base).resolve(), Path(path)
    if not path.exists() or path.is_symlink():
        return
    full = path.resolve()
    if full != base and base not in full.parents:
        return
    make_private(full)
    for parent in full.parents:
        if parent == base:
            break
        os.chmod(parent, 0o700)


def private_dir(path: str | Path) -> Path:
    """Create ``path`` (and parents) as an owner-only folder."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


@contextlib.contextmanager
def atomic_dir(path: str | Path, *, private: bool = False) -> Iterator[Path]:
    """Yield a temporary directory; it replaces ``path`` (whole) only if the block succeeds.
    ``private``: the folder (and its parent) owner-only, files 0600."""
    path = Path(path)
    if private:
        private_dir(path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        if private:
            make_private(tmp)
        else:
            os.chmod(tmp, 0o777 & ~_UMASK)
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def clean_leftovers(folder: str | Path) -> list[Path]:
    """Remove what interrupted atomic writes left under ``folder`` (``.*.tmp``, ``.*.old``,
    ``.*.restore``); returns what was removed. Only call it while no other run writes there."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [p for p in folder.rglob(".*") if p.name.endswith(LEFTOVER_SUFFIXES)]
    removed = []
    for p in sorted(found, key=lambda q: len(q.parts)):
        if not p.exists() and not p.is_symlink():
            continue  # inside a leftover folder removed just before
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)
        removed.append(p)
    return removed


def write_json(path: str | Path, obj: Any, *, private: bool = False) -> None:
    with atomic_path(path, private=private) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n", encoding="utf-8")


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def file_hash(path: str | Path, chunk: int = 1 << 20) -> str:
    """sha256 of a file, or of a directory's files (names + contents, sorted)."""
    path = Path(path)
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():  # name and size framed, so (name, content) pairs cannot run together
            h.update(f.relative_to(path).as_posix().encode() + b"\0" + f.stat().st_size.to_bytes(8, "little"))
        with open(f, "rb") as fh:
            while block := fh.read(chunk):
                h.update(block)
    return h.hexdigest()


def skip_marker(folder: Path, why: str, metrics: Path | None = None) -> dict:
    """What a stage that is not needed with these params writes, so its declared outputs still exist
    (DVC runs every stage of ``dvc.yaml``)."""
    with atomic_dir(folder) as tmp:
        write_json(tmp / "skipped.json", {"skipped": why})
    if metrics is not None:
        write_json(metrics, {"skipped": why})
    return {"skipped": why}


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
