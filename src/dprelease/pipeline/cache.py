"""Cache keys and completion stamps.

A stage's key hashes exactly what can change its outputs: the params it reads, the contents of its
input files and its code (:attr:`Stage.code`, the static import closure of its run function's module).
Editing a plot therefore re-runs only the stages whose code imports the plots, never a posterior pass;
the generated ``dvc.yaml`` lists the folders holding that code as deps (a superset), so ``dvc repro`` never misses
a change. A completion stamp next to the artifacts records which key produced
the outputs on disk and their hashes, so outputs changed since are recomputed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from dprelease.contracts import source
from dprelease.contracts.stage import Stage, pick
from dprelease.core.config import Params
from dprelease.core.io import file_hash, private_dir, read_json, write_json


def input_key(stage: Stage, params: Params, root: str | Path = ".") -> str:
    """Hash of the params the stage reads, its input file contents (deps and evidence) and its code."""
    root = Path(root)
    h = hashlib.sha256()
    h.update(json.dumps({"stage": stage.name, "params": pick(params, stage.params)}, sort_keys=True).encode())
    for dep in stage.inputs:
        p = root / dep
        h.update(dep.encode() + (file_hash(p).encode() if p.exists() else b"<missing>"))
    h.update(source.code_hash(stage.code).encode())
    return f"{stage.name}-{h.hexdigest()[:32]}"


def _stamp_path(params: Params, root: Path, name: str) -> Path:
    return Path(root) / params.artifacts / ".stamps" / f"{name}.json"


def _out_hashes(stage: Stage, root: Path) -> dict[str, str] | None:
    hashes = {}
    for out in stage.produced:
        path = root / out
        if not path.exists():
            return None
        hashes[out] = file_hash(path)
    return hashes


def _recorded(stage: Stage, params: Params, key: str, root: Path) -> dict | None:
    """The stamp, if the outputs on disk are exactly those a run with this input key produced."""
    stamp = _stamp_path(params, Path(root), stage.name)
    if not stamp.is_file():
        return None
    try:
        recorded = read_json(stamp)
    except ValueError:
        return None
    ok = isinstance(recorded, dict) and recorded.get("key") == key and recorded.get("outs") == _out_hashes(stage, root)
    return recorded if ok else None


def is_current(stage: Stage, params: Params, key: str, root: str | Path = ".") -> bool:
    """True if the outputs on disk are exactly those a run with this input key produced."""
    return _recorded(stage, params, key, Path(root)) is not None


def current_summary(stage: Stage, params: Params, key: str, root: str | Path = ".") -> dict | None:
    """The summary the run that made the current outputs returned (None: not current, or not recorded)."""
    recorded = _recorded(stage, params, key, Path(root))
    summary = recorded.get("summary") if recorded else None
    return summary if isinstance(summary, dict) else None


def mark_done(stage: Stage, params: Params, key: str, root: str | Path = ".", summary: dict | None = None) -> None:
    """Record which key made the outputs on disk (and the run's public summary); private like the artifacts."""
    stamp = _stamp_path(params, Path(root), stage.name)
    private_dir(stamp.parent)
    write_json(stamp, {"key": key, "outs": _out_hashes(stage, Path(root)), "summary": summary}, private=True)
