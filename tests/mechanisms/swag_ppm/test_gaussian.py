"""The sampler's Gaussian (swag_ppm/gaussian.py) against dense numpy / scipy references on small d."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from dprelease.mechanisms.swag_ppm import gaussian
from dprelease.mechanisms.swag_ppm.swag import SwagMoments


def _moments(rng, d=7, k=4, scale=0.5) -> SwagMoments:
    return SwagMoments(
        mean=torch.from_numpy(rng.normal(size=d)),
        var=torch.from_numpy(rng.uniform(0.1, 2, d)),
        deviations=torch.from_numpy(rng.normal(size=(k, d))).float(),
        n_models=k,
        scale=scale,
    )


def _dense_kl(m1, c1, m2, c2) -> float:
    ic2 = np.linalg.inv(c2)
    dm = m2 - m1
    return 0.5 * (np.trace(ic2 @ c1) - len(m1) + dm @ ic2 @ dm + np.linalg.slogdet(c2)[1] - np.linalg.slogdet(c1)[1])


@pytest.mark.parametrize("k", [1, 2, 5])
def test_log_pdf_matches_scipy_on_the_dense_covariance(k):
    rng = np.random.default_rng(k)
    m = _moments(rng, k=k)
    g = gaussian.LowRankGaussian.from_moments(m)
    x = rng.normal(size=m.dim)
    cov = m.covariance().numpy()  # the covariance swag.transform samples from
    want = stats.multivariate_normal(m.mean.numpy(), cov).logpdf(x)
    assert g.log_pdf(x) == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_kl_matches_the_dense_closed_form_and_is_zero_for_the_same_sampler():
    rng = np.random.default_rng(3)
    a, b = _moments(rng, k=4), _moments(rng, k=3, scale=0.8)
    ga, gb = gaussian.LowRankGaussian.from_moments(a), gaussian.LowRankGaussian.from_moments(b)
    want = _dense_kl(a.mean.numpy(), a.covariance().numpy(), b.mean.numpy(), b.covariance().numpy())
    assert gaussian.kl(ga, gb) == pytest.approx(want, rel=1e-9)
    assert gaussian.kl(ga, ga) == pytest.approx(0.0, abs=1e-9)


def test_log_ratio_is_the_difference_of_log_densities_and_favours_the_sampler_a_draw_came_from():
    rng = np.random.default_rng(5)
    a = _moments(rng)
    b = SwagMoments(mean=a.mean + 3.0, var=a.var, deviations=a.deviations, n_models=a.n_models)
    ga, gb = gaussian.LowRankGaussian.from_moments(a), gaussian.LowRankGaussian.from_moments(b)
    from dprelease.mechanisms.swag_ppm.swag import sample

    draws = sample(a, 200, torch.Generator().manual_seed(0)).double().numpy()
    llr = np.array([gaussian.log_ratio(x, ga, gb) for x in draws])
    assert llr[0] == pytest.approx(ga.log_pdf(draws[0]) - gb.log_pdf(draws[0]))
    assert (llr > 0).mean() > 0.95  # 3σ-ish apart in every coordinate: draws of a score for a


def test_a_non_positive_diagonal_is_refused():
    with pytest.raises(ValueError, match="positive"):
        gaussian.LowRankGaussian(np.zeros(2), np.array([1.0, 0.0]), np.zeros((2, 0)))
