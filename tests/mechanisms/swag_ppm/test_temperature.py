"""Temperatures against closed-form posteriors, marginal against marginal (docs/guarantees.md, R.2): the review's
counterexample (a sampler that IS the Laplace posterior, seen in a random subspace of a d = 400 Gaussian
whose GGN spans four orders of magnitude), an H-invariant subspace, a tempered sampler, logistic regression
against its exact Hessian; the CG bounds; and the conservative ε."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dprelease.core.backends.base import get_flat
from dprelease.core.backends.head import HeadBackend
from dprelease.core.config import HeadParams
from dprelease.mechanisms.swag_ppm import calibrate, temperature
from dprelease.mechanisms.swag_ppm.swag import SwagMoments

D, R = 400, 19


def _gaussian(spread: float, seed: int = 0):
    """GGN G = Q diag(g) Qᵀ with g log-spaced over ``spread``, a random rotation Q, prior λ = 1."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(D, D)))
    g = np.logspace(0, np.log10(spread), D)
    return q, g, (q * g) @ q.T


def _sampler_in(basis: np.ndarray, sigma_u: np.ndarray, scale: float = 0.5):
    """SWAG moments (var ≈ 0, K = r + 1 deviations) whose covariance in span(basis) is ``sigma_u``."""
    r = basis.shape[0]
    chol = np.linalg.cholesky(sigma_u)
    dev = np.sqrt(r / scale) * (basis.T @ chol).T  # rows: √((K−1)/scale)·Lᵀ U, K = r + 1
    dev = np.vstack([dev, np.zeros(basis.shape[1])])
    return np.full(basis.shape[1], 1e-30), dev


def _measure(g: np.ndarray, lam: float, var, dev, scale=0.5, **cg):
    basis = temperature.subspace_basis(dev)
    marginal = temperature.laplace_marginal(lambda v: v @ g, basis, np.diag(g), prior_precision=lam, **cg)
    return (
        temperature.estimate(var, dev, scale, basis, np.diag(g), basis @ g @ basis.T, marginal, prior_precision=lam),
        marginal,
        basis,
    )


@pytest.mark.parametrize("spread", [10.0, 1e2, 1e4])
def test_the_exact_laplace_sampler_reads_one_on_a_random_subspace(spread):
    """The review's counterexample: the conditional reading gave 1.28 / 3.44 / 87.8; the marginal one is 1."""
    q, _, g = _gaussian(spread)
    h_inv = np.linalg.inv(g + np.eye(D))
    u, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(D, R)))
    var, dev = _sampler_in(u.T, u.T @ h_inv @ u)
    t, _, basis = _measure(g, 1.0, var, dev)
    assert t.rank == R and t.bound_gap < 1e-6
    assert t.subspace == pytest.approx(1.0, abs=0.05)
    assert t.subspace_min == pytest.approx(1.0, abs=0.05) and t.subspace_max == pytest.approx(1.0, abs=0.05)
    if spread >= 1e2:  # the old conditional reading is fooled by the same sampler
        assert t.subspace_conditional > 2.0


def test_an_h_invariant_subspace_reads_one_too():
    q, g_eig, g = _gaussian(1e4)
    u = q[:, ::21][:, :R]  # eigenvectors of H: an invariant subspace
    var, dev = _sampler_in(u.T, (u.T * (1 / (g_eig[::21][:R] + 1))[:, None]) @ u)
    t, _, _ = _measure(g, 1.0, var, dev)
    assert t.subspace == pytest.approx(1.0, abs=0.05) and t.subspace_min == pytest.approx(1.0, abs=0.05)
    assert t.subspace_conditional == pytest.approx(1.0, abs=0.05)  # conditional = marginal here


def test_a_sampler_at_half_the_temperature_reads_half():
    _, _, g = _gaussian(1e4, seed=2)
    u, _ = np.linalg.qr(np.random.default_rng(3).normal(size=(D, R)))
    var, dev = _sampler_in(u.T, 0.5 * u.T @ np.linalg.inv(g + 2.0 * np.eye(D)) @ u)
    t, _, _ = _measure(g, 2.0, var, dev)
    assert t.subspace == pytest.approx(0.5, abs=0.025) and t.subspace_min == pytest.approx(0.5, abs=0.025)
    assert temperature.implied_epsilon(6.0, t.subspace_min) == pytest.approx(12.0, rel=0.05)


