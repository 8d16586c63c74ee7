"""swag_ppm/arms.py: the round-2 variants as comparison arms — the censored arm at its declared level
(``ppm.censor_epsilon``) with its bound and uniform weights, and the uncalibrated arm at scale ½ with its conservative ε (on the session's arms run)."""

from __future__ import annotations

import pytest

from dprelease.core.io import read_json

pytestmark = pytest.mark.slow


def test_censored_arm_is_at_its_declared_level_with_its_bound(arms_run):
    """κ = ε/2 with ε the declared ppm.censor_epsilon (8.0), not the release's measured ε(D)."""
    rel = read_json(arms_run.path("metrics/swag_ppm_draw.json"))["guarantee"]["epsilon"]
    m = read_json(arms_run.path("metrics/swag_ppm_censored.json"))
    g = m["guarantee"]
    declared = arms_run.params.ppm.censor_epsilon
    assert declared == 8.0 and rel != declared
    assert g["kind"] == "ppm_censored" and g["epsilon"] == declared and m["censor_epsilon"] == declared
    # strict only because the weights do not depend on the data (w ≡ 1), and the record says so
    assert g["quantities"]["weights"].startswith("uniform")
    assert g["quantities"]["censor_level"] == declared / 2 and g["quantities"]["censor_form"] == "soft"
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
    q = g["quantities"]  # conservative: T_min over ALL parameters (certified floor) divides, not the subspace's alone
    assert q["certified_directions"] == q["parameters"] and q["temperature_min_all"] <= q["temperature_min"]
    assert g["epsilon"] == pytest.approx(two_delta / min(1.0, q["temperature_min"], q["temperature_min_all"]))
