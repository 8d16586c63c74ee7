"""The claim a SWAG-PPM draw is released under (swag_ppm/claim.py), from temperature records built by hand:
an ε only for a sampler certified in every direction, from the GEV upper bound of Δ̂'s tail, the point beside it."""

from __future__ import annotations

import numpy as np
import pytest

from dprelease.core.privacy.selection import selection_budget
from dprelease.mechanisms.swag_ppm import claim, temperature
from dprelease.mechanisms.swag_ppm.swag import SwagMoments

D = 126_316
TAIL = {"level": 0.9998, "confidence": 0.95, "estimate": 4.3, "ci_low": 4.02, "ci_high": 5.17}


def _temp(*, rank=19, subspace_min=1.0, all_min=None) -> dict:
    """A temperature record as ``Temperature.as_dict()`` writes it (metrics/temperature_r2.json)."""
    t = {
        "subspace": 1.0,
        "subspace_min": subspace_min,
        "subspace_max": 1.0,
        "all_parameters": 0.0034,
        "subspace_conditional": 1.0,
        "rank": rank,
        "prior_precision": 1000.0,
    }
    return t if all_min is None else t | {"all_parameters_min": all_min, "parameters": D}


def test_a_sampler_certified_in_its_subspace_only_gets_the_uncertified_kind():
    g = claim.ppm_claim(3.5726, _temp(rank=19), parameters=D, tail=TAIL, round=2)
    assert g.kind == "ppm_uncertified" and g.epsilon is None and g.delta is None
    q = g.quantities
    assert (q["certified_directions"], q["parameters"]) == (19, D)
    assert q["uncertified_index"] == pytest.approx(2 * 5.17) and q["uncertified_index_point"] == pytest.approx(7.1452)
    assert not any(k.startswith("epsilon") for k in q)  # nothing in the record reads as an ε
    assert g.meaning.startswith(
        "index 2Δ̂ = 10.34, not a differential-privacy guarantee: the sampler is certified in 19 of 126,316 directions"
    )


def test_a_cold_subspace_does_not_make_an_uncertified_sampler_an_epsilon():
    g = claim.ppm_claim(3.0, _temp(rank=19, subspace_min=0.2), parameters=D)
    assert g.kind == "ppm_uncertified" and g.quantities["uncertified_index"] == 6.0  # the index is never divided


def test_certified_in_every_direction_the_all_parameter_minimum_divides():
    g = claim.ppm_claim(3.5, _temp(rank=19, subspace_min=1.0, all_min=1e-4), parameters=D, tail=TAIL)
    assert g.kind == "ppm_local_asymptotic"
    assert g.epsilon == pytest.approx(2 * 5.17 / 1e-4)  # GEV upper bound, ÷ min(1, T_min over ALL parameters)
    q = g.quantities
    assert q["epsilon_point_estimate"] == pytest.approx(2 * 3.5 / 1e-4)
    assert q["epsilon_at_temperature_one"] == 7.0 and q["local_sensitivity"] == 3.5
    assert (q["certified_directions"], q["parameters"], q["temperature_min_all"]) == (D, D, 1e-4)


def test_the_colder_of_subspace_and_all_parameter_minimum_divides():
    g = claim.ppm_claim(3.0, _temp(subspace_min=0.5, all_min=0.8), parameters=D)
    assert g.epsilon == pytest.approx(6.0 / 0.5)
    warm = claim.ppm_claim(3.0, _temp(subspace_min=2.0, all_min=1.5), parameters=D)
    assert warm.epsilon == 6.0  # min(1, T): a hot sampler never lowers ε


def test_a_subspace_spanning_every_parameter_is_certified_by_itself():
    g = claim.ppm_claim(3.0, _temp(rank=40, subspace_min=0.5), parameters=40)
    assert g.kind == "ppm_local_asymptotic" and g.epsilon == pytest.approx(12.0)


