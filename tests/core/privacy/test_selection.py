"""Private selection with a random stopping rule (Liu & Talwar 2019): stopping, geometric tries, budget."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dprelease.core.privacy.selection import Selection, select, selection_budget


def _counter_draw():
    counter = itertools.count()
    return lambda: next(counter)


def test_stops_on_first_candidate_reaching_tau():
    scores = [0.1, 0.2, 0.55, 0.9, 0.7]
    draw = _counter_draw()
    rng = np.random.default_rng(0)
    res = select(draw, lambda i: scores[i], tau=0.5, gamma=1e-9, rng=rng)
    assert isinstance(res, Selection)
    assert res.found and res.selected == 2 and res.tries == 3
    assert res.scores == [0.1, 0.2, 0.55]
    assert draw() == 3  # no candidate drawn after the selected one


def test_score_equal_to_tau_is_selected():
    res = select(_counter_draw(), lambda i: 0.5, tau=0.5, gamma=0.5, rng=np.random.default_rng(0))
    assert res.found and res.tries == 1


def test_found_candidate_zero_is_found():
    """``found`` means 'something was selected', even a falsy candidate."""
    res = select(_counter_draw(), lambda i: 1.0, tau=0.5, gamma=0.5, rng=np.random.default_rng(0))
    assert res.selected == 0 and res.found


def test_unreachable_tau_stops_by_the_coin():
    res = select(_counter_draw(), lambda i: 0.3, tau=1.01, gamma=0.5, rng=np.random.default_rng(3))
    assert not res.found and res.selected is None
    assert res.tries >= 1 and len(res.scores) == res.tries


def test_gamma_one_is_exactly_one_try():
    for seed in range(20):
        res = select(_counter_draw(), lambda i: 0.0, tau=1.01, gamma=1.0, rng=np.random.default_rng(seed))
        assert res.tries == 1 and not res.found


@pytest.mark.parametrize("gamma", [0.5, 0.2, 0.1])
def test_tries_are_geometric_with_mean_one_over_gamma(gamma):
    """Tries ~ Geometric(γ): mean 1/γ, SD √(1−γ)/γ. With n = 4000 repetitions the standard error of the
    mean is √(1−γ)/(γ√n); we allow 4 standard errors (false-alarm rate ≈ 6e-5; seeds fixed anyway)."""
    n = 4000
    tries = np.array(
        [
            select(_counter_draw(), lambda i: 0.0, tau=1.01, gamma=gamma, rng=np.random.default_rng([2025, rep])).tries
            for rep in range(n)
        ]
    )
    se = math.sqrt(1 - gamma) / (gamma * math.sqrt(n))
    assert abs(tries.mean() - 1 / gamma) < 4 * se
    assert tries.min() == 1
    # P(tries = 1) = γ, tolerance 4 binomial SEs
    assert abs((tries == 1).mean() - gamma) < 4 * math.sqrt(gamma * (1 - gamma) / n)


def test_same_rng_seed_same_tries():
    a = select(_counter_draw(), lambda i: 0.0, tau=1.01, gamma=0.3, rng=np.random.default_rng(9))
    b = select(_counter_draw(), lambda i: 0.0, tau=1.01, gamma=0.3, rng=np.random.default_rng(9))
    assert a.tries == b.tries


@pytest.mark.parametrize("gamma", [0.0, -0.1, 1.0001, 2.0, float("nan")])
def test_bad_gamma_raises_before_any_draw(gamma):
    drawn = []
    with pytest.raises(ValueError, match="gamma"):
        select(lambda: drawn.append(1), lambda c: 1.0, tau=0.5, gamma=gamma, rng=np.random.default_rng(0))
    assert drawn == []


@pytest.mark.parametrize("eps", [0.0, 0.5, 3.25, 17.0])
def test_selection_budget_is_twice_epsilon(eps):
    assert selection_budget(eps) == 2 * eps
