"""One-run canary bounds (docs/guarantees.md, L.4, R.3) against closed forms, the review's published figure, a reference
implementation's values and simulated mechanisms with a known privacy level."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from dprelease.compare.mia import onerun


@pytest.mark.parametrize("r, ceiling", [(100, 3.49), (1000, 5.8), (10_000, 8.11)])
def test_pure_ceiling_closed_form(r, ceiling):
    """All r guesses right, δ = 0: p^r = α, ε = ln(p/(1 − p)) with p = α^(1/r) (docs/guarantees.md, R.3: 3.49, 5.8, 8.1)."""
    p = 0.05 ** (1 / r)
    assert onerun.steinke_epsilon(r, r) == pytest.approx(math.log(p / (1 - p)), abs=1e-5)
    assert onerun.steinke_epsilon(r, r) == pytest.approx(ceiling, abs=0.01)  # R.3 rounds


def test_steinke_delta_version_matches_the_review():
    """docs/guarantees.md, R.3: DP-SGD's 74 right of 100 (m = 500 canaries, δ = 1/(2n), n = 2,626 + 250 included canaries)
    gives 0.630 with the δ term instead of 0.654 without it."""
    assert onerun.steinke_epsilon(74, 100) == pytest.approx(0.654, abs=1e-3)
    assert onerun.steinke_epsilon(74, 100, delta=1 / 5752, canaries=500) == pytest.approx(0.630, abs=1e-3)
    with pytest.raises(ValueError, match="canaries"):
        onerun.steinke_p_value(74, 100, 1.0, delta=1e-5)


def test_steinke_hand_worked():
    assert onerun.steinke_epsilon(50, 100) == 0.0  # chance level proves nothing
    assert onerun.steinke_epsilon(0, 0) == 0.0
    assert onerun.steinke_epsilon(80, 100) < onerun.steinke_epsilon(90, 100)
    assert onerun.steinke_epsilon(90, 100, alpha=0.01) < onerun.steinke_epsilon(90, 100, alpha=0.05)
    # the p-value at ε_LB is α (δ = 0: the binomial tail)
    eps = onerun.steinke_epsilon(90, 100)
    assert binom.sf(89, 100, 1 / (1 + math.exp(-eps))) == pytest.approx(0.05, rel=1e-4)


# (right, guesses, canaries, δ) → ε_LB, computed with the jax_privacy reference implementation of
# Mahloujifar et al.'s test (jax_privacy/auditing.py, _epsilon_one_run_fdp, commit 8967688c), whose
# Gaussian curve comes from dp_accounting's σ calibration (not from this module's gdp_mu).
REFERENCE_FDP = [
    (74, 100, 500, 1 / 5752, 0.826931),
    (950, 1000, 5000, 1 / 10252, 3.558604),
    (1000, 1000, 5000, 1 / 10252, 8.668773),
    (2000, 2000, 5000, 1e-5, 11.782462),
    (1800, 2000, 4000, 1e-4, 2.934863),
    (430, 500, 1000, 1e-3, 1.926420),
]


@pytest.mark.parametrize("c, r, m, delta, expected", REFERENCE_FDP)
def test_fdp_gaussian_matches_the_reference_implementation(c, r, m, delta, expected):
    assert onerun.fdp_epsilon(c, r, m, family="gaussian", delta=delta) == pytest.approx(expected, abs=2e-5)


def test_gdp_conversion_round_trip_and_closed_form():
    # δ(ε; μ) at ε = 0 is 2Φ(μ/2) − 1 (total variation of N(0,1) and N(μ,1))
    from scipy.stats import norm

    assert onerun.gdp_delta(0.0, 1.0) == pytest.approx(2 * norm.cdf(0.5) - 1, rel=1e-9)
    for mu in (0.5, 1.0, 3.0):
        eps = onerun.gdp_epsilon(mu, 1e-5)
        assert onerun.gdp_mu(eps, 1e-5) == pytest.approx(mu, rel=1e-6)


def test_fdp_pure_against_steinke():
    """For pure ε-DP the binomial tail is exact (randomized response attains it): the f-DP test with the
    pure curve cannot beat it by more than rounding, and it agrees at the ceiling."""
    assert onerun.fdp_epsilon(1000, 1000, 5000) == pytest.approx(onerun.steinke_epsilon(1000, 1000), abs=1e-4)
    for c in (60, 74, 90):
        assert onerun.fdp_epsilon(c, 100, 500) <= onerun.steinke_epsilon(c, 100) + 1e-6
    with pytest.raises(ValueError, match="pure"):
        onerun.fdp_epsilon(74, 100, 500, delta=1e-5)


def test_fdp_gaussian_is_valid_on_a_gaussian_mechanism():
    """Canaries of an exactly μ-GDP mechanism (score N(μ, 1) if included, N(0, 1) if not): the test must
    reject the true curve in at most α of the runs (300 runs: allow 8 %), and find most of μ."""
    mu, m = 1.5, 1000
    rng = np.random.default_rng(11)
    rejected, found = 0, []
    for _ in range(300):
        member = rng.random(m) < 0.5
        scores = rng.normal(size=m) + mu * member
        c, r = onerun.right_guesses(scores, member, 100, 100)
        rejected += onerun.fdp_rejects(onerun.tradeoff_gaussian(mu), c, r, m)
        if len(found) < 20:
            found.append(onerun.fdp_mu(c, r, m))
    assert rejected / 300 <= 0.08
    assert np.median(found) > 0.6 * mu


def _randomized_response(eps: float, m: int, rng: np.random.Generator):
    """A toy ε-DP mechanism on each canary's inclusion bit: report it truthfully w.p. e^ε/(1+e^ε)."""
    member = rng.random(m) < 0.5
    truthful = rng.random(m) < math.exp(eps) / (1 + math.exp(eps))
    report = np.where(truthful, member, ~member)
    return report + rng.random(m) * 1e-3, member  # tiny jitter: a ranking, not ties


