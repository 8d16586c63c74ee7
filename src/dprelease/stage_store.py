"""Content-addressed store of finished stage outputs, shared between project roots.

A stage's outputs depend only on its input key (params it reads, input contents, declared code), so
once computed in one root they can be restored into another: tuning cells that share the split, the
embeddings or round 1 do not recompute them.

Entries are immutable and verified. Outputs are *copied* into the store (never hard-linked: an
output changed in place must not change the stored copy), each file's sha256 and mode are recorded
in the entry's manifest, files are made read-only, and the entry appears atomically under its key
(first writer wins). :func:`restore` re-hashes every stored file before copying it out; an entry
that does not match its manifest is discarded (the caller recomputes) and never reused. The store
folder is owner-only (it holds private artifacts).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

from .io import private_dir

MANIFEST = "entry.json"
TMP_SUFFIX = ".tmp"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _copy_hashed(src: Path, dst: Path) -> str:
    """Copy ``src`` to ``dst`` in one pass, returning the sha256 of the bytes written."""
    h = hashlib.sha256()
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while block := fin.read(1 << 20):
            h.update(block)
            fout.write(block)
    return h.hexdigest()


def _files(root: Path, rel: str) -> list[str]:
    """Files under ``root/rel`` (itself if a file), as root-relative posix paths, sorted."""
    p = root / rel
    if p.is_dir():
        return sorted(f.relative_to(root).as_posix() for f in p.rglob("*") if f.is_file())
    return [rel] if p.is_file() else []


def save(store: Path, key: str, paths: list[str], root: Path, summary: dict) -> bool:
    """Copy ``paths`` (relative to ``root``) and the stage summary into the store under ``key``.
    Returns False if an entry for ``key`` already exists (first writer wins)."""
    entry = store / key
    if entry.exists():
        return False
    private_dir(store)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", suffix=TMP_SUFFIX, dir=store))
    try:
        files = {}
        dirs = {rel: stat.S_IMODE((root / rel).stat().st_mode) for rel in paths if (root / rel).is_dir()}
        for rel in paths:
            for f in _files(root, rel):
                dst = tmp / "files" / f
                dst.parent.mkdir(parents=True, exist_ok=True)
                files[f] = {"sha256": _copy_hashed(root / f, dst), "mode": stat.S_IMODE((root / f).stat().st_mode)}
                os.chmod(dst, 0o400)
        manifest = {"key": key, "paths": paths, "dirs": dirs, "files": files, "summary": summary}
        (tmp / MANIFEST).write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")
        os.chmod(tmp / MANIFEST, 0o400)
        try:
            os.replace(tmp, entry)  # atomic; fails if another writer got there first (non-empty dir)
        except OSError:
            if not entry.exists():
                raise
            return False
        return True
    finally:
        _remove(tmp)


def _remove(path: Path) -> None:
    if path.exists():
        for p in [path, *path.rglob("*")]:
            if p.is_dir():
                os.chmod(p, 0o700)
        shutil.rmtree(path, ignore_errors=True)


def verify(store: Path, key: str) -> dict | None:
    """The entry's manifest if every stored file matches its recorded sha256, else None."""
    entry = store / key
    try:
        manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if manifest.get("key") != key:
        return None
    for rel, meta in manifest.get("files", {}).items():
        f = entry / "files" / rel
        if not f.is_file() or _sha256(f) != meta["sha256"]:
            return None
    return manifest


def discard(store: Path, key: str) -> None:
    _remove(store / key)


def restore(store: Path, key: str, root: Path) -> dict | None:
    """Put a stored stage's outputs into ``root``; returns its summary, or None if ``key`` is unknown
    or its entry fails verification (then the entry is discarded and the caller recomputes). Every file
    is hashed while it is copied into a temporary sibling; ``root`` changes only once all matched."""
    entry = store / key
    try:
        manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None
    if manifest is None or manifest.get("key") != key:
        if entry.exists():
            discard(store, key)
        return None
    staged = [(root / top, _stage(entry / "files", manifest, top, root / top)) for top in manifest["paths"]]
    if any(tmp is False for _, tmp in staged):
        for _, tmp in staged:
            if tmp:
                _remove(tmp) if tmp.is_dir() else tmp.unlink(missing_ok=True)
        discard(store, key)
        return None
    for dst, tmp in staged:
        if tmp is None:
            continue
        if dst.is_dir() and not dst.is_symlink():
            old = dst.with_name(f".{dst.name}.old")
            _remove(old)
            os.replace(dst, old)
            os.replace(tmp, dst)
            _remove(old)
        else:
            os.replace(tmp, dst)
    return manifest["summary"]


def _stage(files: Path, manifest: dict, top: str, dst: Path) -> Path | None | bool:
    """Copy the entry's files under ``top`` next to ``dst`` (``.<name>.restore``), checking each sha256.
    Returns the staged path, None if the entry holds nothing for ``top``, False on a mismatch."""
    is_dir = top in manifest["dirs"]
    rels = [r for r in manifest["files"] if r == top or r.startswith(top.rstrip("/") + "/")]
    if not rels and not is_dir:
        return None
    tmp = dst.with_name(f".{dst.name}.restore")
    _remove(tmp) if tmp.is_dir() else tmp.unlink(missing_ok=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    if is_dir:
        tmp.mkdir()
    for rel in rels:
        out = tmp / Path(rel).relative_to(top) if is_dir else tmp
        out.parent.mkdir(parents=True, exist_ok=True)
        meta = manifest["files"][rel]
        if not (files / rel).is_file() or _copy_hashed(files / rel, out) != meta["sha256"]:
            _remove(tmp) if tmp.is_dir() else tmp.unlink(missing_ok=True)
            return False
        os.chmod(out, meta["mode"])
    if is_dir:
        os.chmod(tmp, manifest["dirs"][top])
    return tmp


def clean_partial(store: Path, older_than_s: float = 3600.0) -> list[Path]:
    """Remove half-written entries (``.<key>.*.tmp``) older than ``older_than_s`` (other processes may
    be writing fresh ones: the store is shared between roots)."""
    import time

    if not store.is_dir():
        return []
    now, removed = time.time(), []
    for p in store.glob(f".*{TMP_SUFFIX}"):
        if now - p.stat().st_mtime > older_than_s:
            _remove(p)
            removed.append(p)
    return removed
