"""T̂ against closed-form posteriors: a Gaussian linear model (exact posterior N(μ, (XᵀX/σ² + λI)⁻¹)) and
logistic regression with its Laplace reference (GGN = Hessian for a linear softmax model)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dprelease.backends.head import HeadBackend
from dprelease.backends.base import get_flat
from dprelease.config import HeadParams
from dprelease.swag_ppm import calibrate, temperature
from dprelease.swag_ppm.swag import SwagMoments


def _as_swag(cov: np.ndarray, scale: float = 0.5, var_floor: float = 0.0):
    """(var, deviations) whose SWAG sampler scale·(diag var + DᵀD/(K−1)) has covariance ``cov`` (+ floor)."""
    vals, vecs = np.linalg.eigh(cov)
    k = cov.shape[0] + 1
    dev = np.sqrt((k - 1) / scale) * (vecs * np.sqrt(np.clip(vals, 0, None))).T  # rows d_e = c·√λ_e v_e
    dev = np.vstack([dev, np.zeros(cov.shape[0])])
    return np.full(cov.shape[0], var_floor), dev


@pytest.mark.parametrize("temp", [0.3, 1.0, 4.0])
def test_gaussian_linear_model_recovers_the_temperature(temp):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 5)) * np.array([3.0, 1.0, 0.5, 0.2, 0.05])  # very different curvatures
    sigma2, lam = 0.7, 2.0
    g = x.T @ x / sigma2  # GGN (= Hessian) of the Gaussian likelihood, summed over records
    posterior = np.linalg.inv(g + lam * np.eye(5))
    var, dev = _as_swag(temp * posterior)
    basis = temperature.subspace_basis(dev)
    t = temperature.estimate(var, dev, 0.5, basis, np.diag(g), basis @ g @ basis.T, prior_precision=lam)
    assert t.rank == 5
    assert t.subspace == pytest.approx(temp, rel=1e-9)
    assert t.subspace_min == pytest.approx(temp, rel=1e-6) and t.subspace_max == pytest.approx(temp, rel=1e-6)
    assert t.all_parameters == pytest.approx(temp, rel=1e-9)


def test_an_isotropic_sampler_is_hot_in_stiff_and_cold_in_flat_directions():
    g = np.diag([100.0, 1.0])
    var, dev = _as_swag(np.eye(2) * 0.1)
    basis = temperature.subspace_basis(dev)
    t = temperature.estimate(var, dev, 0.5, basis, np.diag(g), basis @ g @ basis.T, prior_precision=0.0)
    assert t.subspace_max == pytest.approx(10.0) and t.subspace_min == pytest.approx(0.1)
    assert t.subspace == pytest.approx(5.05)


def test_logistic_regression_laplace_reference_end_to_end():
    """temperature_of on a linear softmax head whose SWAG equals T × the Laplace posterior (exact Hessian)."""
    gen = torch.Generator().manual_seed(3)
    backend = HeadBackend(3, torch.device("cpu"), 0, HeadParams(hidden=0, dropout=0.0))
    feats = {"x": torch.nn.functional.normalize(torch.randn(80, 4, generator=gen), dim=-1)}
    y = torch.randint(0, 3, (80,), generator=gen)
    w = torch.rand(80, generator=gen).double()
    model = backend.new_model(feats).double()
    theta = get_flat(model).double()
    shapes = [p.shape for p in model.parameters()]

    def total(t):
        wmat, b = t[: shapes[0].numel()].reshape(shapes[0]), t[shapes[0].numel():]
        ce = torch.nn.functional.cross_entropy((feats["x"].double() * 2.0) @ wmat.T + b, y, reduction="none")
        return (w * ce).sum() + 0.5 * 1.5 * (t @ t)  # prior N(0, I/1.5)

    h = torch.autograd.functional.hessian(total, theta).numpy()
    var, dev = _as_swag(2.0 * np.linalg.inv(h))
    moments = SwagMoments(mean=theta, var=torch.from_numpy(var), deviations=torch.from_numpy(dev).float(),
                          n_models=dev.shape[0])
    t = calibrate.temperature_of(backend, model, moments, feats, w, prior_precision=1.5)
    assert t.subspace == pytest.approx(2.0, rel=1e-4) and t.all_parameters == pytest.approx(2.0, rel=1e-4)


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


def test_estimate_rejects_mismatched_inputs():
    var, dev = _as_swag(np.eye(3))
    basis = temperature.subspace_basis(dev)
    with pytest.raises(ValueError):
        temperature.estimate(var[:2], dev, 0.5, basis, np.ones(3), np.eye(3), prior_precision=1.0)
    with pytest.raises(ValueError):
        temperature.estimate(var, dev, 0.5, basis, np.ones(3), np.eye(3), prior_precision=-1.0)
