"""The one shared publish step (``dprelease.core.release.stages``): the declared mechanism's staged release signed into
``params.release``, the card rendered from its kind, the release record ``metrics/released.json``; DP-SGD (the
default declaration, linear and MLP head) and SWAG-PPM through the same stage; a mechanism that releases nothing
refused in one line."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import compare_raw, copy_root

from dprelease.core.config import parse_params
from dprelease.core.errors import ConfigError
from dprelease.core.io import read_json
from dprelease.core.release.folder import Coder, verify_release
from dprelease.core.release.signing import key_folder
from dprelease.pipeline import registry


def _declared(mechanism: str, **overrides):
    return parse_params(compare_raw(released__mechanism=mechanism, **overrides))  # the slice's short DP-SGD settings


def _release(params, root):
    """The declared mechanism's own staging stage, then the shared publish step, as the release flow runs them."""
    names = [s.name for s in registry.group(params, "release")]
    assert names[-1] == "publish" or "publish" in names
    stage = registry.get(params, "publish")
    producer = next(s for s in registry.group(params, "release") if stage.deps[0] in s.outs)
    registry.run_stage(producer.name, params, root)
    return registry.run_stage("publish", params, root)


@pytest.mark.parametrize("hidden", [0, 16])
def test_dpsgd_is_released_through_the_shared_publish_step(head_run, tmp_path, hidden):
    root = copy_root(head_run.root, tmp_path / "root")
    params = _declared("dpsgd", dpsgd__head__hidden=hidden)
    out = _release(params, root)
    manifest = verify_release(root / params.release)  # hashes, allow-list, shapes: a release like any other
    g = manifest["guarantee"]
    assert out["mechanism"] == "dpsgd" and g["kind"] == "dp_accountant" and manifest["mechanism"] == "dpsgd"
    assert (
        g["quantities"]["target_epsilon"] == params.released.epsilon and g["epsilon"] <= params.released.epsilon * 1.001
    )
    n = read_json(root / "metrics" / "data.json")["public"]["expected_train_size"]  # the public n̂
    assert 0 < g["delta"] <= n**-1.1 + 1e-15  # the declared default δ
    tuning = "public proxy" if hidden == 0 else "private validation (not covered)"  # the proxy's grid is linear
    assert manifest["tuning"] == tuning and manifest["configuration"]["hidden"] == hidden
    assert manifest["signed_by"]["key_id"] and manifest["randomness"]["secret_key_id"]
    card = (root / params.release / "README.md").read_text(encoding="utf-8")
    assert "DP-SGD release" in card and "dp_accountant" in card and f"{g['epsilon']:.3f}" in card
    assert tuning in card and ("linear softmax head" in card) == (hidden == 0)
    record = read_json(root / "metrics" / "released.json")
    assert record["guarantee"] == g and record["arm"] == "dpsgd" and record["mechanism"] == "dpsgd"
    assert record["weighted_f1"] == manifest["test_f1"]["weighted_f1"]
    coder = Coder(root / params.release, key=key_folder(params, root) / "agency.pub")
    texts = pd.read_csv(root / params.artifacts / "data" / "test.csv")["text"].tolist()[:5]
    coded = coder(texts)
    assert len(coded) == 5 and set(coded["code"]) <= set(read_json(root / params.release / "labels.json")["codes"])


def test_swag_ppm_is_released_through_the_same_stage(head_run, tmp_path):
    root = copy_root(head_run.root, tmp_path / "root")
    params = head_run.params
    assert params.released.mechanism == "swag_ppm"
    stage = registry.get(params, "publish")
    assert stage.deps[0] == f"{params.artifacts}/draw" and "metrics/evaluation.json" in stage.deps
    registry.run_stage("publish", params, root)
    record = read_json(root / "metrics" / "released.json")
    assert record["guarantee"] == read_json(root / "metrics" / "swag_ppm_draw.json")["guarantee"]
    assert record["arm"] in ("swag_ppm", "swag_ppm_reweighted") and record["mechanism"] == "swag_ppm"


def test_nearest_class_mean_is_released_through_the_same_stage(head_run, tmp_path):
    """The released head's argmax is the cosine rule of the noisy class sums (dprelease.mechanisms.ncm.maths.predict)."""
    import torch

    from dprelease.mechanisms.ncm import maths
    from dprelease.mechanisms.ncm.released import head

    root = copy_root(head_run.root, tmp_path / "root")
    params = _declared("ncm")
    out = _release(params, root)
    manifest = verify_release(root / params.release)
    g = manifest["guarantee"]
    # the class sums and the DP evaluation together meet the declared ε (exact Gaussian composition, σ rounded up)
    assert out["mechanism"] == "ncm" and g["kind"] == "dp_accountant"
    assert params.released.epsilon - 1e-3 < g["epsilon"] <= params.released.epsilon + 1e-9
    q = g["quantities"]
    assert q["training_epsilon"] < g["epsilon"] and q["evaluation_noise_multiplier"] == params.released.evaluation_noise
    assert manifest["test_f1"]["kind"] == "dp_noised_counts" and "coverage" in manifest
    assert (
        manifest["tuning"] == "public proxy"
        and "nearest class mean" in (root / params.release / "README.md").read_text()
    )
    record = read_json(root / "metrics" / "released.json")
    assert record["mechanism"] == "ncm" and record["weighted_f1"] == manifest["test_f1"]["weighted_f1"]
    gen = torch.Generator().manual_seed(0)
    sums, x = torch.randn(5, 8, dtype=torch.float64, generator=gen), torch.randn(30, 8, generator=gen)
    shift = torch.randn(8, dtype=torch.float64, generator=gen)
    centres = sums / sums.norm(dim=1, keepdim=True)
    with torch.no_grad():
        assert torch.equal(head(centres, None)(x).argmax(1), maths.predict(sums, x))
        assert torch.equal(head(centres, shift)(x).argmax(1), maths.predict(sums, x.double() - shift))


def test_exactly_one_mechanism_declares_the_publish_stage():
    for mechanism in ("dpsgd", "swag_ppm", "linear_ppm", "ncm", "public_only"):
        params = _declared(mechanism)
        publishing = [s for s in registry.stages(params) if s.name == "publish"]
        assert len(publishing) == 1 and params.release in publishing[0].outs
        spec = registry.release_spec(params)  # resolved once, by the registry: the release group holds its stage
        release = {s.name for s in registry.group(params, "release", active_only=False)}
        assert spec.mechanism == mechanism and {spec.stage, "publish"} <= release
        others = {registry.releasing()[m]["stage"] for m in registry.releasing() if m != mechanism} - {"draw"}
        assert not others & release  # every other mechanism's release stage stays in its own group


def test_a_mechanism_that_releases_nothing_is_refused_in_one_line(tmp_path):
    params = _declared("nonprivate")
    with pytest.raises(ConfigError, match=r"released.mechanism: 'nonprivate' releases nothing here .*dpsgd") as err:
        registry.release_spec(params)  # the release flow's preflight
    assert "\n" not in str(err.value)
    assert not [s for s in registry.stages(params) if s.name == "publish"]
