"""Private selection's maths (privacy/tuning.py, Papernot & Steinke 2022 Thm 2): a golden number derived by hand,
the TNB's mean against its closed form by simulation, and the bound's monotone costs."""

import math

import numpy as np
import pytest

from dprelease.core.privacy.rdp import ORDERS
from dprelease.core.privacy.tuning import draw_repetitions, expected_repetitions, gaussian_rdp, selection_rdp


def test_golden_number_for_a_gaussian_base_mechanism():
    """Base: Gaussian with σ = 1, ε(λ) = λ/2. η = 1, γ = 0.1 (E[K] = 10). At λ = 2:
    min over λ̂ of 2(1 − 1/λ̂)(λ̂/2) + 2 ln 10 / λ̂ = (λ̂ − 1) + 4.6052/λ̂, attained on the order grid at
    λ̂ = 2.1 or 2.2: 1.1 + 2.1929 = 3.2929 (the continuous optimum √4.6052 = 2.146 gives 3.2919);
    ε'(2) = ε(2) + 3.2929 + ln 10/(2 − 1) = 1 + 3.2929 + 2.3026 = 6.5955."""
    orders = np.array(ORDERS)
    got = selection_rdp(gaussian_rdp(orders, sigma=1.0), orders, eta=1.0, gamma=0.1)
    assert got[list(orders).index(2.0)] == pytest.approx(6.5955, abs=2e-4)


def test_expected_repetitions_matches_simulation():
    rng = np.random.default_rng(0)
    for eta, gamma in ((1.0, 0.1), (0.5, 0.2), (2.0, 0.3)):
        draws = np.array([draw_repetitions(rng, eta=eta, gamma=gamma) for _ in range(20000)])
        assert draws.min() >= 1
        mean = expected_repetitions(eta=eta, gamma=gamma)
        assert abs(draws.mean() - mean) < 4 * draws.std() / math.sqrt(len(draws))  # 4 sd: fails w.p. < 1e-4
    assert expected_repetitions(eta=1.0, gamma=0.1) == pytest.approx(10.0)


def test_the_search_costs_privacy_and_more_repetitions_cost_more():
    orders = np.array(ORDERS)
    base = gaussian_rdp(orders, sigma=3.0)
    few = selection_rdp(base, orders, eta=1.0, gamma=0.5)
    many = selection_rdp(base, orders, eta=1.0, gamma=0.05)
    assert np.all(few > base) and np.all(many > few)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="η > 0"):
        expected_repetitions(eta=0.0, gamma=0.1)
    with pytest.raises(ValueError, match="γ in"):
        selection_rdp(np.ones(3), [2, 3, 4], eta=1.0, gamma=1.0)
    with pytest.raises(ValueError, match="one value per order"):
        selection_rdp(np.ones(2), [2, 3, 4], eta=1.0, gamma=0.1)
    with pytest.raises(ValueError, match="σ must be"):
        gaussian_rdp([2.0], sigma=0.0)
