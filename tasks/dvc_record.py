"""The Prefect tasks and DVC share one cache: each finished stage is recorded in ``dvc.lock``.

Where a flow runs in a DVC project's root, every stage it runs (or restores, or finds current) is committed
to DVC as ``dvc commit STAGE`` would: DVC hashes the stage's deps, params and outputs, keeps the outputs in
its cache (the same objects the stage store indexes: :mod:`dprelease.pipeline.stage_store`) and writes the stage's
entry in ``dvc.lock``. ``dvc status`` then agrees with the flow, ``dvc push`` sends exactly what the flow
stored, and ``dvc exp show`` sees the flow's metrics.

A stage is recorded only when DVC would describe the same computation: the root holds ``.dvc/`` and a
``dvc.yaml`` whose entry for the stage is the registry's (``dprelease dvc-yaml``), the params the stage reads
are those of the root's ``params.yaml`` (a flow run with ``--set`` or another params file is not what
``dvc.yaml`` describes), and every input exists. Otherwise :func:`record` says why and records nothing.
Outputs DVC must not cache (the randomness key's id, ``cache: false``) are hashed into ``dvc.lock`` only.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import sys
import threading
from pathlib import Path

import yaml

from dprelease.contracts.stage import Stage, pick
from dprelease.core.config import Params, parse_params
from dprelease.core.io import private_dir, read_json, write_json
from dprelease.pipeline import registry
from dprelease.pipeline.stage_store import default_objects, file_md5

_LOCK = threading.Lock()  # DVC locks its repository: one commit at a time (stage tasks may finish on several threads)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: dvc.lock is read once per stage, and is large


_PARSED: dict[tuple[str, str], object] = {}  # (what, sha256 of the bytes) → parsed: by content, never stale


def _parsed(path: Path, what: str, parse):
    """``parse(text)`` of the file's bytes, remembered by their hash: every stage task reads the same dvc.yaml,
    dvc.lock and params.yaml (tens of milliseconds a parse, twice per stage); read-only to callers."""
    data = path.read_bytes()
    key = (what, hashlib.sha256(data).hexdigest())
    if key not in _PARSED:
        if len(_PARSED) > 32:
            _PARSED.clear()
        _PARSED[key] = parse(data.decode("utf-8"))
    return _PARSED[key]


def _read_yaml(path: Path) -> dict:
    return _parsed(path, "yaml", lambda text: yaml.load(text, Loader=_LOADER) or {})  # noqa: S506 - a safe loader


def _root_params(root: Path) -> Params:
    """The root's ``params.yaml``, as :func:`load_params` reads it, parsed once per content (a missing or invalid
    file raises, as there)."""
    return _parsed(root / "params.yaml", "params", lambda text: parse_params(yaml.safe_load(text)))


@functools.lru_cache(maxsize=4)
def _dvc_yaml(params_json: str) -> dict:
    return registry.dvc_yaml(Params.model_validate_json(params_json))


def _expected(params: Params) -> dict:
    """The registry's ``dvc.yaml`` for ``params`` (read-only), computed once per params: every stage task of a
    flow validates its own ``Params`` object from the same values."""
    return _dvc_yaml(params.model_dump_json())


def dvc_root(root: str | Path) -> Path | None:
    """The DVC project holding ``root`` (``root`` itself or a parent with ``.dvc/``), or None."""
    root = Path(root).resolve()
    return next((p for p in (root, *root.parents) if (p / ".dvc").is_dir()), None)


@functools.lru_cache(maxsize=8)
def _cache_dir(project: Path) -> Path:
    from dvc.repo import Repo

    with Repo(str(project)) as repo:
        return Path(repo.cache.local.path).parents[1]  # <cache>/files/md5 → <cache>


def objects_dir(root: str | Path, store: Path) -> Path:
    """Where stage outputs' bytes go: the DVC cache of the project holding ``root`` (owner-only), else the
    store's own cache (same layout)."""
    project = dvc_root(root)
    return private_dir(_cache_dir(project)) if project else default_objects(store)


def _declared(root: Path) -> dict:
    path = root / "dvc.yaml"
    return _read_yaml(path).get("stages", {}) if path.is_file() else {}


def why_not(name: str, params: Params, root: str | Path, inputs: bool = True) -> str | None:
    """Why stage ``name`` run with ``params`` in ``root`` cannot be recorded in DVC (None: it can);
    ``inputs=False``: whatever its inputs (not made yet)."""
    root = Path(root)
    if not (root / ".dvc").is_dir() or not (root / "dvc.yaml").is_file():
        return "not a DVC project root"
    expected = _expected(params)["stages"].get(name)
    if expected is None or _declared(root).get(name) != expected:
        return "dvc.yaml does not declare it as the registry does (regenerate it: dprelease dvc-yaml)"
    try:
        dvc_params = _root_params(root)
    except Exception:  # noqa: BLE001 - any unreadable params file: DVC cannot read it either
        return "params.yaml is missing or invalid"
    keys = expected.get("params", [])
    if json.dumps(pick(dvc_params, keys), sort_keys=True) != json.dumps(pick(params, keys), sort_keys=True):
        return "run with params other than params.yaml"
    missing = [d for d in expected.get("deps", []) if inputs and not (root / d).exists()]
    return f"input {missing[0]} does not exist" if missing else None


