"""swag_ppm.calibrate: SWAG fitted, its temperature measured against the Laplace marginal, and calibrated by each
mode — ``scale`` brings the coldest direction to 1, ``subspace`` every direction to ≥ 1, ``none`` changes
nothing — with the measured reading before calibration kept beside the one after."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_head_backend, tiny_problem

from dprelease.mechanisms.swag_ppm import calibrate
from dprelease.mechanisms.swag_ppm.params import SwagParams

PARAMS = SwagParams(epochs=6, rank=6, lr=0.05, batch_size=8)


def _fit(calibration: str):
    feats, y = tiny_problem(40, dim=16)
    backend = tiny_head_backend(hidden=0)
    torch.manual_seed(0)
    model = backend.new_model(feats)
    weights = torch.linspace(0.2, 1.0, 40)
    return calibrate.swag(
        backend, model, feats, y, weights, PARAMS, seed=3, calibration=calibration, prior_precision=10.0
    )


@pytest.fixture(scope="module")
def fits(one_torch_thread):
    return {mode: _fit(mode) for mode in ("none", "scale", "subspace", "prior")}


def test_none_reports_the_measurement_and_changes_nothing(fits):
    moments, losses, summary, raw = fits["none"]
    assert moments is raw and len(losses) == PARAMS.epochs and summary["scale"] == 0.5
    assert summary["temperature"] == summary["temperature_uncalibrated"]
    assert summary["temperature"]["rank"] == PARAMS.rank - 1  # r = K − 1 deviation directions


def test_scale_brings_the_coldest_direction_to_one(fits):
    moments, _, summary, raw = fits["scale"]
    before = summary["temperature_uncalibrated"]["subspace_min"]
    assert moments.scale == pytest.approx(raw.scale / before)
    assert summary["temperature"]["subspace_min"] == pytest.approx(1.0, rel=1e-6)
    assert torch.equal(moments.deviations, raw.deviations)  # one number for every direction


def test_subspace_brings_every_direction_to_at_least_one(fits):
    moments, _, summary, raw = fits["subspace"]
    assert summary["temperature"]["subspace_min"] >= 1.0 - 1e-6
    assert summary["temperature"]["subspace_max"] == pytest.approx(1.0, abs=1e-3)  # none inflated past the bound
    assert not torch.equal(moments.deviations, raw.deviations) and moments.scale == raw.scale
    assert torch.equal(moments.mean, raw.mean) and torch.equal(moments.var, raw.var)  # only U's covariance moves
    # the same fitted SWAG in every mode (same seed): the uncalibrated readings agree
    assert summary["temperature_uncalibrated"] == pytest.approx(fits["none"][2]["temperature_uncalibrated"])


def test_prior_certifies_every_direction_where_subspace_certifies_only_its_own(fits):
    from dprelease.mechanisms.swag_ppm import claim

    sub, prior = fits["subspace"][2]["temperature"], fits["prior"][2]["temperature"]
    moments, raw = fits["prior"][0], fits["prior"][3]
    assert sub["all_parameters_min"] < 1e-2  # SWAG's diagonal: far colder than the posterior outside U
    assert prior["all_parameters_min"] == pytest.approx(1.0, rel=1e-9) and prior["subspace_min"] >= 1.0 - 1e-6
    assert torch.all(moments.var >= 1.0 / (10.0 * moments.scale) * (1 - 1e-12)) and torch.equal(
        raw.var, fits["none"][3].var
    )
    d = moments.dim
    assert claim.ppm_claim(1.0, prior, parameters=d).epsilon == pytest.approx(2.0, rel=1e-9)  # no temperature factor
    assert claim.ppm_claim(1.0, sub, parameters=d).epsilon > 100.0


def test_a_diverging_swag_is_refused():
    feats, y = tiny_problem(16, dim=16)
    backend = tiny_head_backend(hidden=0)
    model = backend.new_model(feats)
    with pytest.raises(FloatingPointError, match="diverged"):
        calibrate.swag(
            backend,
            model,
            feats,
            y,
            None,
            SwagParams(epochs=3, rank=2, lr=1e30, batch_size=8),
            seed=0,
            calibration="none",
            prior_precision=1.0,
        )
