"""Refuse to make a release with keys other than the ones the recorded release was made with (``dvc.lock`` and
``release/release.json``), unless the key was rotated or replaced here on purpose (``--new-key``).

See docs/privacy.md, "Notes from the code", `core/privacy/key_guard.py`."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from dprelease.core.errors import OneLineError

NEW_KEY_ENV = "DPRELEASE_NEW_KEY"  # 1: accept a new key under `dvc repro` (as --new-key does for the flows)
HISTORY = "history.json"
SECRET_ID = "key_id.json"
AGENCY_PUB, AGENCY_KEY, AGENCY_SIGNER, RETIRED = "agency.pub", "agency.key", "signer.json", "retired"
HOW = (
    "import it (`dprelease key import-private --from DIR`, from the operator's `dprelease key export-private`) "
    "or start a new one with --new-key (`make run ARGS=--new-key`, `dprelease key init --new-key`, "
    "`make repro NEW_KEY=1`: a new release)"
)


class KeyMismatchError(OneLineError):
    """The keys here are not the ones the recorded release was made with."""


def new_key_from_env() -> bool:
    return (os.environ.get(NEW_KEY_ENV) or "").strip().lower() in ("1", "true", "yes", "on")


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def secret_id_bytes(kid: str) -> bytes:
    """``key_id.json`` as :func:`dprelease.core.io.write_json` writes it (what dvc.lock hashes).

    Args:
        kid: the randomness key's public id.

    Returns:
        The file's bytes."""
    return (json.dumps({"key_id": kid}, indent=2, sort_keys=True) + "\n").encode("utf-8")


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def lock_md5s(root: Path, paths: set[str]) -> dict[str, str]:
    """The md5 ``dvc.lock`` records for each of ``paths`` (as an output or an input of any stage).

    Args:
        root: the project root (its ``dvc.lock`` is read).
        paths: root-relative paths.

    Returns:
        ``{path: md5}`` for the paths it records (none when there is no ``dvc.lock``)."""
    lock = root / "dvc.lock"
    if not lock.is_file():
        return {}
    import yaml

    try:
        stages = (
            yaml.load(lock.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
        ).get("stages", {})
    except (OSError, yaml.YAMLError):
        return {}
    found: dict[str, str] = {}
    for stage in stages.values():
        for entry in [*(stage.get("outs") or []), *(stage.get("deps") or [])]:
            if isinstance(entry, dict) and entry.get("path") in paths and entry.get("md5"):
                found.setdefault(entry["path"], entry["md5"])
    return found


def _release_ids(params, root: Path) -> tuple[str | None, str | None]:
    """(randomness key id, agency key id) the existing release folder names, if any."""
    manifest = _read_json(root / params.release / "release.json")
    if not isinstance(manifest, dict):
        return None, None
    rnd, signed = manifest.get("randomness"), manifest.get("signed_by")
    return (
        rnd.get("secret_key_id") if isinstance(rnd, dict) else None,
        signed.get("key_id") if isinstance(signed, dict) else None,
    )


def _replaced(folder: Path) -> list[dict]:
    h = _read_json(folder / HISTORY)
    return h.get("replaced", []) if isinstance(h, dict) else []


def record_replacement(folder: Path, kind: str, recorded: dict, by: str) -> None:
    """Note in ``folder/history.json`` that the recorded key was replaced here on purpose (``--new-key``).

    Args:
        folder: the key's folder.
        kind: ``"randomness"`` or ``"agency"``.
        recorded: what was recorded of the replaced key (its md5s or id).
        by: the id of the key that replaces it."""
    from dprelease.core.io import write_json

    h = _read_json(folder / HISTORY)
    h = h if isinstance(h, dict) else {}
    entry = {
        "key": kind,
        "replaced": recorded,
        "by": by,
        "how": "--new-key",
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json(folder / HISTORY, h | {"replaced": [*h.get("replaced", []), entry]}, private=True)


def _agency_rel(params) -> str:
    """The agency key folder, relative to the root (as :func:`dprelease.core.release.signing.key_folder`)."""
    return params.signing_key or f"{params.artifacts}/keys"


# the randomness key ------------------------------------------------------------------------------------------------
def _secret_state(params, root: Path) -> tuple[Path, str | None, str | None, set[str], set[str]]:
    """(folder, current key id or None, md5 of its key_id.json, md5s and ids of keys known here besides the
    current one)."""
    from dprelease.core.privacy import secret

    folder = root / params.artifacts / "secret"
    current = secret._id(secret._read_key(folder / secret.KEY)) if (folder / secret.KEY).is_file() else None
    h = _read_json(folder / HISTORY)
    ids = set(h.get("key_ids", [])) if isinstance(h, dict) else set()
    retired = folder / secret.RETIRED  # rotated here: `<key id>-<n>`
    ids |= {p.name.rsplit("-", 1)[0] for p in retired.iterdir()} if retired.is_dir() else set()
    for r in _replaced(folder):
        ids |= {v for k, v in r.get("replaced", {}).items() if k == "key_id"}
    md5s = {_md5(secret_id_bytes(k)) for k in ids} | {
        v for r in _replaced(folder) for k, v in r.get("replaced", {}).items() if k == "md5"
    }
    return folder, current, _md5(secret_id_bytes(current)) if current else None, md5s, ids


def _agency_state(params, root: Path) -> tuple[Path, str | None, str | None, set[str], set[str]]:
    """(folder, current key id, md5 of its agency.pub, md5s and ids of keys retired or replaced here)."""
    folder = root / _agency_rel(params)
    current = md5 = None
    if (folder / AGENCY_KEY).is_file() and (folder / AGENCY_PUB).is_file():
        info = _read_json(folder / AGENCY_SIGNER)
        current = info.get("key_id") if isinstance(info, dict) else None
        md5 = _md5((folder / AGENCY_PUB).read_bytes())
    md5s, ids = set(), set()
    for old in (folder / RETIRED).glob("*/") if (folder / RETIRED).is_dir() else []:
        if (old / AGENCY_PUB).is_file():
            md5s.add(_md5((old / AGENCY_PUB).read_bytes()))
        info = _read_json(old / AGENCY_SIGNER)
        if isinstance(info, dict) and info.get("key_id"):
            ids.add(info["key_id"])
    for r in _replaced(folder):
        md5s |= {v for k, v in r.get("replaced", {}).items() if k == "md5"}
        ids |= {v for k, v in r.get("replaced", {}).items() if k == "key_id"}
    return folder, current, md5, md5s, ids


def check(
    params,
    root: str | Path = ".",
    *,
    new_key: bool = False,
    keys: tuple[str, ...] = ("randomness", "agency"),
    use_release: bool = True,
) -> list[str]:
    """Raise :class:`KeyMismatchError` (one line) unless the keys here are those the recorded release was made with.

    Args:
        params: the parsed params (where the keys and the release live).
        root: the project root.
        new_key: accept a differing or missing key: make the missing one, record the replaced one in its history.
        keys: which keys to check: ``"randomness"``, ``"agency"``.
        use_release: also compare with ``release/release.json`` (False: against dvc.lock only, as the stages do).

    Returns:
        The lines to print (what ``new_key`` did)."""
    root = Path(root)
    rel_secret, rel_agency = _release_ids(params, root) if use_release else (None, None)
    secret_path = f"{params.artifacts}/secret/{SECRET_ID}"
    agency_path = f"{_agency_rel(params)}/{AGENCY_PUB}"  # signing.public_key_dep (not imported: signing imports us)
    lock = lock_md5s(root, {secret_path, agency_path})
    lines: list[str] = []
    if "randomness" in keys:
        lines += _check_key(RANDOMNESS, params, root, lock.get(secret_path), rel_secret, new_key)
    if "agency" in keys:
        lines += _check_key(AGENCY, params, root, lock.get(agency_path), rel_agency, new_key)
    return lines


def _recorded(params, lock_md5: str | None, release_id: str | None) -> tuple[dict, str]:
    """What recorded a key (dvc.lock's md5, the release's key id) and where, as the messages name it."""
    recorded = {k: v for k, v in (("md5", lock_md5), ("key_id", release_id)) if v}
    where = " and ".join(w for w, v in (("dvc.lock", lock_md5), (f"the release in {params.release}/", release_id)) if v)
    return recorded, where


def _new_secret(params, root: Path, folder: Path) -> tuple[str, str]:
    from dprelease.core.privacy import secret

    _, kid = secret.rotate(root / params.artifacts)
    return kid, f"new randomness key {kid}"


def _new_agency(params, root: Path, folder: Path) -> tuple[str, str]:
    from dprelease.core.io import private_dir

    private_dir(folder)  # the new key itself is made by the caller, or at the first signing (signing.ensure_key)
    return "a new key", "a new agency key"


@dataclass(frozen=True, kw_only=True)
class _Key:
    """One of the two keys :func:`check` compares with the recorded ones, and how its messages name it."""

    kind: str  # as history.json records it
    name: str  # "the {name} in FOLDER"
    missing: str  # "no {missing} in FOLDER"
    made: str  # "{where} was {made} with"
    label: str  # how a key id is introduced: "(id …)", "(key …)"
    width: int | None  # how much of a key id the messages show (None: all of it)
    refused: str  # what a differing key would make
    remedy: str  # what to do about a differing key
    note: str  # added to the lines --new-key prints
    state: Callable  # (params, root) -> (folder, current id, its md5, known md5s, known ids)
    renew: Callable  # (params, root, folder) -> (what history.json records, how the line names the new key)


RANDOMNESS = _Key(
    kind="randomness",
    name="randomness key",
    missing="randomness key",
    made="made",
    label="id",
    width=None,
    refused="a different release",
    remedy="import the recorded key (`dprelease key import-private`) or "
    "accept this one as a new release with --new-key (`make run ARGS=--new-key`, `make repro NEW_KEY=1`)",
    note="",
    state=_secret_state,
    renew=_new_secret,
)
AGENCY = _Key(
    kind="agency",
    name="agency key",
    missing="agency signing key",
    made="signed",
    label="key",
    width=16,
    refused="a release signed by another key",
    remedy="import the recorded key (`dprelease key "
    "import-private`), rotate (`dprelease key rotate`), or pass --new-key (`make run ARGS=--new-key`, "
    "`make repro NEW_KEY=1`)",
    note="; give partners the new agency.pub",
    state=_agency_state,
    renew=_new_agency,
)


def _check_key(key: _Key, params, root: Path, lock_md5: str | None, release_id: str | None, new_key: bool) -> list[str]:
    """One key against what recorded it (dvc.lock's md5, the release's key id): nothing, a one-line refusal, or
    with ``new_key`` the replacement recorded in its folder's history and the line saying so."""
    folder, current, md5, known_md5s, known_ids = key.state(params, root)
    recorded, where = _recorded(params, lock_md5, release_id)
    if not recorded:
        return []
    if current is None:
        if not new_key:
            named = f" ({key.label} {release_id[: key.width]})" if release_id else ""
            raise KeyMismatchError(f"no {key.missing} in {folder}, but {where} was {key.made} with one{named}: {HOW}")
        by, what = key.renew(params, root, folder)
        record_replacement(folder, key.kind, recorded, by)
        return [f"--new-key: {what}; {where} was {key.made} with another (recorded in {folder / HISTORY}{key.note})"]
    if not _differs(lock_md5, md5, known_md5s, release_id, current, known_ids):
        return []
    if not new_key:
        named = f" {release_id[: key.width]}" if release_id else ""
        raise KeyMismatchError(
            f"the {key.name} in {folder} ({key.label} {current[: key.width]}) is not the key{named} "
            f"{where} was {key.made} with: refused ({key.refused}); {key.remedy}"
        )
    record_replacement(folder, key.kind, recorded, current)
    return [
        f"--new-key: {key.name} {current[: key.width]} replaces the one {where} was {key.made} with (recorded in "
        f"{folder / HISTORY}{key.note})"
    ]


def _differs(lock_md5: str | None, md5: str, known_md5s, release_id: str | None, current: str, known_ids) -> bool:
    """Whether a recorded key (dvc.lock's md5, the release's key id) is neither the current key nor one of its
    recorded predecessors."""
    return bool(
        (lock_md5 and lock_md5 != md5 and lock_md5 not in known_md5s)
        or (release_id and release_id != current and release_id not in known_ids)
    )