def test_canary_audit_stays_below_a_known_epsilon():
    """ε = 1 randomized response: over 100 seeded runs each bound may exceed ε in about α of them (allow 10),
    and the bounds are not vacuous."""
    eps = 1.0
    found = {"steinke": [], "fdp": []}
    for seed in range(100):
        scores, member = _randomized_response(eps, 2000, np.random.default_rng(seed))
        audit = onerun.canary_audit(scores, member, guess_grid=[1000, 2000])
        for k in found:
            found[k].append(audit[k]["epsilon_lower_bound"])
    for k, v in found.items():
        assert sum(f > eps for f in v) <= 10, k
        assert np.median(v) > 0.6 * eps, k


def test_canary_audit_non_private_reaches_its_ceiling_and_reports_counts():
    rng = np.random.default_rng(0)
    member = rng.random(3000) < 0.5
    audit = onerun.canary_audit(member + rng.random(3000) * 1e-3, member, guess_grid=[200, 1000, 2000], delta=1e-5)
    for k in ("steinke", "fdp"):
        assert audit[k]["correct"] == audit[k]["guesses"]
        assert audit[k]["epsilon_lower_bound"] == pytest.approx(audit[k]["ceiling"])
    assert audit["fdp"]["ceiling"] > 10 > audit["steinke"]["ceiling"]  # the Gaussian reading has the power
    assert audit["right_by_guesses"] == {"200": 200, "1000": 1000, "2000": 2000}


def test_canary_guesses_take_the_extremes():
    g = onerun.canary_guesses(np.array([0.1, 0.9, 0.5, 0.3, 0.8]), k_plus=2, k_minus=1)
    assert g.tolist() == [-1, 1, 0, 0, 1]
    with pytest.raises(ValueError):
        onerun.canary_guesses(np.zeros(3), 2, 2)