@pytest.mark.parametrize("ci_high, expected", [(5.17, 5.17), (3.0, 3.5)])
def test_the_headline_is_the_gev_upper_bound_never_below_the_measured_maximum(ci_high, expected):
    g = claim.ppm_claim(3.5, _temp(all_min=2.0), parameters=D, tail=TAIL | {"ci_high": ci_high})
    assert g.epsilon == pytest.approx(2 * expected) and g.quantities["local_sensitivity_bound"] == expected
    assert g.quantities["epsilon_point_estimate"] == pytest.approx(7.0)
    assert "GEV upper bound (95% interval) of the 0.9998 quantile" in g.quantities["claim_basis"]
    point = claim.ppm_claim(3.5, _temp(all_min=2.0), parameters=D)  # no fit: the measured Δ̂
    assert point.epsilon == 7.0 and point.quantities["claim_basis"] == claim.POINT_ONLY


def test_selection_budget_doubles_after_the_temperature_division():
    g = claim.ppm_claim(2.0, _temp(subspace_min=0.25, all_min=0.5), parameters=D, budget=selection_budget)
    assert g.quantities["epsilon_per_candidate"] == pytest.approx(2 * 2.0 / 0.25)
    assert g.epsilon == pytest.approx(2 * 2 * 2.0 / 0.25)  # Liu–Talwar 2ε of ε = 2Δ / min(1, T_min)
    u = claim.ppm_claim(2.0, _temp(), parameters=D, budget=selection_budget)
    assert u.kind == "ppm_uncertified" and u.quantities["uncertified_index"] == 8.0
    assert u.quantities["uncertified_index_per_candidate"] == 4.0


def test_summary_quotes_the_headline_and_never_an_epsilon_for_an_uncertified_record():
    s = claim.summary(claim.ppm_claim(3.0, _temp(), parameters=D, tail=TAIL))
    assert s["kind"] == "ppm_uncertified" and "epsilon" not in s
    assert s["statement"].startswith("index 2Δ̂ = 10.34 (not DP") and s["uncertified_index_point"] == 6.0
    assert "19 of its 126,316" in s["coverage"]
    c = claim.summary(claim.ppm_claim(3.0, _temp(all_min=1.0), parameters=D, tail=TAIL))
    assert c["epsilon"] == pytest.approx(10.34) and c["epsilon_point_estimate"] == pytest.approx(6.0)


def _moments(rng, d=12, k=4, scale=0.5) -> SwagMoments:
    import torch

    return SwagMoments(
        mean=torch.zeros(d, dtype=torch.float64),
        var=torch.from_numpy(rng.uniform(1e-4, 1e-2, d)),
        deviations=torch.from_numpy(rng.normal(size=(k, d)) * 0.05),
        n_models=k,
        scale=scale,
    )


def test_the_rule_on_a_measured_sampler_with_and_without_the_all_direction_floor():
    """SwagMoments → temperature.estimate → claim: with the floor every direction is certified (ε divided by it),
    a record without it (only the subspace measured) is uncertified."""
    rng = np.random.default_rng(0)
    m = _moments(rng)
    d, lam = m.mean.numel(), 10.0
    a = rng.normal(size=(d, d))
    g_mat = a @ a.T / d
    var, dev = m.var.numpy(), m.deviations.numpy()
    basis = temperature.subspace_basis(dev)
    marginal = temperature.laplace_marginal(lambda v: v @ g_mat, basis, np.diag(g_mat), prior_precision=lam)
    t = temperature.estimate(
        var, dev, m.scale, basis, np.diag(g_mat), basis @ g_mat @ basis.T, marginal, prior_precision=lam
    )
    assert t.parameters == d and t.all_parameters_min == pytest.approx(lam * m.scale * var.min())
    certified = claim.ppm_claim(1.0, t.as_dict(), parameters=d)
    assert certified.kind == "ppm_local_asymptotic"
    assert certified.epsilon == pytest.approx(2.0 / min(1.0, t.all_parameters_min, t.subspace_min))
    old = {k: v for k, v in t.as_dict().items() if k not in ("all_parameters_min", "parameters")}
    legacy = claim.ppm_claim(1.0, old, parameters=d)
    assert legacy.kind == "ppm_uncertified" and legacy.quantities["certified_directions"] == t.rank < d
