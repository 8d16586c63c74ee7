"""What a release is made from (dprelease.pipeline.service.fingerprint): the snapshot's sha256, the release stages'
code and the params they read (with the key ids and the agency's public key). The same inputs give the
same hashes; each kind of change moves exactly its hash; settings no release stage reads move none. How a
retrain uses them: tests/flows/test_retrain_unchanged.py."""

from __future__ import annotations

import shutil

import pytest
import yaml
from conftest import SLICE_DATA, make_root, slice_raw

from dprelease.core.config import load_params
from dprelease.core.privacy import secret
from dprelease.core.release import signing
from dprelease.pipeline.service import fingerprint as fpr
from dprelease.pipeline.service import retrain as svc
from dprelease.pipeline.service.snapshots import snapshot_rel


@pytest.fixture
def project(tmp_path):
    root = make_root(tmp_path)
    (root / "params.yaml").write_text(yaml.safe_dump(slice_raw(), sort_keys=False), encoding="utf-8")
    secret.init(root / "artifacts")
    signing.ensure_key(signing.key_folder(load_params(root / "params.yaml"), root))
    return root


def _fp(root, snapshot=None, overrides=None):
    p = load_params(root / "params.yaml", overrides)
    snapshot = snapshot or root / SLICE_DATA
    rel = snapshot_rel(snapshot, artifacts=root / p.artifacts)
    return fpr.fingerprint(svc.run_params(p, rel), svc.run_folder(root, rel), snapshot, root / p.artifacts)


def _changed(a: dict, b: dict) -> set[str]:
    return {k for k in fpr.TAGS if a[k] != b[k]}


def test_same_inputs_same_hashes_and_each_change_moves_its_own(project, monkeypatch):
    first = _fp(project)
    assert set(first) == set(fpr.TAGS) and _fp(project) == first
    assert fpr.matches({**first, "other": "x"}, first) and not fpr.matches({}, first)
    # settings no release stage reads (the schedule, the audit, the tuning grid) change nothing
    assert _fp(project, overrides={"service.cron": "* * * * *", "service.audit": False, "tune.workers": 1}) == first
    # a param of a release stage
    assert _changed(first, _fp(project, overrides={"ppm.c": 0.9})) == {"params_hash"}
    # other bytes under the same name: another snapshot (and another run folder)
    other = project / "data" / "other.csv.gz"
    shutil.copyfile(project / SLICE_DATA, other)
    assert _changed(first, _fp(project, other)) == {"params_hash"}  # same bytes: its own path only
    other.write_bytes(other.read_bytes() + b"\n")
    assert "snapshot_id" in _changed(first, _fp(project, other))
    # the code of a release stage
    real = fpr.code_hash
    monkeypatch.setattr(
        fpr, "code_hash", lambda paths: real(paths) + ("!" if "core/release/folder.py" in paths else "")
    )
    assert _changed(first, _fp(project)) == {"code_hash"}
    monkeypatch.setattr(fpr, "code_hash", real)
    # a rotated randomness key, a new agency key
    secret.rotate(project / "artifacts")
    rotated = _fp(project)
    assert _changed(first, rotated) == {"params_hash", "snapshot_id"}  # the snapshot's id is keyed (HMAC)
    shutil.rmtree(project / "artifacts" / "keys")
    signing.ensure_key(project / "artifacts" / "keys")
    assert _changed(rotated, _fp(project)) == {"params_hash"}
