"""The Gaussian mechanism's exact curve and its composition, against closed forms (μ-GDP, Dong, Roth & Su 2022)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dprelease.core.privacy import gaussian


def test_the_curve_is_the_closed_form_and_epsilon_inverts_it():
    for mu, eps in [(0.5, 1.0), (1.0, 2.0), (2.1, 8.0)]:
        expected = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
        assert gaussian.mu_delta(mu, eps) == pytest.approx(expected, rel=1e-12)
        delta = gaussian.mu_delta(mu, eps)
        assert gaussian.mu_epsilon(mu, delta) == pytest.approx(eps, abs=1e-6)
    # σ for (ε, δ) at sensitivity 1 is 1/μ: the two searches agree
    sigma = gaussian.gaussian_sigma(8.0, 3e-4)
    assert gaussian.mu_epsilon(1 / sigma, 3e-4) == pytest.approx(8.0, abs=1e-4)
    # golden: μ = 0.5 (the DP evaluation at z = 2) at δ = 3e-4 is ε 1.541 (bisection on the closed form above)
    assert gaussian.mu_epsilon(0.5, 3e-4) == pytest.approx(1.5409, abs=1e-3)


def test_a_release_beside_the_evaluation_meets_the_declared_level_exactly():
    z, eps, delta = 2.0, 8.0, 3e-4
    sigma = gaussian.sigma_beside(eps, delta, others=(1 / z,))
    assert sigma > gaussian.gaussian_sigma(eps, delta)  # the evaluation's share costs the class sums some noise
    total = math.hypot(1 / sigma, 1 / z)  # Gaussian composition: μ² add
    assert gaussian.mu_delta(total, eps) == pytest.approx(delta, rel=1e-4)
    # Monte Carlo of the composed privacy-loss variable (two Gaussians): its δ at ε matches the closed form
    rng = np.random.default_rng(0)
    loss = sum(m * rng.standard_normal(2_000_000) + m * m / 2 for m in (1 / sigma, 1 / z))
    mc = np.mean(np.clip(1 - np.exp(eps - loss), 0, None))
    assert mc == pytest.approx(delta, rel=0.15)  # 2e6 samples: relative sd of the estimate ≈ 4 %
    with pytest.raises(ValueError, match="raise released.evaluation_noise"):
        gaussian.sigma_beside(0.3, 1e-5, others=(1 / z,))
