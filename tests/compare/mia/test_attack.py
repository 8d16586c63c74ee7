"""The membership-inference stage's building blocks (dprelease.compare.mia.attack): which folder an arm is
attacked from, the attack scores, and the per-attack summary the report and the gate read."""

from __future__ import annotations

import numpy as np
import pytest

from dprelease.compare.mia.attack import ATTACKS, FPR_GRID, arm_folder, attack_scores, summarise
from dprelease.core.config import parse_params


def test_each_arm_is_attacked_from_its_release_format_folder():
    params = parse_params({})
    assert arm_folder(params, "swag_ppm_reweighted") == f"{params.artifacts}/draw/release"  # the release itself
    assert arm_folder(params, "dpsgd") == f"{params.artifacts}/arms/dpsgd/model"


def _overfit(n: int = 400, classes: int = 4, refs: int = 8, seed: int = 0):
    """A model that is confident on its members and not on non-members; reference models that never saw
    the targets (OUT) or saw half of them (IN)."""
    rng = np.random.default_rng(seed)
    member = rng.random(n) < 0.5
    y = rng.integers(0, classes, n)
    p_true = np.where(member, rng.uniform(0.8, 0.99, n), rng.uniform(0.2, 0.6, n))
    probs = np.full((n, classes), 0.0)
    probs[:] = ((1 - p_true) / (classes - 1))[:, None]
    probs[np.arange(n), y] = p_true
    phi_ref = rng.normal(0.0, 0.5, (refs, n))  # OUT models: low confidence on every target
    in_mask = (np.arange(refs)[:, None] + np.arange(n)[None, :]) % 2 == 0  # half the models IN, per target
    phi_online = np.where(in_mask, rng.normal(3.0, 0.5, (refs, n)), phi_ref)
    return probs, y, member, phi_ref, phi_online, in_mask


def test_attacks_separate_members_of_an_overfit_model():
    probs, y, member, phi_ref, phi_on, in_mask = _overfit()
    scores = attack_scores(probs, y, phi_ref, phi_on, in_mask)
    assert tuple(scores) == ATTACKS and all(s.shape == member.shape for s in scores.values())
    for name, s in scores.items():
        summary = summarise(s, member, rng=np.random.default_rng(1), alpha=0.05)
        assert summary["auc"] > 0.95, name
        assert summary["tpr_at_fpr_0.01"] > summary["null_tpr_95_0.01"], name  # beyond what chance reaches
        assert summary["heuristic_epsilon"] > 0, name
    assert "lira_online" not in attack_scores(probs, y, phi_ref)  # no IN models: offline attacks only


def test_a_score_with_no_information_stays_within_the_null_band():
    rng = np.random.default_rng(2)
    member = rng.random(2000) < 0.5
    summary = summarise(rng.normal(size=2000), member, rng=np.random.default_rng(3), alpha=0.05)
    assert abs(summary["auc"] - 0.5) < 0.05
    assert summary["tpr_at_fpr_0.01"] <= summary["null_tpr_95_0.01"] + 0.02
    assert summary["tpr_ci_low_0.01"] <= summary["tpr_at_fpr_0.01"] <= summary["tpr_ci_high_0.01"]
    assert summary["heuristic_epsilon"] < 0.5


def test_the_summary_holds_aggregates_only():
    """What leaves artifacts/: numbers and the ROC on the fixed grid, never one value per record."""
    probs, y, member, phi_ref, _, _ = _overfit(n=300)
    summary = summarise(attack_scores(probs, y, phi_ref)["loss"], member, rng=np.random.default_rng(0), alpha=0.05)
    roc = summary.pop("roc_tpr")
    assert len(roc) == len(FPR_GRID) and roc == sorted(roc) and 0 <= roc[0] and roc[-1] == pytest.approx(1.0)
    assert all(np.isscalar(v) for v in summary.values())
    assert {"auc", "tpr_at_fpr_0.01", "tp_0.01", "fp_0.001", "heuristic_epsilon"} <= set(summary)