def test_an_isotropic_sampler_is_hot_in_stiff_and_cold_in_flat_directions():
    g = np.diag([100.0, 1.0])
    var, dev = _sampler_in(np.eye(2), 0.1 * np.eye(2))
    t, _, _ = _measure(g, 1e-9, var, dev)
    assert t.subspace_max == pytest.approx(10.0, rel=1e-4) and t.subspace_min == pytest.approx(0.1, rel=1e-4)


def test_stopped_solves_give_certified_bounds_and_a_lower_t_min():
    """After a few CG iterations M̂ ⪯ U H⁻¹ Uᵀ ⪯ M̂ + RRᵀ/λ, and T_min read from the upper bound is below the
    exact T_min: an unconverged solve can only make the stated ε larger."""
    _, _, g = _gaussian(1e4, seed=4)
    u, _ = np.linalg.qr(np.random.default_rng(5).normal(size=(D, R)))
    exact_m = u.T @ np.linalg.inv(g + np.eye(D)) @ u
    var, dev = _sampler_in(u.T, 1.3 * exact_m)
    t, m, basis = _measure(g, 1.0, var, dev, max_iter=5)
    exact_b = basis @ np.linalg.inv(g + np.eye(D)) @ basis.T  # the same M in the basis the estimator chose
    assert m.iterations == 5 and m.residual > 1e-3 and t.bound_gap > 0.01  # really stopped early
    assert np.linalg.eigvalsh(exact_b - m.lower).min() > -1e-10
    assert np.linalg.eigvalsh(m.upper - exact_b).min() > -1e-10
    assert t.subspace_min < 1.3 and t.subspace < 1.3
    exact, _, _ = _measure(g, 1.0, var, dev)
    assert exact.subspace_min == pytest.approx(1.3, rel=1e-6)


def test_conjugate_gradient_solves_spd_systems_and_refuses_others():
    rng = np.random.default_rng(6)
    a = rng.normal(size=(30, 30))
    a = a @ a.T + 0.1 * np.eye(30)
    b = rng.normal(size=(3, 30))
    x, it, res = temperature.conjugate_gradient(lambda v: v @ a, b, rtol=1e-10)
    np.testing.assert_allclose(x @ a, b, atol=1e-8)
    assert res <= 1e-10 and it <= 60
    with pytest.raises(ArithmeticError):
        temperature.conjugate_gradient(lambda v: -v, b)


def _linear_softmax(seed: int = 3, lam: float = 1.5):
    gen = torch.Generator().manual_seed(seed)
    backend = HeadBackend(3, torch.device("cpu"), 0, HeadParams(hidden=0, dropout=0.0))
    feats = {"x": torch.nn.functional.normalize(torch.randn(80, 4, generator=gen), dim=-1)}
    y = torch.randint(0, 3, (80,), generator=gen)
    w = torch.rand(80, generator=gen).double()
    model = backend.new_model(feats).double()
    theta = get_flat(model).double()
    shapes = [p.shape for p in model.parameters()]

    def total(t):
        wmat, b = t[: shapes[0].numel()].reshape(shapes[0]), t[shapes[0].numel() :]
        ce = torch.nn.functional.cross_entropy((feats["x"].double() * 2.0) @ wmat.T + b, y, reduction="none")
        return (w * ce).sum() + 0.5 * lam * (t @ t)  # prior N(0, I/λ)

    return backend, model, feats, w, theta, torch.autograd.functional.hessian(total, theta).numpy()


