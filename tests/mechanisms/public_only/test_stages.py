"""The public model as a mechanism: its frontier point (ε 0, the floor) and its release (``released.mechanism:
public``), published and verified, whose model reads no private report — scrambling every private split's features
leaves its weights byte-identical — and whose only stated ε is the DP evaluation's (μ = 1/z, exact)."""

from __future__ import annotations

import shutil

import pytest
import torch
from conftest import compare_raw, make_root
from safetensors.torch import load_file, save_file

from dprelease.contracts.layout import Layout
from dprelease.core.config import parse_params
from dprelease.core.data.splits import n_public
from dprelease.core.io import read_json
from dprelease.core.privacy.gaussian import mu_epsilon
from dprelease.core.privacy.target import default_delta
from dprelease.core.release.classifier import verify_release
from dprelease.core.utility.points import points_file, read_points
from dprelease.pipeline import registry

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    root = make_root(tmp_path_factory.mktemp("public"))
    params = parse_params(compare_raw(released__mechanism="public_only"))
    for name in ("secret", "stratify", "featurize", "frontier_public", "public_release", "publish"):
        registry.run_stage(name, params, root)
    return root, params


def _weights(root, params) -> dict:
    folder = root / params.artifacts / "public_release" / "release"
    return {k: v.clone() for k, v in load_file(next(folder.rglob("*.safetensors"))).items()}


def test_the_release_states_only_the_evaluations_epsilon_and_no_private_count(released):
    root, params = released
    manifest = verify_release(root / params.release)
    g, q = manifest["guarantee"], manifest["guarantee"]["quantities"]
    delta = default_delta(n_public(Layout.from_params(params, root)))
    assert g["kind"] == "dp_accountant" and g["delta"] == pytest.approx(delta)
    assert g["epsilon"] == pytest.approx(mu_epsilon(1 / params.released.evaluation_noise, delta))
    assert q["training_epsilon"] == 0.0 and q["private_reports_read"] == 0
    assert manifest["test_f1"]["kind"] == "dp_noised_counts" and manifest["mechanism"] == "public_only"
    assert "records" not in manifest and manifest["tuning"] == "public proxy"
    card = (root / params.release / "README.md").read_text(encoding="utf-8")
    assert "the public model release" in card and "What the guarantee covers" in card
    record = read_json(root / "metrics/released.json")
    assert record["mechanism"] == "public_only"


def test_the_frontier_point_is_the_floor_at_epsilon_zero(released):
    root, _ = released
    doc, (point,) = read_points(points_file(root, "public_only"))
    assert point.kind == "public_only" and point.epsilon == 0.0 and point.tuning == "public proxy"
    assert 0.0 < point.proxy_weighted_f1 <= 1.0 and doc["grid_size"] == 3


def test_its_weights_read_no_private_report(released, tmp_path):
    root, params = released
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    before = _weights(copy, params)
    features = copy / params.artifacts / "features"
    for split in ("train", "validation", "test"):  # every private split's embeddings scrambled
        path = features / f"{split}.safetensors"
        tensors = load_file(path)
        save_file({k: (torch.randn_like(v) if v.is_floating_point() else v) for k, v in tensors.items()}, path)
    registry.run_stage("public_release", params, copy)
    after = _weights(copy, params)
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
