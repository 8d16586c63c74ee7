"""What a release was made from, in three public hashes (snapshot, code, params): the registry's record of it, and what
a retrain compares before it runs anything.

See docs/service.md, "Notes from the code", `pipeline/service/fingerprint.py`."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from dprelease.contracts.source import code_hash
from dprelease.contracts.stage import pick
from dprelease.core.config import Params
from dprelease.core.io import file_hash
from dprelease.core.privacy import secret

TAGS = ("snapshot_id", "code_hash", "params_hash")


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def fingerprint(rp: Params, where: Path, snapshot: Path, key_artifacts: Path) -> dict[str, str]:
    """The three hashes of the release that the release stages make in ``where`` with params ``rp`` from
    the extract ``snapshot``; ``key_artifacts``: the project's artifacts folder (its randomness key)."""
    from dprelease.pipeline import registry  # every plug-in's stages: imported when needed only

    stages = registry.group(rp, "release")
    made = {out for s in stages for out in s.produced}
    outside = sorted({d for s in stages for d in s.deps if d not in made and d != rp.data.path})
    # resolved first: the run folder need not exist yet (``../../../artifacts/keys/agency.pub`` from it)
    paths = {d: Path(os.path.realpath(where / d)) for d in outside}
    inputs = {d: file_hash(path) if path.exists() else None for d, path in paths.items()}
    return {
        "snapshot_id": secret.keyed_file_digest(key_artifacts, snapshot),
        "code_hash": _digest({s.name: code_hash(s.code) for s in stages}),
        "params_hash": _digest(
            {
                "params": {s.name: pick(rp, s.params) for s in stages},
                "inputs": inputs,
                "key_id": secret.key_id(key_artifacts),
            }
        ),
    }


def matches(tags: dict, fp: dict) -> bool:
    """Whether a version's tags record exactly the hashes ``fp``."""
    return all(tags.get(k) == fp[k] for k in TAGS)
