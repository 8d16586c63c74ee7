"""Rényi bound goldens (docs/algorithms.md, F.2): the Gaussian and Dirichlet terms against numerical integration."""

import math

import numpy as np
import torch
from scipy import integrate, stats

from dprelease.mechanisms.nvdp.renyi import (
    Batch,
    RDStats,
    batch_rd,
    dirichlet_term,
    gaussian_term,
    pair_bound,
    undefined_terms,
    z_filtered,
)

T = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731


def _renyi_numeric(p, q, lam, lo, hi):
    val, _ = integrate.quad(lambda x: math.exp(lam * p(x) + (1 - lam) * q(x)), lo, hi, limit=200)
    return math.log(val) / (lam - 1)


def test_gaussian_term_is_the_renyi_divergence_of_q_prime_from_q():
    for mu_q, s_q, mu_p, s_p, lam in [(0.3, 0.8, -0.2, 1.0, 1.1), (1.0, 1.0, 0.0, 1.0, 2.0), (0.0, 0.6, 0.5, 0.5, 1.5)]:
        got = float(gaussian_term(T(mu_q), T(s_q), T(mu_p), T(s_p), lam))
        want = _renyi_numeric(stats.norm(mu_p, s_p).logpdf, stats.norm(mu_q, s_q).logpdf, lam, -30, 30)
        assert math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)


def test_gaussian_term_undefined_outside_domain():
    assert math.isnan(float(gaussian_term(T(0.0), T(0.3), T(0.0), T(1.0), 2.0)))


def test_dirichlet_term_matches_beta_integration():
    for a, b, lam in [((2.0, 3.0), (1.5, 1.2), 1.1), ((0.7, 0.9), (1.0, 1.0), 2.0), ((4.0, 1.0), (2.0, 2.0), 1.5)]:
        got = float(dirichlet_term(T(a), T(b), lam))
        want = _renyi_numeric(stats.beta(*a).logpdf, stats.beta(*b).logpdf, lam, 0, 1)
        assert math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-7)


def _batch(n=3, m=4, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(n, m, dtype=torch.bool)
    mask[0, 3] = False
    return Batch(
        torch.randn(n, m, d, generator=g, dtype=torch.float64),
        0.5 + torch.rand(n, m, d, generator=g, dtype=torch.float64),
        (0.2 + torch.rand(n, m, generator=g, dtype=torch.float64)) * mask,
        mask,
    )


def test_identical_posteriors_have_zero_bound():
    b = _batch()
    i = torch.tensor([1])
    g, d = pair_bound(b, i, i)
    assert abs(float(g)) < 1e-12 and abs(float(d)) < 1e-10


def test_code_normalisation_vs_printed():
    b = _batch()
    i, j = torch.tensor([1]), torch.tensor([2])
    g_code, d_code = pair_bound(b, i, j, normalise=True)
    g_print, d_print = pair_bound(b, i, j, normalise=False)
    n_vec, dim = 4, 5
    assert math.isclose(float(g_code) * n_vec * dim, float(g_print), rel_tol=1e-9)  # mean over dims, / vectors
    assert float(d_print) != float(d_code)


def test_rd_stats_filtered_and_unfiltered():
    stats_ = RDStats()
    stats_.add(_batch(n=6))
    s = stats_.summary()
    assert s["rd_pairs"] == 30 and s["rd_max"] >= s["rd_max_filtered"] >= 0
    assert math.isclose(s["rd_max_gaussian"] + s["rd_max_dirichlet"], s["rd_max"], rel_tol=1e-12)
    rd, bad = batch_rd(_batch(n=6))
    assert bad == 0 and len(rd) == 30
    v = T([0.0, 0.0, 0.0, 10.0])
    assert float(z_filtered(v).max()) == 0.0  # the outlier is zeroed
    assert np.isfinite(s["rd_avg"])


def test_padded_length_normaliser():
    b = _batch()
    i, j = torch.tensor([0]), torch.tensor([2])
    g_own, d_own = pair_bound(b, i, j)  # input 0 has 3 vectors
    g_pad, d_pad = pair_bound(b, i, j, n_vectors=33)
    assert math.isclose(float(g_own) * 3, float(g_pad) * 33, rel_tol=1e-9)
    assert math.isclose(float(d_own) * 3, float(d_pad) * 33, rel_tol=1e-9)


def test_undefined_dimensions_are_left_out_as_the_reference_does_and_counted():
    b = _batch(n=2)
    b.sigma[1, 2, 4] = 5.0  # input 1, component 2, dim 4: σ'² = 1.1·σ_0² − 0.1·25 < 0 for the pair (0, 1)
    i, j = torch.tensor([0]), torch.tensor([1])
    assert float((1.1 * b.sigma[0, 2, 4] ** 2 - 0.1 * 25.0)) < 0
    assert int(undefined_terms(b, i, j)) == 1 and int(undefined_terms(b, j, i)) == 0
    g, _ = pair_bound(b, i, j)
    terms = gaussian_term(b.mu[0], b.sigma[0], b.mu[1], b.sigma[1])  # (m, d); component 3 of input 0 is padding
    want = (terms[:3, :].nanmean(-1)).sum() / 3
    assert math.isclose(float(g), float(want), rel_tol=1e-12) and not math.isnan(float(g))
    rd, bad = batch_rd(b)
    assert bad == 1 and bool(torch.isfinite(rd).all())
