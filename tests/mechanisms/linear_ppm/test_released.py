"""The linear PPM release on a tiny project: refused in one line when the diagnostics fail (nothing staged),
otherwise one secret-chosen draw staged, published signed with its card; private detail owner-only; the secret key
decides the draw."""

from __future__ import annotations

import json
import stat

import pytest
import torch

from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import save_features
from dprelease.core.config import parse_params
from dprelease.core.privacy import secret
from dprelease.core.release.folder import load_release_model, verify_release
from dprelease.mechanisms.linear_ppm import maths, released
from dprelease.mechanisms.linear_ppm.diagnostics import DiagnosticsRefused
from tests.conftest import install_test_key, tiny_problem

FAST = {"chains": 2, "warmup": 25, "draws": 25}
LOOSE = {"rhat_max": 10.0, "ess_min": 1.0, "divergences_max": 1000, "temperature_tolerance": 10.0}


def _root(tmp_path, key=True):
    if key:
        install_test_key(tmp_path)
    else:
        secret.init(tmp_path / "artifacts")
    lay = Layout.from_params(parse_params({}), tmp_path)
    for split, n, seed in (("train", 90, 0), ("validation", 30, 1), ("test", 60, 2)):
        feats, y = tiny_problem(n, classes=3, seed=seed)
        save_features(lay.features / f"{split}.safetensors", feats, y)
    lay.data.mkdir(parents=True, exist_ok=True)
    (lay.data / "labels.json").write_text(
        json.dumps(
            {
                "codes": ["1", "2", "3"],
                "titles": ["a", "b", "c"],
                "train_sizes": [30, 30, 30],
                "test_sizes": [20, 20, 20],
            }
        )
    )
    (lay.data / "public.json").write_text(json.dumps({"expected_train_size": 90}))  # the public n̂ behind δ
    (tmp_path / "metrics").mkdir(exist_ok=True)
    (tmp_path / "metrics" / "data.json").write_text(json.dumps({"train_rows": 90, "classes": 3}))
    return tmp_path


def _params(**linear):
    return parse_params({"linear_ppm": {"sampler": FAST, "diagnostics": LOOSE, **linear}})


def test_failing_diagnostics_refuse_the_release_in_one_line(tmp_path, one_torch_thread):
    root = _root(tmp_path)
    params = _params(variant="censored", diagnostics={**LOOSE, "ess_min": 1e6})
    with pytest.raises(DiagnosticsRefused) as e:
        released.draw(params, root)
    assert "\n" not in str(e.value) and "release refused" in str(e.value) and "ESS" in str(e.value)
    assert not (root / released.staged(params)).exists() and not (root / "metrics" / "linear_ppm.json").exists()
    chains = root / released.private_dir(params) / "chains"  # the detail stays, private
    assert stat.S_IMODE(chains.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in chains.rglob("*") if p.is_file())


def test_risk_release_is_staged_published_signed_and_carded(tmp_path, one_torch_thread):
    root = _root(tmp_path)
    params = _params()
    out = released.draw(params, root)
    assert out["kind"] == "ppm_local_asymptotic" and out["epsilon"] > 0
    manifest = verify_release(root / released.staged(params))
    g = manifest["guarantee"]["quantities"]
    assert g["sampler"] == "batched split HMC Markov chain" and g["dimension"] == 3 * 385
    assert "certified_directions" not in g
    assert {"rhat_max", "ess_bulk_min", "divergences", "temperature_all"} <= set(g)
    assert manifest["first_run"]["parameters"] == 3 * 385
    released.publish(params, root)
    folder = root / params.linear_ppm.release
    assert (folder / "release.sig").is_file()
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "split R-hat" in card and "temperature over ALL 1,155 parameter directions" in card
    assert "sampled by batched split HMC, chosen" in card
    _, arch, model = load_release_model(folder)
    assert arch["hidden"] == 0
    xs, _ = released.load(Layout.from_params(params, root), "test")
    staged_theta = torch.cat([model.net[-1].weight, model.net[-1].bias[:, None]], 1)
    assert torch.allclose(model(xs[:, :-1] / 384**0.5), xs @ staged_theta.T, atol=1e-4)
    private = root / released.private_dir(params)
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in (private / "chains").rglob("*") if p.is_file())
    for run in ("risk", "risk-unweighted"):  # both runs' private detail
        assert (private / "chains" / "release" / run / "diagnostics.json").is_file()
    assert "record_risk" not in json.dumps(manifest) and "weights" not in manifest


def test_the_secret_key_decides_the_draw(tmp_path, one_torch_thread):
    params = _params(variant="censored")
    thetas = []
    for name, key in (("a", True), ("b", True), ("c", False)):
        root = _root(tmp_path / name, key=key)
        lay = Layout.from_params(params, root)
        xa, y = released.load(lay, "train")
        target = maths.Target(xa=xa, y=y, n_classes=3, prior_precision=100.0, kappa=4.0)
        run = released.sample_run(params, lay, target, "t")
        thetas.append(run.draw(secret.numpy_rng(lay.artifacts, "draw"))[1])
    assert torch.equal(thetas[0], thetas[1])  # same key: the same draw
    assert not torch.allclose(thetas[0], thetas[2])  # another key: another draw


def test_the_declared_sampler_kind_is_the_one_that_runs(tmp_path, one_torch_thread):
    """``linear_ppm.sampler.kind: nuts_pyro`` runs Pyro's NUTS (the reference) and the record names it."""
    root = _root(tmp_path)
    params = _params(variant="censored", sampler={**FAST, "kind": "nuts_pyro", "warmup": 10, "draws": 10})
    released.draw(params, root)
    g = verify_release(root / released.staged(params))["guarantee"]["quantities"]
    assert g["sampler"] == "NUTS (Pyro) Markov chain"
