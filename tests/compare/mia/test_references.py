"""Stage ``audit_references``: R offline models on pool subsets and R online models on complementary halves of
the targets (every target IN for exactly half of them), φ for every target under each, stored owner-only."""

from __future__ import annotations

import stat

import numpy as np
import torch
from conftest import copy_root

from dprelease.compare.mia.population import audit_dir
from dprelease.compare.mia.references import audit_references, targets
from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import save_features
from dprelease.core.io import read_json


def test_reference_models_cover_every_target_and_each_is_in_for_half(head_run, tmp_path):
    root = copy_root(head_run.root, tmp_path / "root")
    p = head_run.params
    params = p.model_copy(
        update={
            "privacy_audit": p.privacy_audit.model_copy(update={"references": 4}),
            "nonprivate": p.nonprivate.model_copy(update={"epochs": 1}),
        }
    )
    lay = Layout.from_params(params, root)
    feats, y, member = targets(lay)
    assert member.sum() == read_json(lay.metrics / "data.json")["train_rows"] and member[0] and not member[-1]
    pool_x = feats["x"][torch.randperm(len(y), generator=torch.Generator().manual_seed(0))[:30]]  # a stand-in pool
    save_features(audit_dir(lay) / "pool" / "reference_pool.safetensors", {"x": pool_x + 0.01}, y[:30])

    summary = audit_references(params, root)
    refs = audit_dir(lay) / "references"
    phi, phi_on, in_mask = (np.load(refs / f"{n}.npy") for n in ("phi", "phi_online", "in_mask"))
    assert phi.shape == phi_on.shape == in_mask.shape == (4, len(y))
    assert np.isfinite(phi).all() and np.isfinite(phi_on).all()
    assert (in_mask.sum(0) == 2).all()  # each target IN for half the models
    assert (in_mask[0] ^ in_mask[1]).all() and (in_mask[2] ^ in_mask[3]).all()
    assert summary == read_json(lay.metrics / "audit_references.json")
    assert summary["reference_train_size"] == 15 and summary["targets"] == len(y)  # half the pool (smaller)
    assert stat.S_IMODE(refs.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in refs.iterdir())
    again = audit_references(params, root)  # the attacker's coins: a public seed
    assert again == summary and np.array_equal(np.load(refs / "phi.npy"), phi)
