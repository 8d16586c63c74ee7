"""Audit bounds against hand-worked cases and a toy mechanism with a known ε (TRUST.md L.3–L.4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dprelease.mia import bounds


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


def test_one_run_epsilon_hand_worked():
    # all r guesses right: p^r = α  →  ε = ln(p/(1 − p)) with p = α^(1/r)
    p = 0.05 ** (1 / 100)
    assert bounds.one_run_epsilon(100, 100, 0.05) == pytest.approx(math.log(p / (1 - p)), abs=1e-6)
    assert bounds.one_run_epsilon(100, 100, 0.05) == pytest.approx(3.493, abs=1e-3)
    assert bounds.one_run_epsilon(50, 100) == 0.0  # chance level proves nothing
    assert bounds.one_run_epsilon(0, 0) == 0.0
    # more right guesses, larger bound; more confidence demanded, smaller bound
    assert bounds.one_run_epsilon(80, 100) < bounds.one_run_epsilon(90, 100)
    assert bounds.one_run_epsilon(90, 100, 0.01) < bounds.one_run_epsilon(90, 100, 0.05)


def test_canary_guesses_take_the_extremes():
    g = bounds.canary_guesses(np.array([0.1, 0.9, 0.5, 0.3, 0.8]), k_plus=2, k_minus=1)
    assert g.tolist() == [-1, 1, 0, 0, 1]
    with pytest.raises(ValueError):
        bounds.canary_guesses(np.zeros(3), 2, 2)


def test_roc_auc_tpr_on_a_hand_made_case():
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.2, 0.1])
    member = np.array([1, 1, 0, 1, 0, 0], bool)
    assert bounds.auc(scores, member) == pytest.approx(8 / 9)
    assert bounds.tpr_at_fpr(scores, member, 0.0) == pytest.approx(2 / 3)
    assert bounds.tpr_at_fpr(scores, member, 1 / 3) == 1.0
    with pytest.raises(ValueError, match="both members"):
        bounds.auc(scores, np.ones(6, bool))


def _randomized_response(eps: float, m: int, rng: np.random.Generator):
    """A toy ε-DP mechanism on each canary's inclusion bit: report it truthfully w.p. e^ε/(1+e^ε)."""
    member = rng.random(m) < 0.5
    truthful = rng.random(m) < math.exp(eps) / (1 + math.exp(eps))
    report = np.where(truthful, member, ~member)
    return report + rng.random(m) * 1e-3, member  # tiny jitter: a ranking, not ties


def test_one_run_bound_stays_below_a_known_epsilon():
    """The audit's sanity rule on a mechanism with known ε = 1. Here the right guesses are exactly
    Bin(r, e^ε/(1+e^ε)), so at 95 % confidence the bound exceeds ε with probability 4.5 % (r = 1000,
    computed exactly below); over 100 seeded runs we allow 10 (P[more] ≈ 0.6 %). And the bound is not
    vacuous: it finds most of ε."""
    from scipy.stats import binom

    eps, r = 1.0, 1000
    p = math.exp(eps) / (1 + math.exp(eps))
    c = next(c for c in range(r + 1) if binom.sf(c - 1, r, p) <= 0.05)  # fewest right guesses that reject ε
    assert bounds.one_run_epsilon(c, r) > eps >= bounds.one_run_epsilon(c - 1, r)
    assert binom.sf(c - 1, r, p) <= 0.05
    found = []
    for seed in range(100):
        scores, member = _randomized_response(eps, 2000, np.random.default_rng(seed))
        found.append(bounds.canary_audit(scores, member, 500, 500)["epsilon_lower_bound"])
    assert sum(f > eps for f in found) <= 10
    assert np.median(found) > 0.7 * eps


def test_non_private_mechanism_gives_a_large_bound_capped_by_the_guesses():
    rng = np.random.default_rng(0)
    member = rng.random(1000) < 0.5
    audit = bounds.canary_audit(member + rng.random(1000) * 1e-3, member, 100, 100)
    assert audit["correct"] == audit["guesses"] == 200
    assert audit["epsilon_lower_bound"] == pytest.approx(audit["max_certifiable"])


def test_heuristic_bound_on_separable_and_on_random_scores():
    rng = np.random.default_rng(1)
    member = rng.random(4000) < 0.5
    random = bounds.heuristic_epsilon(rng.normal(size=4000), member, rng=np.random.default_rng(2))
    assert random < 0.5
    shifted = bounds.heuristic_epsilon(rng.normal(size=4000) + 3 * member, member, rng=np.random.default_rng(2))
    assert shifted > 1.5
