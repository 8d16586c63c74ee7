"""The audit's population pool and canaries (dprelease.compare.mia.population) on the head slice: the pool holds
no record of the split, the canaries are mislabelled, their labels and inclusion coins come from the
secret key (not from the public seed), and only aggregates leave the private artifacts."""

from __future__ import annotations

import json
import shutil
import stat

import numpy as np
import pandas as pd
import pytest
from conftest import compare_raw, make_root, run_stages

from dprelease.compare.mia.population import _pool, audit_dir, audit_pool
from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import load_features
from dprelease.core.config import parse_params
from dprelease.core.data.splits import label_info

SMALL = {"pool_size": 300, "canaries": 40, "input_canaries": 200}


@pytest.fixture(scope="module")
def pooled(tmp_path_factory):
    params = parse_params(compare_raw(privacy_audit=SMALL))
    root = make_root(tmp_path_factory.mktemp("pool"))
    run_stages(params, root, ["secret", "stratify"])
    return params, root, audit_pool(params, root)


def _pool_files(params, root):
    """(pool folder, canary labels, canary inclusion coins)."""
    folder = audit_dir(Layout.from_params(params, root)) / "pool"
    _, labels = load_features(folder / "canaries.safetensors")
    return folder, labels.numpy(), np.load(folder / "canary_member.npy")


def test_the_pool_holds_no_record_of_the_split(pooled):
    params, root, summary = pooled
    lay = Layout.from_params(params, root)
    codes = label_info(lay)["codes"]
    pool = _pool(params, root, codes)
    split = pd.concat(
        [pd.read_csv(p, dtype=str, keep_default_na=False) for p in sorted((lay.artifacts / "data").glob("*.csv"))]
    )
    assert len(split) > 0 and len(pool) == summary["pool_rows"] == SMALL["pool_size"]
    assert not set(pool["text"]) & set(split["text"])  # no member in disguise
    assert set(pool["label"]) <= set(codes)
    assert summary["reference_pool_rows"] == len(pool) - SMALL["canaries"]


def test_canaries_are_mislabelled_with_secret_labels_and_coins(pooled, tmp_path):
    params, root, _ = pooled
    lay = Layout.from_params(params, root)
    codes = label_info(lay)["codes"]
    true = np.array([codes.index(c) for c in _pool(params, root, codes)["label"][: SMALL["canaries"]]])
    _, labels, member = _pool_files(params, root)
    assert len(labels) == len(member) == SMALL["canaries"] and (labels != true).all()  # only memorising fits them
    assert 0 < member.sum() < len(member)

    # the same params and seed with another randomness key: other labels and coins (an attacker who knows the
    # seed cannot replay membership); the operator's own key repeats them
    other = make_root(tmp_path / "other", test_key=False)  # a key of its own, from OS entropy
    run_stages(params, other, ["secret", "stratify"])
    audit_pool(params, other)
    _, labels2, member2 = _pool_files(params, other)
    assert not (np.array_equal(member, member2) and np.array_equal(labels, labels2))
    shutil.rmtree(other / params.artifacts / "secret")
    shutil.copytree(root / params.artifacts / "secret", other / params.artifacts / "secret")
    run_stages(params, other, ["stratify"])  # the roles are keyed too: the operator's key, the operator's pool
    audit_pool(params, other)
    _, labels3, member3 = _pool_files(params, other)
    assert np.array_equal(member, member3) and np.array_equal(labels, labels3)


def test_per_record_files_are_private_and_the_summary_is_aggregate(pooled):
    params, root, summary = pooled
    folder, _, _ = _pool_files(params, root)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in folder.iterdir())
    public = json.loads((Layout.from_params(params, root).metrics / "audit_pool.json").read_text())
    assert public == summary and all(isinstance(v, int) for v in public.values())
    assert public["input_canaries"] == SMALL["input_canaries"] and public["classes"] >= 2


def test_too_small_a_pool_for_the_canaries_is_refused_before_anything_is_written(pooled, tmp_path):
    params, root, _ = pooled
    big = parse_params(compare_raw(privacy_audit={**SMALL, "canaries": 290}))
    copy = tmp_path / "root"
    shutil.copytree(root, copy)
    shutil.rmtree(audit_dir(Layout.from_params(big, copy)))
    with pytest.raises(ValueError, match="only 300 unused rows for 290 canaries") as info:
        audit_pool(big, copy)
    assert "\n" not in str(info.value) and not audit_dir(Layout.from_params(big, copy)).exists()
