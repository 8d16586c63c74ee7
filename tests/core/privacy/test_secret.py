"""The randomness key (privacy/secret.py): created once from OS entropy, private, never silently replaced,
rotated in one call; per-label seeds reproducible with the key and unrelated without it."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

from dprelease.core.privacy import secret
from dprelease.core.privacy.secret import SecretKeyError


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_init_creates_a_private_key_once(tmp_path):
    kid = secret.init(tmp_path)
    folder = tmp_path / "secret"
    assert _mode(folder) == 0o700 and _mode(folder / "key") == 0o600
    assert len(bytes.fromhex((folder / "key").read_text().strip())) == 32
    assert json.loads((folder / "key_id.json").read_text()) == {"key_id": kid}
    before = (folder / "key").read_bytes()
    assert secret.init(tmp_path) == kid and (folder / "key").read_bytes() == before  # idempotent
    assert secret.key_id(tmp_path) == kid
    # the id is a one-way hash: it does not contain the key
    assert (folder / "key").read_text().strip() not in (folder / "key_id.json").read_text()


def test_two_projects_get_different_keys(tmp_path):
    a, b = secret.init(tmp_path / "a"), secret.init(tmp_path / "b")
    assert a != b
    assert secret.seed(tmp_path / "a", "release/round2") != secret.seed(tmp_path / "b", "release/round2")


def test_seeds_are_reproducible_per_label_and_independent_across_labels(tmp_path):
    secret.init(tmp_path)
    assert secret.seed(tmp_path, "x") == secret.seed(tmp_path, "x")
    assert secret.seed(tmp_path, "x") != secret.seed(tmp_path, "y")
    assert 0 <= secret.seed(tmp_path, "x") < 2**64
    a = secret.numpy_rng(tmp_path, "coins").random(5)
    np.testing.assert_array_equal(a, secret.numpy_rng(tmp_path, "coins").random(5))
    assert not np.array_equal(a, secret.numpy_rng(tmp_path, "other").random(5))
    with pytest.raises(ValueError, match="label"):
        secret.seed(tmp_path, "")


def test_a_lost_key_is_an_error_never_a_silent_new_key(tmp_path):
    kid = secret.init(tmp_path)
    (tmp_path / "secret" / "key").unlink()
    with pytest.raises(SecretKeyError, match=f"id {kid}.*missing.*rotate"):
        secret.init(tmp_path)
    with pytest.raises(SecretKeyError, match="no randomness key"):
        secret.seed(tmp_path, "x")
    assert not (tmp_path / "secret" / "key").exists()


def test_rotate_retires_the_key_and_starts_a_new_release_line(tmp_path):
    kid = secret.init(tmp_path)
    seed_before = secret.seed(tmp_path, "release/round2")
    old, new = secret.rotate(tmp_path)
    assert old == kid and new != kid and secret.key_id(tmp_path) == new
    assert secret.seed(tmp_path, "release/round2") != seed_before
    retired = list((tmp_path / "secret" / "retired").iterdir())
    assert len(retired) == 1 and _mode(retired[0]) == 0o600 and _mode(retired[0].parent) == 0o700
    assert json.loads((tmp_path / "secret" / "history.json").read_text())["key_ids"] == [kid, new]
    # a lost key: rotate is the documented way on
    (tmp_path / "secret" / "key").unlink()
    gone, newer = secret.rotate(tmp_path)
    assert gone is None and newer not in (kid, new) and secret.init(tmp_path) == newer


def test_damaged_readable_or_mismatched_keys_are_refused(tmp_path):
    secret.init(tmp_path)
    key = tmp_path / "secret" / "key"
    os.chmod(key, 0o644)
    with pytest.raises(SecretKeyError, match="readable by others"):
        secret.seed(tmp_path, "x")
    os.chmod(key, 0o600)
    (tmp_path / "secret" / "key_id.json").write_text(json.dumps({"key_id": "0" * 16}))
    with pytest.raises(SecretKeyError, match="not the one key_id.json names"):
        secret.seed(tmp_path, "x")
    key.write_text("not hex\n")
    with pytest.raises(SecretKeyError, match="damaged"):
        secret.init(tmp_path)


def test_a_child_key_is_derived_reproducibly(tmp_path):
    secret.init(tmp_path / "parent")
    a = secret.derive_child(tmp_path / "parent", tmp_path / "child", "canary_run")
    first = secret.seed(tmp_path / "child", "x")
    assert secret.derive_child(tmp_path / "parent", tmp_path / "child", "canary_run") == a
    assert secret.seed(tmp_path / "child", "x") == first != secret.seed(tmp_path / "parent", "x")
    assert secret.derive_child(tmp_path / "parent", tmp_path / "other", "another") != a
    assert _mode(tmp_path / "child" / "secret" / "key") == 0o600


def test_rotation_changes_the_cache_key_of_exactly_the_stages_that_use_it(tmp_path):
    from conftest import slice_raw

    from dprelease.core.config import parse_params
    from dprelease.pipeline import cache, registry

    params = parse_params(slice_raw())
    registry.run_stage("secret", params, tmp_path)
    keyed = {s.name for s in registry.stages(params) if f"{params.artifacts}/secret/key_id.json" in s.deps}
    assert {
        "draw",
        "select",
        "swag_ppm",
        "swag_ppm_censored",
        "swag_ppm_uncalibrated",
        "dpsgd",
        "dpsgd_sweep",
        "audit_pool",
        "canary_runs",
    } <= keyed
    before = {s.name: cache.input_key(s, params, tmp_path) for s in registry.stages(params)}
    secret.rotate(tmp_path / params.artifacts)
    after = {s.name: cache.input_key(s, params, tmp_path) for s in registry.stages(params)}
    assert {n for n in before if before[n] != after[n]} == keyed
    assert not registry.get(params, "secret").shared  # never restored from another root's stage store
