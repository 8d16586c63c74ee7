"""The NUTS chains (Pyro): a known Gaussian posterior recovered, seeds that decide everything and leave the global
generator alone, over-dispersed starts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dprelease.linear_ppm import diagnostics
from dprelease.linear_ppm.sampler import overdispersed_starts, run_chains

MEAN = torch.tensor([1.0, -2.0, 0.5])
COV = torch.tensor([[1.0, 0.6, 0.0], [0.6, 2.0, -0.5], [0.0, -0.5, 0.5]])
PREC = torch.linalg.inv(COV)


def gaussian(z: torch.Tensor) -> torch.Tensor:
    d = z - MEAN
    return 0.5 * d @ PREC @ d


@pytest.fixture(scope="module")
def chains(one_torch_thread):
    starts = overdispersed_starts(np.random.default_rng(0), 4, 3, spread=3.0)
    return run_chains(gaussian, starts, [11, 12, 13, 14], warmup=200, draws=400)


def test_recovers_a_known_gaussian_posterior_within_ess_tolerances(chains):
    """Mean within 4 Monte Carlo standard errors (σ/√ESS_bulk) and each covariance entry within 5 of its own
    (√((Σ_jj Σ_kk + Σ_jk²)/ESS)); ESS from ArviZ, seeds fixed."""
    z = chains.z.double()  # [4, 400, 3]
    flat = z.reshape(-1, 3)
    mean, cov = flat.mean(0), torch.cov(flat.T)
    for j in range(3):
        ess = diagnostics.statistic(z[:, :, j].numpy())["ess_bulk"]
        assert ess > 200
        assert abs(mean[j] - MEAN[j]) <= 4 * COV[j, j].sqrt() / ess**0.5
        for k in range(3):
            se = ((COV[j, j] * COV[k, k] + COV[j, k] ** 2) / ess) ** 0.5
            assert abs(cov[j, k] - COV[j, k]) <= 5 * se, (j, k, cov[j, k].item())
    assert chains.divergences == [0, 0, 0, 0]
    assert all(0.5 < a <= 1.0 for a in chains.acceptance)
    assert chains.settings["sampler"] == "NUTS (Pyro)"


def test_seeds_decide_the_draws_and_the_global_generator_is_untouched(one_torch_thread):
    starts = overdispersed_starts(np.random.default_rng(1), 2, 3, spread=2.0)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a = run_chains(gaussian, starts, [5, 6], warmup=20, draws=20)
    assert torch.equal(torch.get_rng_state(), before)
    b = run_chains(gaussian, starts, [5, 6], warmup=20, draws=20)
    c = run_chains(gaussian, starts, [5, 7], warmup=20, draws=20)
    assert torch.equal(a.z, b.z)
    assert torch.equal(a.z[0], c.z[0]) and not torch.equal(a.z[1], c.z[1])


def test_one_seed_per_start_and_overdispersed_starts():
    with pytest.raises(ValueError):
        run_chains(gaussian, torch.zeros(2, 3), [1], warmup=2, draws=2)
    s = overdispersed_starts(np.random.default_rng(0), 4, 5000, spread=2.0)
    assert s.shape == (4, 5000) and s.std().item() == pytest.approx(2.0, rel=0.05)
