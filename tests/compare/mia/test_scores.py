"""Membership scores (docs/guarantees.md, L.2) on hand-made probabilities."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dprelease.compare.mia import scores


def test_loss_score_is_log_true_class_probability():
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    assert scores.loss_scores(p, np.array([0, 1])) == pytest.approx([math.log(0.7), math.log(0.1)])


def test_logit_confidence_closed_form_and_stability():
    p = np.array([[0.7, 0.2, 0.1], [1 - 1e-9, 5e-10, 5e-10]])
    phi = scores.logit_confidence(p, np.array([0, 0]))
    assert phi[0] == pytest.approx(math.log(0.7 / 0.3))
    assert phi[1] == pytest.approx(math.log((1 - 1e-9) / 1e-9), rel=1e-6)  # no log(0) near p = 1


def test_lira_offline_z_scores():
    ref = np.array([[0.0, 1.0], [2.0, 1.0], [1.0, 1.0]])  # target 2 never varies: σ floored
    z = scores.lira_offline(np.array([3.0, 1.0]), ref)
    assert z[0] == pytest.approx((3.0 - 1.0) / 1.0)
    assert z[1] == 0.0
    with pytest.raises(ValueError):
        scores.lira_offline(np.zeros(2), np.zeros((1, 2)))


def test_lira_separates_shifted_members():
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(16, 500)) + np.linspace(-2, 2, 500)  # per-target difficulty
    member = rng.random(500) < 0.5
    target = np.linspace(-2, 2, 500) + rng.normal(size=500) * 0.3 + 1.5 * member
    from dprelease.compare.mia.bounds import auc

    assert auc(scores.lira_offline(target, ref), member) > auc(target, member)  # calibration per target helps


def test_lira_online_separates_in_from_out_and_checks_shapes():
    """Targets whose φ sits at their IN mean score above those at their OUT mean; shapes are checked."""
    rng = np.random.default_rng(0)
    n, r = 200, 16
    mu_out, shift = rng.normal(size=n), 2.0
    in_mask = np.zeros((r, n), bool)
    in_mask[::2] = rng.random((r // 2, n)) < 0.5
    in_mask[1::2] = ~in_mask[::2]
    ref = mu_out + shift * in_mask + 0.3 * rng.normal(size=(r, n))
    member = rng.random(n) < 0.5
    target = mu_out + shift * member + 0.3 * rng.normal(size=n)
    s = scores.lira_online(target, ref, in_mask)
    assert s[member].min() > s[~member].max() - 1.0 and s[member].mean() > s[~member].mean() + 5
    with pytest.raises(ValueError, match="IN mask"):
        scores.lira_online(target, ref, in_mask[:, :10])
    with pytest.raises(ValueError, match="IN and one OUT"):
        scores.lira_online(target, ref, np.ones_like(in_mask))
