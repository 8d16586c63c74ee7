"""The linear PPM card: the claim by kind, the sampler, diagnostics against their thresholds, the temperature."""

from __future__ import annotations

from dprelease.mechanisms.linear_ppm.card import claim, render

SAMPLING = {
    "rhat_max": 1.02,
    "rhat_log_posterior": 1.02,
    "rhat_max_loss": 1.01,
    "ess_bulk_min": 210.0,
    "ess_tail_min": 250.0,
    "divergences": 0,
    "acceptance_min": 0.78,
    "acceptance_max": 0.84,
    "parameters": 41580,
    "temperature_all": 1.003,
    "temperature_all_q05": 0.8,
    "temperature_all_q95": 1.2,
    "seconds": 300.0,
    "sampler": {
        "sampler": "NUTS (Pyro)",
        "chains": 4,
        "warmup": 100,
        "draws": 100,
        "preconditioner": "K-FAC at the MAP",
    },
}
THRESH = {"rhat_max": 1.05, "ess_min": 100.0, "divergences_max": 0, "temperature_tolerance": 0.1}
F1 = {
    "released_draw": {
        "weighted_f1": 0.45,
        "macro_f1": 0.17,
        "kind": "dp_noised_counts",
        "count_noise_sd": 2.8284,
        "evaluation_epsilon": 1.541,
        "evaluation_delta": 3e-4,
    }
}


def _manifest(kind, eps, **q):
    q = {"sampler": "NUTS (Pyro) Markov chain", "weights": "uniform (w ≡ 1, independent of the data)"} | q
    return {
        "guarantee": {"kind": kind, "epsilon": eps, "delta": None, "quantities": q},
        "sampling": SAMPLING,
        "diagnostics_thresholds": THRESH,
        "test_f1": F1,
        "prior_precision": 100.0,
        "temperature": 1.0,
    }


def test_censored_claim_is_declared_and_strict_with_the_sampler_error_as_a_diagnostic():
    text = claim(_manifest("ppm_censored", 8.0, censor_level=4.0)["guarantee"])
    assert "ε = 8" in text and "κ = 4" in text and "every pair of neighbouring databases" in text
    assert "not a δ" in text


def test_risk_claim_is_local_and_measured():
    g = _manifest("ppm_local_asymptotic", 11.2, local_sensitivity=5.6, kept_draws=400, temperature_declared=1.0)
    text = claim(g["guarantee"])
    assert "2Δ̂/T" in text and "local" in text and "which no ε covers" in text


def test_card_shows_diagnostics_thresholds_temperature_and_f1():
    card = render(
        _manifest("ppm_censored", 8.0, censor_level=4.0),
        data={
            "train_rows": 2626,
            "classes": 108,
            "public": {"classes": 108, "until": "2015-12-31", "expected_train_size": 1642},
        },
    )
    assert (
        "2626" not in card and "2,626" not in card and "MAP (not released" not in card
    )  # no private count, no exact figure
    assert "ε = 1.541, δ = 0.0003 for the test reports" in card and "n̂ = 1642" in card
    for text in (
        "split R-hat",
        "≤ 1.05",
        "ESS bulk ≥ 210",
        "divergent transitions 0",
        "ALL 41,580 parameter",
        "1.003",
        "| released draw | 0.450 | 0.170 |",
        "NUTS (Pyro)",
        "kept private",
        "a NUTS (Pyro) Markov chain approximation",
    ):  # the registered kind's sentence
        assert text in card, text
