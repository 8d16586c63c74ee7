"""BDP accountant goldens (docs/algorithms.md, F.4)."""

import math

import numpy as np
import torch

from dprelease.mechanisms.nvdp.accountant import BDPAccountant, batch_cost, epsilon, order, pair_costs
from dprelease.mechanisms.nvdp.renyi import Batch


def _batch(mu, sigma=1.0, alpha=None, n=4, m=3, d=2):
    mu = torch.as_tensor(mu, dtype=torch.float64).expand(n, m, d).clone() if np.ndim(mu) == 0 else mu
    alpha = torch.ones(n, m, dtype=torch.float64) if alpha is None else alpha
    return Batch(mu, torch.full((n, m, d), sigma, dtype=torch.float64), alpha, torch.ones(n, m, dtype=torch.bool))


def test_zero_divergence_gives_the_floor():
    assert math.isclose(epsilon(0.0, 1), math.log(1e5) / 1.1, rel_tol=1e-12)
    assert round(epsilon(0.0, 26), 3) == 10.466
    acc = BDPAccountant(q=16 / 400)
    for _ in range(3):  # identical inputs and σ_post = σ_prior: every S_2 is 0
        acc.add(_batch(0.0))
    assert acc.batches == 3 and acc.nan_terms == 0
    assert round(acc.epsilon, 3) == 10.466


def test_order_two_truncation_and_closed_form():
    assert order(1.1) == 2 and order(2.0) == 3
    mu = torch.zeros(2, 2, 1, dtype=torch.float64)
    mu[1, 1, 0] = 1.0  # one component differs by 1 in one dimension
    b = _batch(0.0, n=2, m=2, d=1)
    b.mu = mu
    q = 0.1
    c, nan = pair_costs(b, q)
    # σ = 1 both sides: order-2 Gaussian part = λ/2·Δμ² = 1, per component normalised by 2 vectors;
    # Dirichlet parts vanish (equal counts)
    s2 = 1.0 / 2
    expect = math.log((1 - q) ** 2 + 2 * q * (1 - q) + q * q * math.exp(s2))
    assert nan == 0 and np.allclose(c, [expect])


def test_nan_terms_are_zeroed_and_counted():
    b = _batch(0.0, sigma=0.5)  # σ_post = 0.5 < 0.707 σ_prior: the order-2 Gaussian term is undefined
    c, nan = pair_costs(b, 0.05)
    assert nan > 0 and np.all(np.isfinite(c))


def test_batch_cost_student_t_bound():
    c = np.array([0.0, 0.1, 0.2])
    assert batch_cost(c) > math.log(np.exp(c).mean())
    assert batch_cost(np.zeros(5)) == 0.0


def test_batch_cost_is_finite_where_e_to_the_c_overflows():
    c = np.array([0.0, 800.0, 1.0])
    direct = 800 + math.log(np.exp(c - 800).mean() + 0)  # lower bound without the sd term
    assert math.isfinite(batch_cost(c)) and batch_cost(c) > direct
    small = np.array([0.0, 0.1, 0.2])
    e = np.exp(small)
    from scipy import stats

    assert math.isclose(batch_cost(small), math.log(e.mean() + stats.t.ppf(1 - 1e-16, 2) * e.std() / math.sqrt(2)))
