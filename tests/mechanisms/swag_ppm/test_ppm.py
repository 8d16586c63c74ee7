"""Pseudo posterior mechanism maths: weights (B.3–B.4), ε (B.6), re-weighting (C.2)."""

import numpy as np
import pytest

from dprelease.mechanisms.swag_ppm.ppm import (
    epsilon,
    max_weighted_loss,
    normalise_risk,
    reweight,
    weights_from_risk,
)


@pytest.fixture
def risk():
    rng = np.random.default_rng(0)
    return rng.gamma(shape=1.5, scale=2.0, size=300)  # positive, distinct, right-skewed like CE maxima


# --- weights (B.3, B.4) ----------------------------------------------------------------------------


def test_default_weights_range_and_endpoints(risk):
    w = weights_from_risk(risk)  # c=1, g=0, min–max
    assert w.shape == risk.shape
    assert np.all((w >= 0) & (w <= 1))
    assert w[np.argmin(risk)] == 1.0  # least risky: no down-weighting (exactly)
    assert w[np.argmax(risk)] == 0.0  # riskiest: weight exactly 0
    np.testing.assert_allclose(w, 1 - (risk - risk.min()) / (risk.max() - risk.min()), rtol=0, atol=1e-15)


@pytest.mark.parametrize("c,g", [(1.0, 0.0), (0.8, 0.0), (1.0, 0.3), (1.0, -0.2), (2.0, 0.5)])
def test_weights_monotone_non_increasing_in_risk(risk, c, g):
    order = np.argsort(risk, kind="stable")
    w = weights_from_risk(risk, c=c, g=g)[order]
    assert np.all(np.diff(w) <= 0)
    assert np.all((w >= 0) & (w <= 1))


def test_weights_with_ties_are_equal():
    w = weights_from_risk(np.array([3.0, 1.0, 3.0, 2.0, 1.0]))
    np.testing.assert_array_equal(w, [0.0, 1.0, 0.0, 0.5, 1.0])


def test_slope_c_sets_max_weight(risk):
    w = weights_from_risk(risk, c=0.8)
    assert w.max() == pytest.approx(0.8, abs=1e-15)
    assert w[np.argmin(risk)] == pytest.approx(0.8, abs=1e-15)
    assert w.min() == 0.0


def test_offset_g_positive_clips_at_one(risk):
    f = normalise_risk(risk)
    w = weights_from_risk(risk, c=1.0, g=0.3)  # c + g = 1.3 > 1
    np.testing.assert_allclose(w, np.minimum(1.0, 1.3 - f), atol=1e-15)
    assert w.max() == 1.0
    assert np.sum(w == 1.0) == np.sum(f <= 0.3) > 1  # every record with f̃ ≤ 0.3 hits the clip
    assert w.min() == pytest.approx(0.3)  # riskiest record keeps g


def test_offset_g_negative_gives_more_zeros(risk):
    w0 = weights_from_risk(risk, g=0.0)
    wneg = weights_from_risk(risk, g=-0.5)
    f = normalise_risk(risk)
    assert np.sum(w0 == 0) == 1  # only the (unique) riskiest record
    assert np.sum(wneg == 0) == np.sum((1.0 - f) - 0.5 <= 0) > 1  # every record with f̃ ≥ 0.5
    assert wneg.max() == pytest.approx(0.5)
    assert np.all(wneg <= w0)


@pytest.mark.parametrize("c,g,expected", [(1.0, 0.0, 1.0), (0.8, 0.5, 1.0), (0.5, -0.1, 0.4), (0.3, -0.5, 0.0)])
def test_constant_risk_gives_clipped_c_plus_g(c, g, expected):
    assert np.array_equal(normalise_risk(np.full(5, 2.5)), np.zeros(5))
    w = weights_from_risk(np.full(5, 2.5), c=c, g=g)
    np.testing.assert_allclose(w, np.full(5, expected), atol=1e-15)


def test_divmax_normalisation():
    r = np.array([0.5, 1.0, 2.0, 4.0])
    np.testing.assert_allclose(normalise_risk(r, "divmax"), r / 4.0)
    w = weights_from_risk(r, method="divmax")
    np.testing.assert_allclose(w, [0.875, 0.75, 0.5, 0.0])
    assert w.max() < 1.0  # least risky record is NOT at weight 1 under divmax (docs/algorithms.md, B.3 reason ii)
    np.testing.assert_array_equal(normalise_risk(np.zeros(3), "divmax"), np.zeros(3))
    with pytest.raises(ValueError, match="non-negative"):
        normalise_risk(np.array([-1.0, 2.0]), "divmax")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_risk_raises(bad):
    with pytest.raises(ValueError, match="NaN or infinite"):
        weights_from_risk(np.array([0.1, bad, 2.0]))


