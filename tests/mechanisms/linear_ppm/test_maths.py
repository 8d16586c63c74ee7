"""The linear PPM's maths: the censoring bound, the K-FAC whitening, risk weights, the equipartition temperature."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dprelease.mechanisms.linear_ppm import maths


def _target(n=80, d=4, k=3, seed=0, **kw) -> maths.Target:
    g = torch.Generator().manual_seed(seed)
    x = torch.nn.functional.normalize(torch.randn(n, d, generator=g), dim=1)
    y = (x @ torch.randn(d, k, generator=g)).argmax(1)
    return maths.Target(xa=maths.augment(x), y=y, n_classes=k, **({"prior_precision": 1.0} | kw))


@pytest.mark.parametrize("kappa", [0.01, 0.5, 2.0, 8.0, 50.0])
def test_censoring_bounds_every_record_by_kappa_over_extreme_logits(kappa):
    """Property: whatever θ (logits up to ±1e4, CE up to ~2e4), every censored contribution lies in [0, κ]."""
    g = torch.Generator().manual_seed(1)
    t = _target(n=200, kappa=kappa, prior_precision=1.0)
    for scale in (0.0, 1.0, 1e2, 1e4):
        theta = scale * torch.randn(t.shape, generator=g)
        ce = maths.per_record_ce(theta, t.xa, t.y)
        c = t.contributions(theta)
        assert torch.isfinite(c).all()
        assert (c >= 0).all() and (c <= kappa).all()  # < κ exactly; rounds to κ at most
        assert (c <= ce + 1e-6).all()  # never above the uncensored loss
    big = maths.censor(torch.tensor([0.0, 1e-6, 1e3, 1e30, float("inf")]), kappa)
    assert big[0] == 0 and big[1] == pytest.approx(1e-6, rel=1e-3) and (big[2:] <= kappa).all()


def test_censor_matches_the_loss_for_small_losses_and_none_is_identity():
    u = torch.tensor([1e-4, 1e-3, 1e-2])
    assert torch.allclose(maths.censor(u, 8.0), u, rtol=1e-3)
    assert torch.equal(maths.censor(u, None), u)
    with pytest.raises(ValueError):
        maths.censor(u, 0.0)


def test_potential_is_weighted_tempered_loss_plus_prior():
    t = _target(prior_precision=3.0, temperature=0.5, weights=torch.linspace(0, 1, 80))
    theta = torch.randn(t.shape)
    ce = maths.per_record_ce(theta, t.xa, t.y)
    expected = (torch.linspace(0, 1, 80) * ce).sum() / 0.5 + 1.5 * theta.pow(2).sum()
    assert t.potential(theta).item() == pytest.approx(expected.item(), rel=1e-5)
    assert t.potential(torch.stack([theta, theta])).shape == (2,)


def test_map_is_a_stationary_point():
    t = _target(prior_precision=0.5)
    theta = maths.fit_map(t).requires_grad_(True)
    (grad,) = torch.autograd.grad(t.potential(theta), theta)
    assert grad.abs().max() < 1e-3


def test_kfac_whitening_is_the_kronecker_laplace_covariance_and_invertible():
    t = _target(prior_precision=2.0, weights=torch.rand(80, generator=torch.Generator().manual_seed(3)))
    theta = maths.fit_map(t)
    pre = maths.kfac(t, theta)
    z = torch.randn(5, t.dim)
    assert torch.allclose(pre.z(pre.theta(z)), z, atol=1e-4)
    basis = pre.theta(torch.eye(t.dim)).reshape(t.dim, -1).double() - theta.reshape(1, -1).double()  # rows: L e_j
    cov = basis.T @ basis  # L Lᵀ
    xa = t.xa.double()
    p = torch.softmax(xa @ theta.double().T, 1)
    a = t.weights.double()
    g = torch.diag((a[:, None] * p).sum(0)) - (a[:, None] * p).T @ p
    precision = torch.kron(g, xa.T @ xa / len(xa)) + 2.0 * torch.eye(t.dim, dtype=torch.float64)
    assert torch.allclose(cov @ precision, torch.eye(t.dim, dtype=torch.float64), atol=1e-3)


@pytest.mark.parametrize("kw", [{}, {"temperature": 0.5, "kappa": 1.5}, {"weights": "random", "prior_precision": 3.0}])
def test_whitened_potential_is_the_potential_of_the_whitened_theta(kw):
    """The batched, one-GEMM z ↦ U(θ(z)) the sampler uses equals ``target.potential(pre.theta(z))`` row by row, in
    value and gradient (float32 rounding: relative 1e-5), for plain, tempered-censored and weighted targets."""
    if kw.get("weights") == "random":
        kw = {**kw, "weights": torch.rand(80, generator=torch.Generator().manual_seed(4))}
    t = _target(**kw)
    pre = maths.kfac(t, maths.fit_map(t))
    z = (2 * torch.randn(6, t.dim, generator=torch.Generator().manual_seed(5))).requires_grad_(True)
    fast = maths.whitened_potential(t, pre)(z)
    slow = t.potential(pre.theta(z))
    assert fast.shape == (6,) and torch.allclose(fast, slow, rtol=1e-5, atol=1e-4)
    (g_fast,), (g_slow,) = torch.autograd.grad(fast.sum(), z), torch.autograd.grad(slow.sum(), z)
    assert torch.allclose(g_fast, g_slow, rtol=1e-4, atol=1e-4)
    one = maths.whitened_potential(t, pre)(z[2:3].detach())  # a batch of one is the same row
    assert torch.allclose(one, fast[2:3].detach(), rtol=1e-6)


def test_risk_weights_follow_the_ppm_formula():
    r = np.array([0.1, 0.5, 2.0, 4.1])
    w = maths.risk_weights(r)
    assert w[0] == 1.0 and w[-1] == 0.0 and np.all(np.diff(w) < 0)
    assert np.allclose(maths.risk_weights(r, c=0.8, g=0.1), np.clip(0.8 * (1 - (r - 0.1) / 4.0) + 0.1, 0, 1))
    assert np.allclose(maths.risk_weights(r, norm="divmax"), 1 - r / 4.1)
    assert np.all(maths.risk_weights(np.ones(3)) == 1.0)
    with pytest.raises(ValueError):
        maths.risk_weights(r, norm="other")


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_equipartition_reads_the_temperature_of_exact_draws(temperature):
    """Exact draws from ∝ exp(−U/T) for a correlated Gaussian U: every direction reads ≈ T."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(6, 6, generator=g, dtype=torch.float64)
    precision = a @ a.T + 0.5 * torch.eye(6, dtype=torch.float64)
    draws = torch.distributions.MultivariateNormal(
        torch.zeros(6, dtype=torch.float64), precision_matrix=precision / temperature
    ).sample((40000,))
    t = maths.equipartition(draws, draws @ precision)  # ∂U/∂z for U = ½ zᵀPz
    assert torch.allclose(t, torch.full_like(t, temperature), rtol=0.05)


def test_kappa_from_epsilon_and_temperature():
    assert maths.kappa_for(8.0, 1.0) == 4.0 and maths.kappa_for(8.0, 0.5) == 2.0
    with pytest.raises(ValueError):
        maths.kappa_for(0.0, 1.0)
