"""dprelease.mechanisms.swag_ppm.card: what the claim rests on — the settings ε is conditional on, a certified and an
uncertified claim, the ε-sensitivity maximum, the tail-quantile interval — and an open vocabulary of kinds (any kind
renders on the card: the kind supplies its sentence and lines). The card's layout: test_card.py."""

from __future__ import annotations

import pytest

from dprelease.core.privacy import guarantee
from tests.mechanisms.swag_ppm.card_data import (
    AUDIT_ROWS,
    CERTIFIED,
    DPSGD,
    UNCERTIFIED,
    card,
    section,
)


def test_ppm_card_states_what_epsilon_is_conditional_on():
    from dprelease.mechanisms.swag_ppm.card import conditions as _conditions

    manifest = {
        "guarantee": {
            "kind": "ppm_local_asymptotic",
            "quantities": {"temperature": 1.7, "temperature_min": 1.0, "temperature_all": 0.0004},
        },
        "prior_precision": 1.0,
        "calibration": "scale",
        "local_sensitivity_uncertainty": {
            "exceedance_of_max": 1 / 501,
            "level": 0.9998,
            "estimate": 2.75,
            "confidence": 0.95,
            "ci_low": 2.74,
            "ci_high": 2.77,
        },
        "reweighting": {"mode": "iterative", "refits": 2, "reason": "not accepted: validation weighted F1 lower"},
        "knobs_that_move_epsilon": {
            "swag_lr": 0.01,
            "swag_epochs": 20,
            "swag_rank": 20,
            "swag_batch_size": 32,
            "finetune_epochs": 10,
            "prior_precision": 100.0,
            "calibration": "subspace",
            "c": 1.0,
            "reweighting": {"mode": "iterative"},
        },
    }
    text = "\n".join(_conditions(manifest))
    assert (
        "SWAG learning rate 0.01, 20 epochs, rank 20, batch 32; fine-tune 10 epochs; prior λ = 100; calibration "
        "subspace; c = 1; re-weighting iterative"
    ) in text
    assert (
        "= 1.7, smallest T_min = 1;" in text
        and "mean T̂_all = 0.0004, certified smallest ≥ – (calibration: scale" in text
    )
    assert "2Δ 5.500 (5.480–5.540); the stated figure uses the interval's upper end" in text and "0.0020" in text
    assert "raises it" not in text  # the old claim: a sampler too narrow in ANY direction raised ε (it did not)
    assert "not accepted" in text and "not covered by ε" in text


# what is certified; the conservative headline; the ε-sensitivity maximum ---------------------------------------------


def test_uncertified_card_claims_no_epsilon_and_says_what_is_certified_in_one_sentence():
    text = card(UNCERTIFIED, prior_precision=1000.0, calibration="subspace")
    privacy = section(text, "Privacy guarantee")
    assert (
        "NO differential-privacy guarantee: index 2Δ̂ = 9.31, not a differential-privacy guarantee: the sampler "
        "is certified in 19 of 126,316 directions (point estimate 7.145" in privacy
    )
    assert "kind: `ppm_uncertified`" in privacy
    assert "ε =" not in privacy and "ε + 2ε" not in privacy and "satisfies" not in privacy
    [line] = [x for x in privacy.splitlines() if x.startswith("* what is certified:")]
    sentence = line.removeprefix("* what is certified: ")
    assert sentence.count(". ") == 0 and sentence.endswith(".")  # one sentence
    assert "19 of its 126,316 parameter directions" in sentence and "not certified: the other 126,297" in sentence
    assert "index (not an ε) = 2Δ" in privacy


def test_certified_card_quotes_the_gev_bound_with_the_point_estimate_beside_it():
    text = card(CERTIFIED, prior_precision=1000.0, calibration="subspace")
    privacy = section(text, "Privacy guarantee")
    assert (
        "satisfies ε = 9.310 (point estimate 7.145, from the measured maximum Δ̂; the headline uses the upper end "
        "of the GEV interval of Δ's tail quantile, so the point estimate may lie below that interval)"
    ) in privacy
    assert "Certified: the sampler's temperature in all 126,316 parameter directions" in privacy
    assert "Δ = 4.655 (GEV upper bound)" in privacy and "ε + 2ε" in privacy