def _lock_entry(root: Path, name: str) -> str:
    """A hash of stage ``name``'s entry in ``dvc.lock`` ("" if none)."""
    try:
        lock = _read_yaml(root / "dvc.lock")
    except (OSError, yaml.YAMLError):
        return ""
    entry = (lock.get("stages") or {}).get(name)
    return hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest() if entry else ""


def _mark(params: Params, root: Path, name: str) -> Path:
    return root / params.artifacts / ".stamps" / f"{name}.dvc.json"


def record(name: str, params: Params, root: str | Path, key: str | None = None) -> str | None:
    """Commit stage ``name``'s outputs to DVC's cache and its entry to ``dvc.lock``; None once recorded,
    else why not (nothing written). ``key``: the input key of outputs already current (their stamp matched):
    when the ``dvc.lock`` entry this function wrote for that key is still there, it still describes them
    (same inputs, params and code; same outputs), and DVC is not asked again."""
    reason = why_not(name, params, root)
    if reason is not None:
        return reason
    root = Path(root).resolve()
    mark = _mark(params, root, name)
    if key is not None and mark.is_file():
        try:  # the key says nothing of the other files of its code's folders (dvc.yaml's deps): those are checked
            if read_json(mark) == {"key": key, "entry": _lock_entry(root, name)} and _code_as_locked(root, name):
                return None
        except ValueError:
            pass
    if _as_locked(root, name, params):  # `dvc commit` would write the entry that is there: note it, commit nothing
        mark_recorded(name, params, root, key) if key is not None else _note_stamped(params, root, name)
        return None
    private_dir(_cache_dir(root))
    with _LOCK:  # DVC resolves stage names and its run cache against the working directory: run it in root
        done = subprocess.run(
            [sys.executable, "-m", "dvc", "commit", "-q", "-f", "--no-relink", name],
            cwd=root,
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        raise RuntimeError(f"dvc commit {name}: {' '.join((done.stderr or done.stdout).split())[:300]}")
    _note_stamped(params, root, name)
    return None


def _note_stamped(params: Params, root: Path, name: str) -> None:
    stamp = root / params.artifacts / ".stamps" / f"{name}.json"
    try:
        stamped = read_json(stamp).get("key") if stamp.is_file() else None
    except ValueError:
        stamped = None
    if stamped:  # the key whose outputs were just recorded (the stage task marks them done first)
        write_json(_mark(params, root, name), {"key": stamped, "entry": _lock_entry(root, name)}, private=True)


def _dotted(raw: dict, key: str):
    node = raw
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


_MISSING = object()


_MD5: dict[tuple, str] = {}  # (path, inode, size, mtime) → MD5: as DVC's state, a file is hashed once per version


def _md5(path: Path) -> str:
    st = path.stat()
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _MD5:
        _MD5[key] = file_md5(path)
    return _MD5[key]


def _code_folder(root: Path, item: dict) -> dict:
    """DVC 3's entry for a folder of the package's source (``dvc.yaml``'s code deps), as ``dvc commit`` writes
    it: the MD5 of its ``.dir`` listing (each file DVC sees, after ``.dvcignore``: its MD5 and path), the files'
    total size and count."""
    from dvc.fs import LocalFileSystem
    from dvc.ignore import DvcIgnoreFilter

    fs, folder = LocalFileSystem(), root / item["path"]
    files = sorted(Path(f) for f in DvcIgnoreFilter(fs, str(root)).find(fs, str(folder)))
    listing = [{"md5": _md5(f), "relpath": f.relative_to(folder).as_posix()} for f in files]
    digest = hashlib.md5(json.dumps(listing, sort_keys=True).encode("utf-8")).hexdigest()
    return {**item, "md5": f"{digest}.dir", "size": sum(f.stat().st_size for f in files), "nfiles": len(files)}


def _code_folders(root: Path, entry: dict) -> list[dict]:
    """The deps of a ``dvc.lock`` entry that are folders of the package's source."""
    prefix = f"{registry.PACKAGE_ROOT}/"
    return [d for d in entry.get("deps", []) if d["path"].startswith(prefix) and (root / d["path"]).is_dir()]


def _code_as_locked(root: Path, name: str) -> bool:
    """Every code folder of stage ``name``'s ``dvc.lock`` entry hashes as recorded (no entry: False)."""
    try:
        entry = (_read_yaml(root / "dvc.lock").get("stages") or {}).get(name)
    except (OSError, yaml.YAMLError):
        return False
    return bool(entry) and all(_code_folder(root, d) == d for d in _code_folders(root, entry))


def _as_locked(root: Path, name: str, params: Params) -> bool:
    """``dvc.lock``'s entry for stage ``name`` is what ``dvc commit`` would write now: the deps and outputs
    ``dvc.yaml`` declares, each a file of the recorded size and MD5 (DVC 3's hash: of the bytes) or a folder of
    the package's source of the recorded ``.dir`` hash (:func:`_code_folder`), each param the recorded value in
    ``params.yaml``. Another folder, a missing hash or any difference: False (DVC is asked). The case of a second
    clone's first run, whose stages DVC's status cannot restore (the key's id: not shared)."""
    try:
        entry = (_read_yaml(root / "dvc.lock").get("stages") or {}).get(name)
    except (OSError, yaml.YAMLError):  # no dvc.lock yet (a project's first run), or one DVC cannot read either
        return False
    if not entry:
        return False
    declared = _expected(params)["stages"].get(name) or {}
    outs = [o if isinstance(o, str) else next(iter(o)) for o in declared.get("outs", []) + declared.get("metrics", [])]
    if sorted(d["path"] for d in entry.get("deps", [])) != sorted(declared.get("deps", [])) or sorted(
        o["path"] for o in entry.get("outs", [])
    ) != sorted(outs):
        return False
    code = _code_folders(root, entry)
    if any(_code_folder(root, d) != d for d in code):
        return False
    files = [d for d in entry.get("deps", []) if d not in code] + entry.get("outs", [])
    for item in files:
        path = root / item["path"]
        if not path.is_file() or "md5" not in item or path.stat().st_size != item.get("size"):
            return False
    if any(file_md5(root / i["path"]) != i["md5"] for i in files):
        return False
    recorded = (entry.get("params") or {}).get("params.yaml", {})
    raw = _read_yaml(root / "params.yaml")
    return sorted(recorded) == sorted(declared.get("params", [])) and all(
        _dotted(raw, k) == v for k, v in recorded.items()
    )


def mark_recorded(name: str, params: Params, root: str | Path, key: str) -> None:
    """Outputs DVC's status found exactly as ``dvc.lock`` records them (:func:`restored`): note that the entry
    describes ``key``'s outputs, as :func:`record` notes after its ``dvc commit``, without committing again (a
    subprocess of about 1.5 s per stage, for nothing: the entry and the cache already hold them)."""
    root = Path(root).resolve()
    write_json(_mark(params, root, name), {"key": key, "entry": _lock_entry(root, name)}, private=True)


_STATUS: dict[Path, dict] = {}  # `dvc status --json` of a root, while no stage has run there since


def restored(name: str, params: Params, root: str | Path) -> bool:
    """Whether stage ``name``'s outputs on disk are exactly what ``dvc.lock`` records for its current inputs:
    DVC's own status of the stage is clean (same deps, params, code and outputs), as after ``dvc pull`` in a second
    clone with the keys imported. Then the outputs count as done: nothing is recomputed. False outside a DVC root,
    for a stage DVC does not describe with these params, or when DVC cannot say. One ``dvc status`` of the whole
    pipeline answers every stage until a stage runs there (:func:`forget_status`)."""
    top = Path(root).resolve()
    if why_not(name, params, root) is not None or not _lock_entry(top, name):
        return False
    if top not in _STATUS:
        with _LOCK:  # as `dvc commit`: a subprocess in the root (DVC's in-process API wants the main thread)
            done = subprocess.run(
                [sys.executable, "-m", "dvc", "status", "--json"], cwd=top, capture_output=True, text=True
            )
        try:
            status = json.loads(done.stdout or "{}") if done.returncode == 0 else None
        except ValueError:
            status = None
        if not isinstance(status, dict):
            return False
        _STATUS[top] = status
    return name not in _STATUS[top]


def forget_status(root: str | Path) -> None:
    """A stage ran in ``root``: its outputs, hence the status of what follows, may have changed."""
    _STATUS.pop(Path(root).resolve(), None)


def pipeline(params: Params, group: str, root: str | Path) -> list[Stage]:
    """The stages of ``group`` a flow runs (declared once): the active ones; in a DVC project root with
    ``params.yaml``'s params, every one (an inactive stage writes only its marker, as under ``dvc repro``), so
    that all of them are recorded."""
    return [
        s
        for s in registry.group(params, group, active_only=False)
        if s.active(params) or why_not(s.name, params, root, inputs=False) is None
    ]


def unrecorded(params: Params, names: list[str], root: str | Path) -> dict[str, str]:
    """In a DVC project root: the stages of ``names`` not recorded in ``dvc.lock``, with why ({} elsewhere)."""
    if not (Path(root) / ".dvc").is_dir():
        return {}
    return {n: r for n in names if (r := why_not(n, params, root)) is not None}