def test_bad_risk_input_raises():
    with pytest.raises(ValueError):
        normalise_risk(np.array([1.0, 2.0]), "zscore")
    with pytest.raises(ValueError):
        weights_from_risk(np.array([]))
    with pytest.raises(ValueError):
        weights_from_risk(np.ones((2, 2)))


# --- sensitivity and ε (B.6) -----------------------------------------------------------------------


def test_epsilon_hand_computed():
    # 3 draws × 4 records, weights w = (1, 0.5, 0.25, 0):
    #   CE row s=0: (0.2, 1.0, 2.0,  9.0) -> w·CE = (0.2, 0.5, 0.5,  0) -> M_0 = 0.5
    #   CE row s=1: (0.5, 0.4, 3.0, 50.0) -> w·CE = (0.5, 0.2, 0.75, 0) -> M_1 = 0.75
    #   CE row s=2: (1.5, 2.0, 0.8,  7.0) -> w·CE = (1.5, 1.0, 0.2,  0) -> M_2 = 1.5
    #   Δ̂ = max_s M_s = 1.5, ε = 2Δ̂ = 3.0.
    # Record 4 has the largest losses (50!) but weight 0, so it contributes nothing.
    ce = np.array([[0.2, 1.0, 2.0, 9.0], [0.5, 0.4, 3.0, 50.0], [1.5, 2.0, 0.8, 7.0]])
    w = np.array([1.0, 0.5, 0.25, 0.0])
    m = max_weighted_loss(ce, w)
    np.testing.assert_allclose(m, [0.5, 0.75, 1.5], rtol=0, atol=1e-15)
    delta, eps = epsilon(m)
    assert delta == pytest.approx(1.5, abs=1e-15)
    assert eps == pytest.approx(3.0, abs=1e-15)
    assert isinstance(delta, float) and isinstance(eps, float)
    # unweighted (w ≡ 1) sensitivity would be driven by record 4: Δ = 50, ε = 100
    assert epsilon(max_weighted_loss(ce, np.ones(4))) == (50.0, 100.0)


def test_max_weighted_loss_shape_mismatch_raises():
    with pytest.raises(ValueError, match="do not match"):
        max_weighted_loss(np.ones((3, 4)), np.ones(5))
    with pytest.raises(ValueError):
        max_weighted_loss(np.ones(4), np.ones(4))  # not a [S, n] matrix
    with pytest.raises(ValueError):
        max_weighted_loss(np.ones((3, 4)), np.array([1.0, np.nan, 1.0, 1.0]))
    with pytest.raises(ValueError):
        epsilon(np.array([1.0, np.nan]))
    with pytest.raises(ValueError):
        epsilon(np.array([]))


# --- re-weighting (C.2) ----------------------------------------------------------------------------


@pytest.fixture
def wl():
    rng = np.random.default_rng(1)
    n = 200
    w = rng.uniform(0.0, 1.0, size=n)
    w[:10] = 0.0  # some records fully down-weighted
    w[10:15] = 1.0
    L = rng.gamma(2.0, 1.5, size=n) + 0.05
    return w, L


@pytest.mark.parametrize("k", [0.0, 0.3, 0.95, 1.0])
def test_power_reweight_properties(wl, k):
    w, L = wl
    big_delta = (w * L).max()
    new = reweight(w, L, k=k)
    assert new.shape == w.shape
    assert np.all((new >= 0) & (new <= 1))
    bounds = new * L
    # the argmax record keeps w_new = w^(1−k)(w L / L)^k = w ≤ 1, so the database bound is preserved
    assert bounds.max() == pytest.approx(big_delta, rel=0, abs=1e-12)
    assert np.all(bounds <= big_delta * (1 + 1e-12))  # no record's bound exceeds the old Δ
    assert np.all(new[w == 0] == 0)  # w = 0 stays 0 (k < 1 by construction; also k = 1 here)


def test_power_reweight_pulls_bounds_toward_delta(wl):
    w, L = wl
    big_delta = (w * L).max()
    new = reweight(w, L, k=0.95)
    pos = w > 0
    # before clipping the new bound is Δ^k Δ_i^(1−k) ≥ Δ_i; clipping at 1 can only keep w_new ≥ w since w ≤ 1
    assert np.all(new[pos] >= w[pos] - 1e-15)
    assert np.all(new * L >= w * L - 1e-12)
    # explicit formula of docs/algorithms.md, C.2, first form: min(1, g_k · w / Δ_i^k), g_k = Δ^k
    k = 0.95
    expected = np.minimum(1.0, big_delta**k * w[pos] / (w[pos] * L[pos]) ** k)
    np.testing.assert_allclose(new[pos], expected, rtol=1e-12)