def test_card_carries_the_epsilon_sensitivity_maximum_when_measured():
    sens = {
        "figure": "ε",
        "maximum": 9.44,
        "minimum": 6.1,
        "cells": 7,
        "prior_precision": 1000.0,
        "source": "make epsilon-sensitivity",
    }
    assert "the largest ε was 9.440" in card(CERTIFIED, epsilon_sensitivity=sens)
    assert "epsilon-sensitivity grid near" not in card(CERTIFIED)


def test_audit_line_of_an_uncertified_release_names_no_epsilon():
    rows = [dict(r, arm="swag_ppm") for r in AUDIT_ROWS]
    text = card(UNCERTIFIED, audit_rows=rows)
    assert "(this release: no ε claimed)" in text


def test_the_epsilon_interval_is_labelled_as_the_tail_quantiles_and_contains_the_claimed_epsilon():
    """Issue 38: ε 7.145 (the point estimate) sat beside an "ε interval" 8.05–9.31 that did not contain it. The
    interval is the GEV interval of Δ's tail quantile as an ε: the claimed ε is its upper end, and the card (and the
    MLflow labels) say it is not an interval for the point estimate."""
    from dprelease.core import headline
    from dprelease.mechanisms.swag_ppm.card import implied_interval

    tail = {
        "exceedance_of_max": 1 / 501,
        "level": 0.9998,
        "estimate": 4.3,
        "confidence": 0.95,
        "ci_low": 4.025,
        "ci_high": 4.655,
    }
    low, high = implied_interval(CERTIFIED, tail)
    assert low <= CERTIFIED["epsilon"] <= high and abs(high - CERTIFIED["epsilon"]) < 1e-9
    assert CERTIFIED["quantities"]["epsilon_point_estimate"] < low  # the point estimate is another quantity
    text = card(CERTIFIED, prior_precision=1000.0, calibration="subspace", local_sensitivity_uncertainty=tail)
    [line] = [x for x in text.splitlines() if x.startswith("* tail-quantile ε, GEV interval")]
    assert "8.050–9.310" in line and "not an interval for the claimed ε" in line and "its upper end" in line
    assert "point estimate 7.145 comes from the measured maximum Δ̂, a different quantity" in line
    assert "not an interval for the point estimate" in headline.LABELS["epsilon_ci_low"]
    assert "NOT an interval for epsilon_point" in headline.INTERVAL_NOTE


# an open vocabulary: a kind declared by a package renders without an edit here ---------------------------------


def test_a_toy_packages_kind_renders_on_the_card(tmp_path, monkeypatch):
    """A new mechanism with a kind of claim of its own: its ``kinds`` module and its name in ``PACKAGES``, nothing
    else; the card finds the kind by name (the toy's plug-in is never imported) and renders its sentence and
    lines."""
    from dprelease.contracts import plugins

    pkg = tmp_path / "toy_rr"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""A toy mechanism: randomized response on labels."""\n', encoding="utf-8")
    (pkg / "kinds.py").write_text(
        "from dprelease.contracts.mechanism import Kind\n"
        "KINDS = (Kind('toy_label_dp', 'ε-label-DP of randomized response on the labels', True,\n"
        "              lambda g: f\"Randomized response on the labels: ε = {g['epsilon']:.3f} label differential privacy.\",\n"
        "              measured=lambda m: [f\"* flip probability: {m['guarantee']['quantities']['flip']:.2f}\"],\n"
        "              worst_case=True),)\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "PACKAGES", (*plugins.PACKAGES, "toy_rr"))
    monkeypatch.setattr(guarantee, "_KNOWN", dict(guarantee._KNOWN))
    g = guarantee.Guarantee("randomized response", "toy_label_dp", 1.0, None, "0 (pure)", {"flip": 0.27}).as_dict()
    privacy = section(card(g), "Privacy guarantee")
    assert "Randomized response on the labels: ε = 1.000 label differential privacy." in privacy
    assert "* flip probability: 0.27" in privacy and "kind: `toy_label_dp`" in privacy
    assert guarantee.Guarantee.from_dict(g).meaning == "ε-label-DP of randomized response on the labels"
    from dprelease.compare.frontier.report import dp_kinds

    assert dp_kinds()[0] == "dp_accountant" and dp_kinds()[-1] == "toy_label_dp"  # declared worst case: recommendable


def test_an_unknown_kind_on_a_card_is_one_line_naming_the_known():
    with pytest.raises(ValueError, match=r"unknown guarantee kind 'pure_dp' \(one of .*dp_accountant.*ppm_uncertified"):
        card({**DPSGD, "kind": "pure_dp"})
