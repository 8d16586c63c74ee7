"""swag_ppm/arms.py: the round-2 variants as comparison arms — the censored arm at DP-SGD's target with its
bound and uniform weights, and the uncalibrated arm at scale ½ with its conservative ε (on the session's arms run)."""

from __future__ import annotations

import pytest

from dprelease.io import read_json

pytestmark = pytest.mark.slow


def test_censored_arm_is_at_the_compared_target_with_its_bound(arms_run):
    rel = read_json(arms_run.path("metrics/release.json"))["guarantee"]["epsilon"]
    g = read_json(arms_run.path("metrics/swag_ppm_censored.json"))["guarantee"]
    dp = read_json(arms_run.path("metrics/dpsgd.json"))["guarantee"]
    assert g["kind"] == "ppm_censored" and g["epsilon"] == pytest.approx(rel)
    # strict only because the weights do not depend on the data (w ≡ 1), and the record says so
    assert g["quantities"]["weights"].startswith("uniform")
    assert dp["quantities"]["target_epsilon"] == pytest.approx(g["epsilon"])  # same target as DP-SGD
    assert g["quantities"]["censor_level"] == pytest.approx(rel / 2) and g["quantities"]["censor_form"] == "soft"
    assert 0 < g["quantities"]["local_sensitivity"] <= g["epsilon"] / 2


def test_uncalibrated_arm_samples_the_round2_swag_at_scale_one_half(arms_run):
    g = read_json(arms_run.path("metrics/swag_ppm_uncalibrated.json"))["guarantee"]
    t2 = read_json(arms_run.path("metrics/temperature_r2.json"))
    assert g["kind"] == "ppm_local_asymptotic" and g["quantities"]["calibration"] == "none"
    # the same fitted moments at scale 1/2: the temperature the release's calibration started from
    assert g["quantities"]["temperature"] == pytest.approx(t2["temperature_uncalibrated"]["subspace"], rel=1e-6)
    two_delta = 2 * g["quantities"]["local_sensitivity"]
    assert g["quantities"]["epsilon_at_temperature_one"] == pytest.approx(two_delta)
    assert g["quantities"]["temperature_min"] == pytest.approx(t2["temperature_uncalibrated"]["subspace_min"], rel=1e-6)
    assert g["epsilon"] == pytest.approx(two_delta / min(1.0, g["quantities"]["temperature_min"]))  # conservative
