"""The audit's content-addressed cache: what does not depend on the private snapshot, kept between roots.

The population pool's embeddings and the offline LiRA reference models depend only on public inputs and the public
encoder; each is stored under the sha256 of exactly what determines it, so a changed input is another key, never a
stale hit. Where: ``DPRELEASE_AUDIT_CACHE``, else ``audit-cache/`` in the Prefect home. Entries hold per-record data
(folders 0700, files 0600); an entry whose key or tensors' hash does not match is removed and recomputed.

See docs/audit.md, "Notes from the code", `compare/mia/audit_cache.py`."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from dprelease.core.io import atomic_path, private_dir

ENV = "DPRELEASE_AUDIT_CACHE"


def cache_dir() -> Path:
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser()
    return Path(os.environ.get("PREFECT_HOME") or ".prefect").expanduser() / "audit-cache"


def key(kind: str, **parts) -> str:
    """sha256 of ``kind`` and ``parts`` (JSON-able), canonically encoded."""
    blob = json.dumps({"kind": kind, **parts}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def text_hash(texts: list[str]) -> str:
    """sha256 of a list of texts, in order (each framed by its length: no two lists share a hash)."""
    h = hashlib.sha256()
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()


def array_hash(*arrays) -> str:
    """sha256 of arrays or tensors (dtype, shape and bytes of each, in order)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a))
        h.update(f"{a.dtype.str}{a.shape}".encode() + a.tobytes())
    return h.hexdigest()


def _digest(tensors: dict[str, torch.Tensor]) -> str:
    return array_hash(*(tensors[k] for k in sorted(tensors))) + ":" + ",".join(sorted(tensors))


def _path(kind: str, k: str) -> Path:
    return cache_dir() / kind / k[:2] / f"{k}.safetensors"


def load(kind: str, k: str) -> dict[str, torch.Tensor] | None:
    """The tensors stored under ``k``, or None (absent, or not what was stored: then removed)."""
    path = _path(kind, k)
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except Exception:  # noqa: BLE001 - a truncated or foreign file is a miss, never an error
        tensors, meta = None, {}
    if tensors is None or meta.get("key") != k or meta.get("sha256") != _digest(tensors):
        path.unlink(missing_ok=True)
        return None
    return tensors


def save(kind: str, k: str, tensors: dict[str, torch.Tensor]) -> None:
    """Store ``tensors`` under ``k`` (atomically; folders 0700, the file 0600)."""
    tensors = {name: t.detach().cpu().contiguous() for name, t in tensors.items()}
    path = _path(kind, k)
    for folder in (cache_dir(), path.parent.parent, path.parent):
        private_dir(folder)
    with atomic_path(path, private=True) as tmp:
        save_file(tensors, str(tmp), metadata={"key": k, "sha256": _digest(tensors)})
