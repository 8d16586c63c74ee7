"""The project's secret randomness key: every random draw a guarantee rests on, and every random choice of a released
or audited mechanism, is seeded from it (HMAC-SHA256(key, label)), never from the public seed.

See docs/privacy.md, "Notes from the code", `core/privacy/secret.py`."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Callable

import numpy as np

from dprelease.core.errors import OneLineError
from dprelease.core.io import private_dir, write_json

KEY_BYTES = 32
KEY = "key"
KEY_ID = "key_id.json"
HISTORY = "history.json"  # the key ids ever created here (public hashes): a missing key is noticed
RETIRED = "retired"


class SecretKeyError(OneLineError):
    """The randomness key is missing, damaged or does not match its id."""


def key_dir(artifacts: str | Path) -> Path:
    """The folder of the randomness key.

    Args:
        artifacts: the private artifacts folder.

    Returns:
        ``<artifacts>/secret``."""
    return Path(artifacts) / "secret"


def _write_new(path: Path, data: bytes) -> None:
    """Create ``path`` 0600 with ``data``; never replace an existing file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_id(path: Path, obj: dict) -> None:
    """The public ids (key_id.json, history.json): atomic, 0600 like everything in the folder."""
    write_json(path, obj, private=True)


def _id(key: bytes) -> str:
    return hashlib.sha256(b"dprelease key id\0" + key).hexdigest()[:16]


def _read_key(path: Path) -> bytes:
    try:
        text = path.read_text(encoding="ascii").strip()
        key = bytes.fromhex(text)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise SecretKeyError(f"randomness key {path} is unreadable or damaged ({type(e).__name__})") from None
    if len(key) != KEY_BYTES:
        raise SecretKeyError(f"randomness key {path} is damaged (expected {KEY_BYTES} bytes)")
    if os.stat(path).st_mode & 0o077:
        raise SecretKeyError(f"randomness key {path} is readable by others; chmod 600 it (and consider rotating)")
    return key


def _history(folder: Path) -> list[str]:
    p = folder / HISTORY
    return json.loads(p.read_text(encoding="utf-8"))["key_ids"] if p.is_file() else []


def _create(folder: Path) -> str:
    key = os.urandom(KEY_BYTES)
    _write_new(folder / KEY, key.hex().encode("ascii") + b"\n")
    kid = _id(key)
    p = folder / HISTORY
    kept = json.loads(p.read_text(encoding="utf-8")) if p.is_file() else {}  # other entries (key_guard's) stay
    _write_id(p, kept | {"key_ids": [*_history(folder), kid]})
    return kid


def init(artifacts: str | Path) -> str:
    """Make sure the key exists (created from OS entropy on first use) and ``key_id.json`` names it.

    A key that existed here before and is gone is an error, never silently replaced.

    Args:
        artifacts: the private artifacts folder.

    Returns:
        The key id."""
    folder = private_dir(key_dir(artifacts))
    if not (folder / KEY).exists():
        known = _history(folder)
        if known:
            raise SecretKeyError(
                f"the randomness key (id {known[-1]}) is missing from {folder}: restore it from "
                "backup, or run `dprelease secret rotate` to start a new one (a new release)"
            )
        kid = _create(folder)
    else:
        kid = _id(_read_key(folder / KEY))
    _write_id(folder / KEY_ID, {"key_id": kid})
    return kid


def rotate(artifacts: str | Path) -> tuple[str | None, str]:
    """Retire the current key (kept, private, under ``retired/``) and create a new one; works when the key is lost too.

    Args:
        artifacts: the private artifacts folder.

    Returns:
        (the old id or None, the new id)."""
    folder = private_dir(key_dir(artifacts))
    old = None
    if (folder / KEY).exists():
        try:
            old = _id(_read_key(folder / KEY))
        except SecretKeyError:
            old = "damaged"
        retired = private_dir(folder / RETIRED)
        os.replace(folder / KEY, retired / f"{old}-{len(list(retired.iterdir()))}")
    kid = _create(folder)
    _write_id(folder / KEY_ID, {"key_id": kid})
    return old, kid


def key_id(artifacts: str | Path) -> str:
    """The id of the key in use (checked against ``key_id.json``).

    Args:
        artifacts: the private artifacts folder.

    Returns:
        The key id (a one-way hash of the key)."""
    return _id(_key(artifacts))


def _key(artifacts: str | Path) -> bytes:
    folder = key_dir(artifacts)
    if not (folder / KEY).is_file():
        raise SecretKeyError(
            f"no randomness key in {folder}: run the `secret` stage (or `dprelease secret init`)"
            " first; if one existed, restore it or `dprelease secret rotate`"
        )
    key = _read_key(folder / KEY)
    recorded = folder / KEY_ID
    if recorded.is_file() and json.loads(recorded.read_text(encoding="utf-8")).get("key_id") != _id(key):
        raise SecretKeyError(
            f"the randomness key in {folder} is not the one key_id.json names: re-run the "
            "`secret` stage so the stages that use it re-run"
        )
    return key


