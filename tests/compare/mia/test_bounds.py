"""Audit bounds against hand-worked cases and a toy mechanism with a known ε (docs/guarantees.md, L.3–L.4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dprelease.compare.mia import bounds


def test_clopper_pearson_closed_forms():
    # x = 0: the upper bound solves (1 − p)^n = α, i.e. p = 1 − α^(1/n)
    assert bounds.clopper_pearson_upper(0, 10, 0.05) == pytest.approx(1 - 0.05 ** (1 / 10), rel=1e-9)
    assert bounds.clopper_pearson_upper(10, 10) == 1.0
    # x = n − 1: P[Bin(n, p) ≤ n − 1] = 1 − p^n = α  →  p = (1 − α)^(1/n)
    assert bounds.clopper_pearson_upper(9, 10, 0.05) == pytest.approx(0.95 ** (1 / 10), rel=1e-9)
    with pytest.raises(ValueError):
        bounds.clopper_pearson_upper(11, 10)


def test_epsilon_from_error_rates_hand_worked():
    assert bounds.epsilon_from_error_rates(0.1, 0.1) == pytest.approx(math.log(9))
    assert bounds.epsilon_from_error_rates(0.01, 0.5) == pytest.approx(math.log(0.5 / 0.01))
    assert bounds.epsilon_from_error_rates(0.5, 0.5) == 0.0
    assert bounds.epsilon_from_error_rates(0.6, 0.6) == 0.0  # worse than chance: no evidence
    assert bounds.epsilon_from_error_rates(0.1, 0.1, delta=0.05) == pytest.approx(math.log(0.85 / 0.1))


def test_roc_auc_tpr_on_a_hand_made_case():
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.2, 0.1])
    member = np.array([1, 1, 0, 1, 0, 0], bool)
    assert bounds.auc(scores, member) == pytest.approx(8 / 9)
    assert bounds.tpr_at_fpr(scores, member, 0.0) == pytest.approx(2 / 3)
    assert bounds.tpr_at_fpr(scores, member, 1 / 3) == 1.0
    with pytest.raises(ValueError, match="both members"):
        bounds.auc(scores, np.ones(6, bool))


def test_heuristic_bound_on_separable_and_on_random_scores():
    rng = np.random.default_rng(1)
    member = rng.random(4000) < 0.5
    random = bounds.heuristic_epsilon(rng.normal(size=4000), member, rng=np.random.default_rng(2))
    assert random < 0.5
    shifted = bounds.heuristic_epsilon(rng.normal(size=4000) + 3 * member, member, rng=np.random.default_rng(2))
    assert shifted > 1.5


def test_clopper_pearson_interval_closed_forms():
    lo, hi = bounds.clopper_pearson_interval(0, 20, 0.05)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 20), rel=1e-9)
    lo, hi = bounds.clopper_pearson_interval(20, 20, 0.05)
    assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / 20), rel=1e-9)


def test_tpr_at_fpr_counts_on_a_hand_made_case():
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.2, 0.1])
    member = np.array([1, 1, 0, 1, 0, 0], bool)
    r = bounds.tpr_at_fpr_counts(scores, member, 0.0)
    assert (r["tp"], r["fp"], r["members"], r["non_members"]) == (2, 0, 3, 3)
    assert r["tpr"] == pytest.approx(2 / 3) == pytest.approx(bounds.tpr_at_fpr(scores, member, 0.0))
    assert r["tpr_ci_low"] < 2 / 3 < r["tpr_ci_high"]
    assert bounds.tpr_at_fpr_counts(scores, member, 1 / 3)["tp"] == 3


def test_null_band_matches_a_simulation_and_the_closed_form():
    """The 95th percentile of TPR at low FPR when scores are noise: the exact negative-hypergeometric
    quantile against 3,000 simulated random scorings (an independent computation)."""
    n_in, n_out, fpr = 300, 250, 0.01  # k = 2 false positives allowed
    rng = np.random.default_rng(5)
    member = np.r_[np.ones(n_in, bool), np.zeros(n_out, bool)]
    sims = [bounds.tpr_at_fpr_counts(rng.random(n_in + n_out), member, fpr)["tpr"] for _ in range(3000)]
    exact = bounds.null_tpr_quantile(n_in, n_out, fpr)
    assert abs(np.mean(np.array(sims) <= exact) - 0.95) < 0.02
    # FPR 0: members ranked above every non-member; P[TP ≥ t] = C(n_in, t) / C(n_in + n_out, t)
    from math import comb

    t = round(bounds.null_tpr_quantile(n_in, n_out, 0.0) * n_in)
    tail = lambda t: comb(n_in, t) / comb(n_in + n_out, t)  # noqa: E731
    assert tail(t + 1) <= 0.05 < tail(t)
    # the review's figure (docs/guarantees.md, R.4: 2,101 non-members, 2,626 members, 1 % FPR): 0.0156
    assert bounds.null_tpr_quantile(2626, 2101, 0.01) == pytest.approx(0.0156, abs=1e-4)
