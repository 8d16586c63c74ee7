"""Content-addressed store of finished stage outputs, shared between project roots.

A stage's outputs depend only on its input key (params it uses, input contents, code version), so
once computed in one root they can be restored into another: tuning cells that share the split,
the embeddings or round 1 do not recompute them. Entries are hard links where the filesystem allows
(artifacts are replaced, never modified in place, so links are safe) and copies otherwise.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .io import read_json, write_json


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _put(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, copy_function=_link_or_copy)
    else:
        _link_or_copy(str(src), str(dst))


def save(store: Path, key: str, paths: list[str], root: Path, summary: dict) -> None:
    """Record ``paths`` (relative to ``root``) and the stage summary under ``key`` (atomic; first wins)."""
    entry = store / key
    if entry.exists():
        return
    store.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=store))
    try:
        for rel in paths:
            if (root / rel).exists():
                _put(root / rel, tmp / "files" / rel)
        write_json(tmp / "summary.json", {"paths": paths, "summary": summary})
        os.replace(tmp, entry)
    except OSError:
        if not entry.exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def restore(store: Path, key: str, root: Path) -> dict | None:
    """Put a stored stage's outputs into ``root``; returns its summary, or None if ``key`` is unknown."""
    entry = store / key
    if not (entry / "summary.json").is_file():
        return None
    meta = read_json(entry / "summary.json")
    for rel in meta["paths"]:
        src, dst = entry / "files" / rel, root / rel
        if not src.exists():
            continue
        tmp = dst.with_name(f".{dst.name}.restore")
        shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
        _put(src, tmp)
        if dst.is_dir():
            shutil.rmtree(dst)
        os.replace(tmp, dst)
    return meta["summary"]
