"""RDP → (ε, δ) conversions (privacy/rdp.py) against closed forms for the plain Gaussian mechanism."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dprelease.core.privacy.rdp import CONVERSIONS, ORDERS, mironov_epsilon, rdp_to_epsilon, sampled_gaussian_epsilon

DELTA = 1e-5
SIGMAS = (0.8, 1.0, 1.5, 2.0, 4.0)


@pytest.fixture(autouse=True)
def _quiet():
    # opacus warns when the optimal order is at an end of the grid; irrelevant to these checks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def gaussian_rdp(sigma: float, steps: int = 1) -> np.ndarray:
    """RDP of ``steps`` compositions of the Gaussian mechanism (sensitivity 1, no subsampling): Tα/(2σ²)."""
    a = np.asarray(ORDERS, dtype=float)
    return steps * a / (2.0 * sigma**2)


def mironov_closed_form(sigma: float, delta: float, steps: int = 1) -> float:
    a = np.asarray(ORDERS, dtype=float)
    return float(np.min(steps * a / (2 * sigma**2) + math.log(1 / delta) / (a - 1)))


def balle_closed_form(rdp: np.ndarray, delta: float) -> float:
    """Balle et al. 2020, Thm 21: ε(α) = RDP(α) + log((α−1)/α) − (log δ + log α)/(α−1)."""
    a = np.asarray(ORDERS, dtype=float)
    return float(np.min(rdp + np.log((a - 1) / a) - (math.log(delta) + np.log(a)) / (a - 1)))


def test_orders_grid():
    assert ORDERS[0] == pytest.approx(1.1) and ORDERS[-1] == 63
    assert len(ORDERS) == 99 + 52  # 1.1 … 10.9 by 0.1, then 12 … 63
    assert all(a > 1 for a in ORDERS) and list(ORDERS) == sorted(ORDERS)
    assert CONVERSIONS == ("mironov", "opacus")


@pytest.mark.parametrize("sigma", SIGMAS)
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-8])
def test_mironov_matches_closed_form_for_gaussian(sigma, delta):
    rdp = gaussian_rdp(sigma)
    expected = mironov_closed_form(sigma, delta)
    assert mironov_epsilon(rdp, ORDERS, delta) == pytest.approx(expected, rel=1e-12)
    assert rdp_to_epsilon(rdp, ORDERS, delta) == pytest.approx(expected, rel=1e-12)  # the default
    assert rdp_to_epsilon(rdp, ORDERS, delta, "mironov") == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("sigma", SIGMAS)
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-8])
def test_grid_value_is_at_least_the_continuous_minimum(sigma, delta):
    """min over α>1 of α/(2σ²) + L/(α−1), L = log(1/δ), is at α* = 1 + sqrt(2σ²L):
    ε* = 1/(2σ²) + sqrt(2L)/σ. The grid value can only be larger (and close when α* is inside the grid)."""
    L = math.log(1 / delta)
    a_star = 1 + math.sqrt(2 * sigma**2 * L)
    eps_star = a_star / (2 * sigma**2) + L / (a_star - 1)
    assert eps_star == pytest.approx(1 / (2 * sigma**2) + math.sqrt(2 * L) / sigma, rel=1e-12)
    grid = mironov_epsilon(gaussian_rdp(sigma), ORDERS, delta)
    assert grid >= eps_star - 1e-12
    if ORDERS[0] <= a_star <= ORDERS[-1]:
        assert grid <= eps_star * 1.01  # the grid is fine enough near the optimum


def test_hand_value_single_gaussian():
    """σ = 1, δ = 1e-5: α* = 1 + sqrt(2 log 1e5) ≈ 5.799, so the grid optimum is at α = 5.8."""
    L = math.log(1e5)
    expected = 5.8 / 2 + L / 4.8
    assert mironov_epsilon(gaussian_rdp(1.0), ORDERS, 1e-5) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(5.2985, abs=1e-4)


@pytest.mark.parametrize("sigma", SIGMAS)
@pytest.mark.parametrize("steps", [1, 10, 1000])
def test_sampled_gaussian_without_subsampling_is_the_plain_composition(sigma, steps):
    assert sampled_gaussian_epsilon(sigma, 1.0, steps, DELTA) == pytest.approx(
        mironov_closed_form(sigma, DELTA, steps), rel=1e-9
    )


@pytest.mark.parametrize("sigma", SIGMAS)
def test_opacus_conversion_matches_balle_closed_form(sigma):
    rdp = gaussian_rdp(sigma, steps=5)
    assert rdp_to_epsilon(rdp, ORDERS, DELTA, "opacus") == pytest.approx(balle_closed_form(rdp, DELTA), rel=1e-12)


@pytest.mark.parametrize("sigma", SIGMAS)
@pytest.mark.parametrize("q, steps", [(1.0, 1), (0.01, 1000), (0.004, 5000), (0.1, 50)])
def test_opacus_conversion_is_tighter_than_mironov(sigma, q, steps):
    from opacus.accountants.analysis.rdp import compute_rdp

    rdp = compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=ORDERS)
    m = rdp_to_epsilon(rdp, ORDERS, DELTA, "mironov")
    o = rdp_to_epsilon(rdp, ORDERS, DELTA, "opacus")
    assert 0 <= o <= m
    assert sampled_gaussian_epsilon(sigma, q, steps, DELTA, "opacus") == pytest.approx(o, rel=1e-12)
    assert sampled_gaussian_epsilon(sigma, q, steps, DELTA, "mironov") == pytest.approx(m, rel=1e-12)


@pytest.mark.parametrize("name", ["balle", "Mironov", "", "rdp"])
def test_unknown_conversion_is_rejected_and_named(name):
    with pytest.raises(ValueError, match=f"unknown RDP conversion {name!r}"):
        rdp_to_epsilon(gaussian_rdp(1.0), ORDERS, DELTA, name)
    with pytest.raises(ValueError, match=f"unknown RDP conversion {name!r}"):
        sampled_gaussian_epsilon(1.0, 0.01, 10, DELTA, name)


@pytest.mark.parametrize("conversion", CONVERSIONS)
def test_epsilon_decreases_with_sigma(conversion):
    eps = [sampled_gaussian_epsilon(s, 0.01, 1000, DELTA, conversion) for s in SIGMAS]
    assert all(np.isfinite(eps)) and all(e > 0 for e in eps)
    assert all(a > b for a, b in zip(eps, eps[1:])), eps


@pytest.mark.parametrize("conversion", CONVERSIONS)
def test_epsilon_increases_with_steps(conversion):
    eps = [sampled_gaussian_epsilon(1.0, 0.01, t, DELTA, conversion) for t in (1, 10, 100, 1000, 10000)]
    assert all(a < b for a, b in zip(eps, eps[1:])), eps


@pytest.mark.parametrize("conversion", CONVERSIONS)
def test_epsilon_increases_with_sample_rate(conversion):
    eps = [sampled_gaussian_epsilon(1.0, q, 500, DELTA, conversion) for q in (0.001, 0.005, 0.01, 0.05, 0.2, 1.0)]
    assert all(a < b for a, b in zip(eps, eps[1:])), eps


def test_epsilon_decreases_with_delta():
    eps = [sampled_gaussian_epsilon(1.0, 0.01, 1000, d) for d in (1e-8, 1e-6, 1e-4, 1e-2)]
    assert all(a > b for a, b in zip(eps, eps[1:])), eps


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-5])
def test_conversion_needs_delta_in_open_unit_interval(delta):
    with pytest.raises(ValueError, match="δ must lie in"):
        rdp_to_epsilon(np.array([1.0, 2.0]), (2.0, 3.0), delta)