@pytest.mark.parametrize("rank", [15, 6])
def test_logistic_regression_against_the_exact_hessian_laplace(rank):
    """temperature_of on a linear softmax head (GGN = Hessian) whose SWAG is 2 × the exact-Hessian Laplace
    posterior: in the full space (rank 15 = d) and in a random 6-dimensional subspace (not H-invariant)."""
    backend, model, feats, w, theta, h = _linear_softmax()
    h_inv = np.linalg.inv(h)
    u, _ = np.linalg.qr(np.random.default_rng(7).normal(size=(h.shape[0], rank)))
    var, dev = _sampler_in(u.T, 2.0 * u.T @ h_inv @ u)
    moments = SwagMoments(
        mean=theta, var=torch.from_numpy(var), deviations=torch.from_numpy(dev).float(), n_models=dev.shape[0]
    )
    t = calibrate.temperature_of(
        backend, model, moments, feats, w, prior_precision=1.5, cg={"rtol": 1e-10, "max_iter": 500}
    )
    assert t.rank == rank
    assert t.subspace == pytest.approx(2.0, rel=1e-3) and t.subspace_min == pytest.approx(2.0, rel=1e-3)
    if rank < h.shape[0]:
        assert t.subspace_conditional > 2.1  # what the conditional reading would have said


def _read(g, var, dev, basis, marginal, lam=1.0):
    return temperature.estimate(var, dev, 0.5, basis, np.diag(g), basis @ g @ basis.T, marginal, prior_precision=lam)


@pytest.mark.parametrize("spread", [10.0, 1e4])
def test_subspace_calibration_sets_every_direction_to_the_laplace_marginal(spread):
    """An isotropic (SWAG-like) sampler on a random subspace is hot in stiff and cold in flat directions;
    ``subspace_deviations`` replaces its subspace covariance by the marginal's bound, after which every
    per-direction temperature, read against the EXACT marginal U H⁻¹ Uᵀ, is 1 — none below."""
    _, _, g = _gaussian(spread)
    u, _ = np.linalg.qr(np.random.default_rng(2).normal(size=(D, R)))
    exact = u.T @ np.linalg.inv(g + np.eye(D)) @ u
    spread_u = np.linalg.eigvalsh(exact)
    var, dev = _sampler_in(u.T, np.sqrt(spread_u[0] * spread_u[-1]) * np.eye(R))
    var = np.full(D, 1e-6 * spread_u[0])  # a SWAG diagonal part, narrower than the marginal in U
    before, marginal, basis = _measure(g, 1.0, var, dev)
    assert before.subspace_min < 1.0 < before.subspace_max
    new = temperature.subspace_deviations(var, basis, marginal.upper, scale=0.5, rows=dev.shape[0])
    assert new.shape == dev.shape and np.allclose(new - (new @ basis.T) @ basis, 0.0, atol=1e-12)  # rows in U
    after = _read(g, var, new, basis, marginal)
    assert after.subspace_min == pytest.approx(1.0, abs=1e-6) and after.subspace_max == pytest.approx(1.0, abs=1e-6)
    exact = basis @ np.linalg.inv(g + np.eye(D)) @ basis.T
    low = new @ basis.T
    sigma_u = 0.5 * ((basis * var) @ basis.T + low.T @ low / (dev.shape[0] - 1))
    assert temperature.per_direction(sigma_u, exact).min() >= 1.0 - 1e-6


def test_subspace_calibration_keeps_a_diagonal_part_wider_than_the_marginal():
    """Where SWAG's diagonal alone is wider than the marginal the calibrated sampler stays wider (T ≥ 1):
    the clipped part A⁺ ⪰ A never lowers a temperature."""
    _, _, g = _gaussian(1e2)
    u, _ = np.linalg.qr(np.random.default_rng(3).normal(size=(D, R)))
    var, dev = _sampler_in(u.T, 0.01 * np.eye(R))
    var = np.full(D, 2.0)  # scale·var = 1 > every marginal variance (≤ 1/λ = 1 … far smaller in stiff directions)
    _, marginal, basis = _measure(g, 1.0, var, dev)
    new = temperature.subspace_deviations(var, basis, marginal.upper, scale=0.5, rows=dev.shape[0])
    after = _read(g, var, new, basis, marginal)
    assert after.subspace_min >= 1.0 - 1e-9 and after.subspace_max > 1.5
    with pytest.raises(ValueError):
        temperature.subspace_deviations(var, basis, marginal.upper, scale=0.5, rows=R - 1)  # r − 1 rows cannot span U
    exact_rows = temperature.subspace_deviations(var, basis, marginal.upper, scale=0.5, rows=R)  # r rows can
    assert _read(g, var, exact_rows, basis, marginal).subspace_min >= 1.0 - 1e-9