CONTEXT = "release_context"  # under <artifacts>/data: the per-release value every noise stream is keyed with


def context_path(artifacts: str | Path) -> Path:
    """Where the private per-release context (:func:`release_context`) is kept, with the private splits.

    Args:
        artifacts: the private artifacts folder.

    Returns:
        The file's path."""
    return Path(artifacts) / "data" / CONTEXT


def release_context(*, snapshot_digest: str, release_id: str) -> str:
    """The per-release value mixed into every stream :func:`seed` derives: two releases under one key never share noise.

    A report's role (:func:`record_uniforms`) stays the same across releases. Private: kept with the private splits.

    Args:
        snapshot_digest: the snapshot's content digest.
        release_id: the declared release id.

    Returns:
        A hash of the two."""
    return hashlib.sha256(f"dprelease release\0{snapshot_digest}\0{release_id}".encode()).hexdigest()


def _context(artifacts: str | Path) -> bytes:
    p = context_path(artifacts)
    return p.read_bytes().strip() + b"\0" if p.is_file() else b""


def _derive(artifacts: str | Path, label: str) -> bytes:
    if not label:
        raise ValueError("a secret stream needs a label")
    return hmac.new(_key(artifacts), _context(artifacts) + label.encode("utf-8"), hashlib.sha256).digest()


def keyed_file_digest(artifacts: str | Path, path: str | Path) -> str:
    """HMAC-SHA256(key, the file's bytes): an id of a private file that only the key's holder can test a guess against.

    (A plain content digest of a private extract is a membership test for anyone holding D∖{x} and x.)

    Args:
        artifacts: the private artifacts folder.
        path: the file.

    Returns:
        The hex digest."""
    mac = hmac.new(_key(artifacts), b"snapshot\0", hashlib.sha256)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            mac.update(block)
    return mac.hexdigest()


def record_uniforms(artifacts: str | Path, ids) -> np.ndarray:
    """One uniform in [0, 1) per report content id: HMAC(key, id), unpredictable without the key.

    The same for a report in every extract and release under this key (its role is its own). Never stored or logged.

    Args:
        artifacts: the private artifacts folder.
        ids: the reports' content ids.

    Returns:
        The uniforms, in the order of ``ids``."""
    key = _key(artifacts)
    return np.array(
        [
            int.from_bytes(hmac.new(key, b"record role\0" + i.encode("utf-8"), hashlib.sha256).digest()[:8], "little")
            / 2.0**64
            for i in ids
        ],
        dtype=float,
    )


def seed(artifacts: str | Path, label: str) -> int:
    """A 64-bit seed for ``label`` (torch generators take 64 bits): never log or store it.

    Args:
        artifacts: the private artifacts folder.
        label: the use, e.g. the stage and the draw.

    Returns:
        The seed, derived from the key (and the release context)."""
    return int.from_bytes(_derive(artifacts, label)[:8], "little")


def training_seeds(artifacts: str | Path) -> Callable[[str, int], int]:
    """A mechanism's training randomness, derived from the key (initialisation, batch order, dropout, SWAG's SGD, refits).

    The operator reproduces a fit bit for bit; an adversary with every record but one, the code and the public seed
    cannot re-fit the sampler's centre.

    Args:
        artifacts: the private artifacts folder.

    Returns:
        A function (what, round) → 63-bit seed."""
    return lambda what, round_: seed(artifacts, f"train/{what}/round{round_}") >> 1


def numpy_rng(artifacts: str | Path, label: str) -> np.random.Generator:
    """A numpy generator seeded with the full 256-bit derived value for ``label``.

    Args:
        artifacts: the private artifacts folder.
        label: the use.

    Returns:
        The generator."""
    return np.random.default_rng(np.random.SeedSequence(int.from_bytes(_derive(artifacts, label), "little")))


def derive_child(artifacts: str | Path, child_artifacts: str | Path, label: str) -> str:
    """Give a sub-project (e.g. the canary audit's re-run) a key derived from this one, as secret and reproducible.

    Args:
        artifacts: this project's private artifacts folder.
        child_artifacts: the sub-project's.
        label: what the child is for (each label its own key).

    Returns:
        The child's key id."""
    child = private_dir(key_dir(child_artifacts))
    for name in (KEY, KEY_ID, HISTORY):
        (child / name).unlink(missing_ok=True)
    _write_new(child / KEY, _derive(artifacts, "child-key:" + label).hex().encode("ascii") + b"\n")
    return init(child_artifacts)
