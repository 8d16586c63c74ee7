"""``frontier_linear_ppm`` on a tiny project: risk, unweighted and censored points with their kinds, diagnostics
in ``config``, F1 over ``frontier.seeds`` secret draws; a refused configuration gives no point and is named."""

from __future__ import annotations

import pytest

from dprelease.core.config import parse_params
from dprelease.core.utility.points import points_file, read_points
from dprelease.mechanisms.linear_ppm.frontier import frontier_linear_ppm
from tests.mechanisms.linear_ppm.test_released import FAST, LOOSE, _root

FRONT = {"risk": [{"prior_precision": 100.0, "temperature": 0.5}], "censored_epsilons": [8.0]}


def test_points_with_kinds_epsilons_and_diagnostics(tmp_path, one_torch_thread):
    root = _root(tmp_path)
    params = parse_params({"linear_ppm": {"sampler": FAST, "diagnostics": LOOSE, "frontier": FRONT}})
    out = frontier_linear_ppm(params, root)
    assert out["points"] == 3 and out["refused"] == 0
    doc, points = read_points(points_file(root, "linear_ppm"))
    by = {p.mechanism: p for p in points}
    risk, flat, cens = (by["linear_ppm_risk_l100_t0.5"], by["linear_ppm_unweighted_l100"], by["linear_ppm_censored_e8"])
    assert risk.kind == flat.kind == "ppm_local_asymptotic" and cens.kind == "ppm_censored"
    assert risk.epsilon == pytest.approx(2 * risk.config["local_sensitivity"] / 0.5)
    assert cens.epsilon == cens.target_epsilon == 8.0 and cens.config["local_sensitivity"] <= 4.0
    for p in points:
        assert len(p.weighted_f1) == params.frontier.seeds
        assert {"rhat_max", "ess_bulk_min", "divergences", "temperature_all"} <= set(p.config["diagnostics"])
        assert p.config["seconds"] > 0 and "map_weighted_f1" in p.config
    assert doc["grid_size"] == 1


def test_refused_configurations_are_named_not_plotted(tmp_path, one_torch_thread):
    root = _root(tmp_path)
    params = parse_params(
        {
            "linear_ppm": {
                "sampler": FAST,
                "diagnostics": {**LOOSE, "ess_min": 1e6},
                "frontier": {"risk": [], "censored_epsilons": [4.0]},
            }
        }
    )
    assert frontier_linear_ppm(params, root)["refused"] == 1
    doc, points = read_points(points_file(root, "linear_ppm"))
    assert points == [] and "censored ε 4" in doc["selection"]