def test_power_reweight_golden():
    # w = (1, 0.5, 0.2), L = (2, 1, 4): Δ_i = (2, 0.5, 0.8), Δ = 2, k = 0.5
    # w_new = min(1, w^0.5 (Δ/L)^0.5) = (1·1, sqrt(0.5·2), sqrt(0.2·0.5)) = (1, 1, sqrt(0.1))
    new = reweight(np.array([1.0, 0.5, 0.2]), np.array([2.0, 1.0, 4.0]), k=0.5)
    np.testing.assert_allclose(new, [1.0, 1.0, np.sqrt(0.1)], rtol=1e-14)


def test_k_zero_is_identity(wl):
    w, L = wl
    np.testing.assert_array_equal(reweight(w, L, k=0.0), w)
    np.testing.assert_array_equal(reweight(w, L, k=0.0, form="additive"), w)


def test_k_one_equalises_bounds():
    # choose L ≥ Δ everywhere so that Δ / L ≤ 1 and the clip at 1 never binds
    rng = np.random.default_rng(2)
    w = np.concatenate([[0.0, 0.0], rng.uniform(0.01, 0.4, size=50)])
    L = rng.uniform(2.0, 5.0, size=52)
    big_delta = (w * L).max()
    assert big_delta <= L.min()
    new = reweight(w, L, k=1.0)
    pos = w > 0
    np.testing.assert_allclose(new[pos] * L[pos], big_delta, rtol=1e-12)
    np.testing.assert_array_equal(new[~pos], 0.0)


def test_additive_reweight_keeps_max_bound():
    # w = (0.5, 0.25, 0.1, 0), L = (4, 2, 1, 3): Δ_i = (2, 0.5, 0.1, 0), Δ = 2, k = 0.5
    # raw = w + k(1 − Δ_i/Δ) = (0.5, 0.625, 0.575, 0.5); L·raw = (2, 1.25, 0.575, 1.5) -> γ = 2/2 = 1
    # w_new = raw (no clipping), max bound = 2 = Δ. Note the w = 0 record gets k·γ = 0.5 in this form.
    w = np.array([0.5, 0.25, 0.1, 0.0])
    L = np.array([4.0, 2.0, 1.0, 3.0])
    new = reweight(w, L, k=0.5, form="additive")
    np.testing.assert_allclose(new, [0.5, 0.625, 0.575, 0.5], rtol=1e-14)
    assert (new * L).max() == pytest.approx(2.0, abs=1e-12)


@pytest.mark.parametrize("k", [0.3, 0.95])
def test_additive_reweight_random_keeps_max_bound(k):
    rng = np.random.default_rng(3)
    w = rng.uniform(0.0, 0.3, size=100)
    L = rng.uniform(3.0, 6.0, size=100)  # large L keeps γ·raw < 1 (checked below)
    big_delta = (w * L).max()
    raw = w + k * (1 - w * L / big_delta)
    assert (big_delta / (L * raw).max() * raw).max() < 1  # precondition: no clipping at 1
    new = reweight(w, L, k=k, form="additive")
    assert np.all((new >= 0) & (new <= 1))
    assert (new * L).max() == pytest.approx(big_delta, abs=1e-12)
    assert np.all(new * L <= big_delta * (1 + 1e-12))


def test_reweight_all_zero_weights_unchanged():
    w = np.zeros(4)
    out = reweight(w, np.ones(4), k=0.95)
    np.testing.assert_array_equal(out, w)
    assert out is not w


@pytest.mark.parametrize("k", [-0.1, 1.5])
def test_reweight_bad_k_raises(k):
    with pytest.raises(ValueError, match="k must"):
        reweight(np.ones(3), np.ones(3), k=k)


def test_reweight_bad_inputs_raise():
    with pytest.raises(ValueError, match="form"):
        reweight(np.ones(3), np.ones(3), form="multiplicative")
    with pytest.raises(ValueError, match="differ in length"):
        reweight(np.ones(3), np.ones(4))
    with pytest.raises(ValueError):
        reweight(np.ones(3), np.array([1.0, np.inf, 1.0]))


@pytest.mark.parametrize("k", [0.95, 1.0])
def test_power_reweight_zero_weight_zero_loss_stays_zero(k):
    new = reweight(np.array([1.0, 0.0, 0.5]), np.array([5.0, 0.0, 0.0]), k=k)
    assert np.all(np.isfinite(new))
    assert new[1] == 0.0
