"""Every SWAG-PPM release stage run in-process on a tiny OSHA slice (head and full-tiny backends,
re-weighting on and off): outputs where the registry declares them, and the mechanism's invariants."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from conftest import SliceRun, run_stages

from dprelease.core.io import read_json
from dprelease.pipeline import registry

pytestmark = pytest.mark.slow


@pytest.fixture(params=["head", "full"])
def run(request) -> SliceRun:
    return request.getfixturevalue(f"{request.param}_run")


def _metrics(run: SliceRun, name: str) -> dict:
    return read_json(run.path(f"metrics/{name}.json"))


# outputs ---------------------------------------------------------------------------------------------
def test_every_active_stage_ran(run):
    assert list(run.summaries) == [s.name for s in registry.group(run.params, "release")]
    assert len(run.summaries) == 13  # the key + 11 SWAG-PPM stages (round 3 is one stage, `reweight`) + publish


def test_outputs_exist_where_specs_say(run):
    for spec in registry.group(run.params, "release"):
        for rel in [*spec.outs, *spec.metrics, *spec.plots]:
            assert run.path(rel).exists(), f"{spec.name}: missing output {rel}"
        for rel in spec.outs:  # outputs are directories with content, never left empty
            p = run.path(rel)
            assert not p.is_dir() or any(p.iterdir()), f"{spec.name}: {rel} is empty"


def test_no_temporary_leftovers(run):
    leftovers = [p for p in run.root.rglob("*") if p.name.endswith((".tmp", ".old")) and p.name.startswith(".")]
    assert leftovers == []


def test_data_split(run):
    data = _metrics(run, "data")
    folder = run.path(f"{run.params.artifacts}/data")
    labels = read_json(folder / "labels.json")
    sizes = read_json(folder / "sizes.json")
    assert data["classes"] == len(labels["codes"]) == 4 and set(labels) == {"codes", "titles"}
    assert data["rows"] == data["train_rows"] + data["test_rows"] + data["validation_rows"] > 0
    assert data["validation_rows"] > 0  # the default keeps a validation split for re-weighting acceptance
    train = pd.read_csv(folder / "train.csv", dtype=str, keep_default_na=False)
    assert len(train) == data["train_rows"] == sum(sizes["train_sizes"])
    assert set(train["label"]) == set(labels["codes"])
    assert data["public"] == run.summaries["stratify"]  # the stage returns public figures only


# weights -------------------------------------------------------------------------------------------------
def test_round2_weights_span_0_to_1(run):
    """c = 1, g = 0 with min-max normalised risk: the riskiest record gets 0, the safest 1 (docs/algorithms.md, B.4)."""
    assert (run.params.ppm.c, run.params.ppm.g, run.params.ppm.risk_norm) == (1.0, 0.0, "minmax")
    w = np.load(run.path(f"{run.params.artifacts}/round2/weights/weights.npy"))
    assert w.ndim == 1 and len(w) == _metrics(run, "data")["train_rows"]
    assert np.isfinite(w).all()
    assert w.min() == 0.0 and w.max() == 1.0
    risk = _metrics(run, "risk")
    assert risk["weights_zero"] >= 1 and risk["weights_one"] >= 1
    assert risk["weight_mean"] == pytest.approx(float(w.mean()))


def test_round3_weights_in_unit_interval(run):
    w2 = np.load(run.path(f"{run.params.artifacts}/round2/weights/weights.npy"))
    w3 = np.load(run.path(f"{run.params.artifacts}/round3/weights/weights.npy"))
    assert w3.shape == w2.shape
    assert np.isfinite(w3).all() and w3.min() >= 0.0 and w3.max() <= 1.0
    assert (w3[w2 == 0] == 0).all()  # power form with k < 1: a zero weight stays zero


# sensitivity and ε --------------------------------------------------------------------------------------
@pytest.mark.parametrize("r", [2, 3])
def test_sensitivity_epsilon_is_twice_delta(run, r):
    sens = _metrics(run, f"sensitivity_r{r}")
    max_deltas = np.load(run.path(f"{run.params.artifacts}/round{r}/sensitivity/max_deltas.npy"))
    assert len(max_deltas) == sens["draws"]
    from dprelease.contracts.layout import Layout
    from dprelease.mechanisms.swag_ppm.reweighting import decision_file

    decision = read_json(decision_file(Layout.from_params(run.params, run.root)))  # private: the test may read it
    if r == 2 or decision["reached"]:  # a refit above its bound may stop after half its draws
        assert sens["draws"] == run.params.ppm.draws
    assert sens["local_sensitivity"] == pytest.approx(float(max_deltas.max()), rel=1e-12)
    assert sens["epsilon"] == pytest.approx(2 * sens["local_sensitivity"], rel=1e-12)
    assert sens["local_sensitivity"] > 0
    if r == 2:
        assert sens == run.summaries["sensitivity_r2"]


def test_released_epsilon_at_least_round_epsilon(run):
    rel = _metrics(run, "swag_ppm_draw")
    decision = _metrics(run, "reweight")
    r = decision["released_round"]
    assert r == (3 if decision["accepted"] else 2)
    sens = _metrics(run, f"sensitivity_r{r}")
    g = rel["guarantee"]
    assert rel["round"] == r == g["quantities"]["round"]
    assert g["kind"] == "ppm_local_asymptotic" and g["delta"] is None and "asymptotic" in g["delta_reason"]
    q = g["quantities"]
    local = q["local_sensitivity"]
    # every direction certified (the all-parameter floor), so an ε: 2Δ / min(1, T_min over all d); Δ = Δ̂ here
    # (6 draws: no GEV fit), so the headline equals the point estimate
    assert q["certified_directions"] == q["parameters"] == _theta_dim(run, r)
    t_min = min(1.0, q["temperature_min"], q["temperature_min_all"])
    assert g["epsilon"] == pytest.approx(2 * local / t_min, rel=1e-12) == q["epsilon_point_estimate"]
    assert q["claim_basis"].startswith("the measured Δ̂")
    assert local >= sens["local_sensitivity"]
    assert local >= rel["released_draw_max_loss"]
    assert g["epsilon"] >= sens["epsilon"]
    manifest = read_json(run.path(f"{run.params.release}/release.json"))
    assert manifest["guarantee"] == g
    assert "epsilon_by_round" not in manifest  # an unreleased round's ε is never published
    assert manifest["temperature"] == _metrics(run, f"temperature_r{r}")["temperature"]
    assert manifest["claim"]["statement"] == f"ε = {g['epsilon']:.4g}" and manifest["claim"]["kind"] == g["kind"]
    assert manifest["claim"]["coverage"].startswith(f"Certified: the sampler's temperature in all {q['parameters']:,}")


def _theta_dim(run, r: int) -> int:
    from dprelease.mechanisms.swag_ppm.swag import SwagMoments

    return SwagMoments.load(run.path(f"{run.params.artifacts}/round{r}/swag/moments.safetensors")).dim


def test_full_release_holds_tokenizer(full_run):
    from dprelease.core.release.folder import check_release_folder

    folder = full_run.path(full_run.params.release)
    check_release_folder(folder)
    assert (folder / "config.json").is_file() and (folder / "tokenizer" / "vocab.txt").is_file()
    assert read_json(folder / "model.json")["backend"] == "full"


def test_rerun_is_deterministic(head_run, tmp_path):
    """Same seed, same inputs -> the same weights and the same ε (in a copy of the run's root)."""
    root = tmp_path / "copy"
    shutil.copytree(head_run.root, root)
    again = run_stages(head_run.params, root, ["risk", "sensitivity_r2"])
    a = head_run.params.artifacts
    assert np.array_equal(
        np.load(root / f"{a}/round2/weights/weights.npy"), np.load(head_run.path(f"{a}/round2/weights/weights.npy"))
    )
    assert again["sensitivity_r2"] == head_run.summaries["sensitivity_r2"]


# re-weighting off ----------------------------------------------------------------------------------------------
def test_noreweight_round3_stages_write_skip_markers(noreweight_run):
    run = noreweight_run
    a = run.params.artifacts
    for name in ("reweight", "select"):
        assert "skipped" in run.summaries[name], name
    for folder in ("round3/finetune", "round3/swag", "round3/sensitivity", "round3/weights"):
        files = sorted(p.name for p in (run.root / a / folder).iterdir())
        assert files == ["skipped.json"], folder
        assert "reweight" in read_json(run.root / a / folder / "skipped.json")["skipped"]
    for name in ("sensitivity_r3", "temperature_r3", "reweight"):
        assert "skipped" in _metrics(run, name)
    # every declared output exists, so DVC is satisfied with the skipped branch
    for spec in registry.group(run.params, "release", active_only=False):
        for rel in [*spec.outs, *spec.metrics, *spec.plots]:
            assert run.path(rel).exists(), f"{spec.name}: missing {rel}"


def test_noreweight_draws_from_round2(noreweight_run):
    run = noreweight_run
    rel = _metrics(run, "swag_ppm_draw")
    sens = _metrics(run, "sensitivity_r2")
    g = rel["guarantee"]
    assert rel["round"] == 2
    assert g["quantities"]["local_sensitivity"] >= sens["local_sensitivity"] and g["epsilon"] >= sens["epsilon"]
    manifest = read_json(run.path(f"{run.params.release}/release.json"))
    assert manifest["released_from_round"] == 2
    assert manifest["reweight"] is False and "reweighting" not in manifest
    assert "epsilon_by_round" not in manifest and manifest["released_from_round"] == 2
    assert "reweight" not in {s.name for s in registry.group(run.params, "release")}
    audit = _metrics(run, "evaluation")
    assert all(0.0 <= v <= 1.0 for k, v in audit.items() if k not in {"draws", "verdict", "released_round"})


# temperature ----------------------------------------------------------------------------------------------
def test_weighted_rounds_report_a_calibrated_temperature(run):
    from dprelease.mechanisms.swag_ppm.swag import SwagMoments

    assert run.params.ppm.calibration == "subspace"
    for r in run.params.ppm.rounds[1:]:
        t = _metrics(run, f"temperature_r{r}")
        raw, cal = t["temperature_uncalibrated"], t["temperature"]
        assert raw["subspace_min"] > 0 and raw["subspace_min"] < raw["subspace_max"]  # SWAG: uneven across U
        # every direction of U set to the marginal's certified bound: all temperatures 1 (float32 deviations)
        assert cal["subspace_min"] == pytest.approx(1.0, rel=1e-4) and cal["subspace_max"] == pytest.approx(
            1.0, rel=1e-4
        )
        assert t["scale"] == 0.5 and cal["rank"] == raw["rank"]
        stored = SwagMoments.load(run.path(f"{run.params.artifacts}/round{r}/swag/moments.safetensors"))
        assert stored.scale == 0.5  # every pass samples the calibrated deviations
    g = _metrics(run, "swag_ppm_draw")["guarantee"]
    assert g["quantities"]["temperature_min"] == pytest.approx(1.0, rel=1e-4)
    q = g["quantities"]
    # the subspace is calibrated to T = 1, but SWAG's diagonal outside it is far narrower: T_min over all d divides
    released = _metrics(run, f"temperature_r{q['round']}")["temperature"]
    assert q["temperature_min_all"] == pytest.approx(released["all_parameters_min"])
    assert q["temperature_min_all"] < 1e-3
    assert g["epsilon"] == pytest.approx(
        q["epsilon_at_temperature_one"] / min(1.0, q["temperature_min"], q["temperature_min_all"]), rel=1e-12
    )
