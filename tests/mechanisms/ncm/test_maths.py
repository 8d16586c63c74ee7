"""DP nearest class mean's maths: σ of the analytic Gaussian mechanism against the closed form of μ-GDP, the
class sums' sensitivity, and the noise actually drawn."""

import math

import pytest
import torch
from scipy.stats import norm

from dprelease.mechanisms.ncm import maths


def _gdp_delta(mu: float, eps: float) -> float:
    """Closed form (Dong, Roth & Su 2019, Cor. 2.13): the Gaussian mechanism with sensitivity/σ = μ is μ-GDP and
    (ε, δ(ε))-DP exactly for δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)."""
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("eps,delta", [(1.0, 1e-5), (4.0, 1.7e-4), (8.0, 1e-6), (16.0, 1e-4)])
def test_sigma_meets_delta_exactly_by_the_gdp_closed_form(eps, delta):
    sigma = maths.gaussian_sigma(eps, delta)
    assert _gdp_delta(1 / sigma, eps) <= delta * (1 + 1e-9)  # (ε, δ)-DP at σ
    assert _gdp_delta(1 / (sigma * (1 - 1e-4)), eps) > delta  # and the smallest such σ (to the tolerance)
    assert maths.gaussian_sigma(eps, delta, sensitivity=2.0) == pytest.approx(2 * sigma, rel=1e-5)  # σ ∝ Δ


def test_sigma_is_monotone_and_bad_levels_raise():
    assert maths.gaussian_sigma(1.0, 1e-5) > maths.gaussian_sigma(2.0, 1e-5) > maths.gaussian_sigma(2.0, 1e-3)
    with pytest.raises(ValueError, match="ε > 0"):
        maths.gaussian_sigma(0.0, 1e-5)
    with pytest.raises(ValueError, match="δ"):
        maths.gaussian_sigma(1.0, 1.0)


def test_one_record_moves_the_sums_by_at_most_one():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(50, 16, generator=gen) * 3  # norms ≫ 1: clipping must bound them
    y = torch.randint(0, 4, (50,), generator=gen)
    full = maths.class_sums(x, y, 4)
    for i in range(50):
        keep = torch.arange(50) != i
        assert (full - maths.class_sums(x[keep], y[keep], 4)).norm() <= 1 + 1e-12


def test_noise_has_the_stated_scale_and_predictions_recover_clean_means():
    gen = torch.Generator().manual_seed(1)
    y = torch.randint(0, 5, (400,), generator=gen)
    wide = torch.nn.functional.normalize(torch.randn(400, 2000, generator=gen), dim=1)
    noisy = maths.release(wide, y, 5, sigma=2.0, generator=torch.Generator().manual_seed(2))
    resid = (noisy - maths.class_sums(wide, y, 5)).flatten()
    # 10,000 draws: the sample sd's sd is ≈ 0.71 %, so 3 % is ≈ 4 sd (fails by chance with prob. < 1e-4)
    assert resid.std().item() == pytest.approx(2.0, rel=0.03)
    assert abs(resid.mean().item()) < 4 * 2.0 / 100
    centres = torch.eye(5, 32) * 4  # five separated clusters: the clean class means classify them all
    xc = torch.nn.functional.normalize(centres[y] + torch.randn(400, 32, generator=gen) * 0.3, dim=1)
    clean = maths.release(xc, y, 5, sigma=0.0, generator=torch.Generator())
    assert torch.equal(maths.predict(clean, xc), y)
    drowned = maths.release(xc, y, 5, sigma=1e4, generator=torch.Generator().manual_seed(3))
    assert (maths.predict(drowned, xc) == y).float().mean() < 0.6  # noise ≫ signal: near chance (0.2)
