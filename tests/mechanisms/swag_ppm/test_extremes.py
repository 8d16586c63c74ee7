"""The extreme-value interval for a high quantile of M on synthetic maxima with a known distribution."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dprelease.mechanisms.swag_ppm.extremes import METHOD, tail_bound


def test_interval_covers_the_true_gumbel_quantile_at_about_the_nominal_rate():
    """Each 'M_s' is the max of 2,000 unit exponentials (≈ Gumbel(log 2000, 1)); S = 500 draws, quantile
    1 − 1/5000. 25 seeded replicates: at 95 % coverage, ≥ 20 of 25 covered has probability > 0.999; the
    fixed seeds make the test deterministic."""
    level = 1 - 1 / 5000
    truth = stats.gumbel_r.ppf(level, loc=np.log(2000), scale=1.0)
    rng = np.random.default_rng(11)
    covered, estimates = 0, []
    for rep in range(25):
        m = rng.exponential(size=(500, 2000)).max(axis=1)
        out = tail_bound(m, boot=40, seed=rep)
        assert out["level"] == pytest.approx(level)
        assert out["ci_low"] <= out["estimate"] <= out["ci_high"]
        covered += out["ci_low"] <= truth <= out["ci_high"]
        estimates.append(out["estimate"])
    assert covered >= 20, covered
    assert abs(np.median(estimates) - truth) < 0.5  # the point estimate is centred near the truth
    assert out["method"] == METHOD and out["exceedance_of_max"] == pytest.approx(1 / 501)


def test_the_quantile_beyond_one_in_S_exceeds_the_max_typically():
    rng = np.random.default_rng(2)
    m = stats.gumbel_r.rvs(size=500, random_state=rng)
    out = tail_bound(m, seed=0)
    assert out["max"] == pytest.approx(m.max())
    assert out["estimate"] > np.quantile(m, 0.99)


def test_degenerate_and_bad_inputs():
    flat = tail_bound(np.full(50, 3.0))  # e.g. every draw censored at the same level
    assert flat["estimate"] == flat["ci_low"] == flat["ci_high"] == 3.0
    with pytest.raises(ValueError):
        tail_bound(np.ones(5))
    with pytest.raises(ValueError):
        tail_bound(np.array([1.0] * 20 + [np.nan]))
    with pytest.raises(ValueError):
        tail_bound(np.arange(20.0), level=1.0)
