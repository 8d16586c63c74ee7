"""Finished stage outputs by input key, shared between project roots; their bytes live in DVC's cache. Entries are
immutable and verified when restored.

See docs/pipeline.md, "Notes from the code", `pipeline/stage_store.py`."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

from dprelease.core.io import private_dir

MANIFEST = "entry.json"
TMP_SUFFIX = ".tmp"


def default_objects(store: Path) -> Path:
    """The cache of a root outside any DVC project (DVC's layout)."""
    return Path(store) / "cache"


def object_path(objects: Path, md5: str) -> Path:
    """Where DVC keeps the object with this md5 (``files/md5/ab/cdef…``)."""
    return Path(objects) / "files" / "md5" / md5[:2] / md5[2:]


def file_md5(path: Path) -> str:
    """The MD5 of a file's bytes, read in blocks: DVC 3's hash of a file (its object's name, its dvc.lock entry)."""
    h = hashlib.md5()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _copy_hashed(src: Path, dst: Path) -> str:
    """Copy ``src`` to ``dst`` in one pass, returning the md5 of the bytes written (DVC's object name)."""
    h = hashlib.md5()
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while block := fin.read(1 << 20):
            h.update(block)
            fout.write(block)
    return h.hexdigest()


def put(objects: Path, src: Path) -> str:
    """Copy ``src`` into the cache as a read-only object (kept if already there); returns its md5."""
    tmp_dir = private_dir(Path(objects) / "files" / "md5")
    for p in (Path(objects), Path(objects) / "files"):
        os.chmod(p, 0o700)
    fd, tmp = tempfile.mkstemp(prefix=".put.", suffix=TMP_SUFFIX, dir=tmp_dir)
    os.close(fd)
    try:
        md5 = _copy_hashed(src, Path(tmp))
        dst = object_path(objects, md5)
        if not dst.is_file():
            dst.parent.mkdir(mode=0o700, exist_ok=True)
            os.chmod(tmp, 0o444)
            os.replace(tmp, dst)
        return md5
    finally:
        Path(tmp).unlink(missing_ok=True)


def _files(root: Path, rel: str) -> list[str]:
    """Files under ``root/rel`` (itself if a file), as root-relative posix paths, sorted."""
    p = root / rel
    if p.is_dir():
        return sorted(f.relative_to(root).as_posix() for f in p.rglob("*") if f.is_file())
    return [rel] if p.is_file() else []


def save(store: Path, key: str, paths: list[str], root: Path, summary: dict, objects: Path | None = None) -> bool:
    """Put the files of ``paths`` (relative to ``root``) into the cache ``objects`` (default
    :func:`default_objects`) and index them, with the stage summary, under ``key``.
    Returns False if an entry for ``key`` already exists (first writer wins)."""
    entry = store / key
    if entry.exists():
        return False
    private_dir(store)
    objects = Path(objects or default_objects(store)).resolve()
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", suffix=TMP_SUFFIX, dir=store))
    try:
        files = {}
        dirs = {rel: stat.S_IMODE((root / rel).stat().st_mode) for rel in paths if (root / rel).is_dir()}
        for rel in paths:
            for f in _files(root, rel):
                files[f] = {"md5": put(objects, root / f), "mode": stat.S_IMODE((root / f).stat().st_mode)}
        manifest = {
            "key": key,
            "paths": paths,
            "dirs": dirs,
            "files": files,
            "summary": summary,
            "objects": str(objects),
        }
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


def _manifest(store: Path, key: str) -> dict | None:
    try:
        manifest = json.loads((store / key / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(manifest, dict) and manifest.get("key") == key and isinstance(manifest.get("objects"), str)
    return manifest if ok else None


def stored_file(store: Path, key: str, rel: str) -> Path | None:
    """The cache object holding output file ``rel`` of entry ``key`` (None: no such entry or file)."""
    manifest = _manifest(store, key)
    meta = (manifest or {}).get("files", {}).get(rel)
    return object_path(Path(manifest["objects"]), meta["md5"]) if meta else None


def verify(store: Path, key: str) -> dict | None:
    """The entry's manifest if every object it names is in the cache and matches its md5, else None."""
    manifest = _manifest(store, key)
    if manifest is None:
        return None
    objects = Path(manifest["objects"])
    for meta in manifest.get("files", {}).values():
        f = object_path(objects, meta["md5"])
        if not f.is_file() or file_md5(f) != meta["md5"]:
            return None
    return manifest


def discard(store: Path, key: str) -> None:
    _remove(store / key)


def restore(store: Path, key: str, root: Path) -> dict | None:
    """Put a stored stage's outputs into ``root``; returns its summary, or None if ``key`` is unknown
    or an object fails verification (then the entry is discarded, the bad object removed, and the caller
    recomputes). Every file is hashed while it is copied into a temporary sibling; ``root`` changes only
    once all matched."""
    manifest = _manifest(store, key)
    if manifest is None:
        if (store / key).exists():
            discard(store, key)
        return None
    objects = Path(manifest["objects"])
    staged = [(root / top, _stage(objects, manifest, top, root / top)) for top in manifest["paths"]]
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


def _stage(objects: Path, manifest: dict, top: str, dst: Path) -> Path | None | bool:
    """Copy the entry's files under ``top`` next to ``dst`` (``.<name>.restore``), checking each md5.
    Returns the staged path, None if the entry holds nothing for ``top``, False on a mismatch (the
    mismatching object is removed from the cache: never reused, and the next save writes it afresh)."""
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
        obj = object_path(objects, meta["md5"])
        if not obj.is_file() or _copy_hashed(obj, out) != meta["md5"]:
            if obj.is_file():
                obj.unlink()
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