def test_implied_epsilon_only_grows_for_a_cold_sampler():
    assert temperature.implied_epsilon(6.0, 0.5) == 12.0
    assert temperature.implied_epsilon(6.0, 2.0) == 6.0
    with pytest.raises(ValueError):
        temperature.implied_epsilon(6.0, 0.0)


def test_mandt_learning_rate_formula():
    # η* = 2·S·D / (N·tr C): S = 32, D = 1000, N = 2000, tr C = 5 − 1 = 4
    assert temperature.mandt_learning_rate(5.0, 1.0, n=2000, batch_size=32, dim=1000) == pytest.approx(8.0)
    with pytest.raises(ValueError):
        temperature.mandt_learning_rate(1.0, 1.0, n=10, batch_size=2, dim=3)


def test_estimate_and_marginal_reject_bad_inputs():
    var, dev = _sampler_in(np.eye(3), np.eye(3))
    basis = temperature.subspace_basis(dev)
    m = temperature.laplace_marginal(lambda v: v, basis, np.ones(3), prior_precision=1.0)
    with pytest.raises(ValueError):
        temperature.estimate(var[:2], dev, 0.5, basis, np.ones(3), np.eye(3), m, prior_precision=1.0)
    with pytest.raises(ValueError):
        temperature.estimate(var, dev, 0.5, basis, np.ones(3), np.eye(3), m, prior_precision=0.0)
    with pytest.raises(ValueError):
        temperature.laplace_marginal(lambda v: v, basis, np.ones(3), prior_precision=0.0)


def _exact_all_direction_t_min(g: np.ndarray, lam: float, var, dev, scale: float) -> float:
    """min over all v of vᵀΣv / vᵀH⁻¹v = the smallest eigenvalue of Σ^½ H Σ^½ (dense, small d only)."""
    k = dev.shape[0]
    sigma = scale * (np.diag(var) + dev.T @ dev / (k - 1))
    w, v = np.linalg.eigh(sigma)
    half = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    return float(np.linalg.eigvalsh(half @ (g + lam * np.eye(len(var))) @ half)[0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_all_direction_floor_is_a_certified_and_tight_lower_bound(seed):
    rng = np.random.default_rng(seed)
    d, lam, scale = 60, 3.0, 0.5
    a = rng.normal(size=(d, 5))
    g = a @ a.T  # rank 5: most directions see only the prior, as a softmax head's null space does
    var = rng.uniform(1e-3, 1e-1, d)
    dev = rng.normal(size=(6, d)) * 0.3
    t, _, _ = _measure(g, lam, var, dev, scale)
    exact = _exact_all_direction_t_min(g, lam, var, dev, scale)
    assert t.parameters == d and t.all_parameters_min == pytest.approx(lam * scale * var.min())
    assert t.all_parameters_min <= exact * (1 + 1e-9)  # certified: never above the truth
    assert t.all_parameters_min <= t.subspace_min  # the subspace is one part of "all directions"
    assert t.rescaled(4.0).all_parameters_min == pytest.approx(4 * t.all_parameters_min)
    j = int(np.argmin(var))  # the narrowest coordinate outside SWAG's span and the data's: the bound is attained
    dev[:, j], g[j, :], g[:, j] = 0.0, 0.0, 0.0
    t, _, _ = _measure(g, lam, var, dev, scale)
    assert _exact_all_direction_t_min(g, lam, var, dev, scale) == pytest.approx(t.all_parameters_min, rel=1e-9)


def test_a_diagonal_at_the_prior_variance_certifies_every_direction():
    rng = np.random.default_rng(3)
    d, lam, scale = 40, 5.0, 0.5
    a = rng.normal(size=(d, d))
    g = a @ a.T / d
    var = np.full(d, 1 / (lam * scale))  # Σ ⪰ I/λ ⪰ H⁻¹
    dev = rng.normal(size=(4, d)) * 0.1
    t, _, _ = _measure(g, lam, var, dev, scale)
    assert t.all_parameters_min == pytest.approx(1.0)
    assert _exact_all_direction_t_min(g, lam, var, dev, scale) >= 1.0
    with pytest.raises(ValueError, match="must be positive"):
        temperature.all_directions_floor(var, scale=0.0, prior_precision=lam)
