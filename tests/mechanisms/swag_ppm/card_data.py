"""What the model-card tests (test_card.py, test_card_claims.py) render: hand-made manifests and guarantee records,
public aggregates as the publish step reads them, and helpers that render a card and cut it into sections (not a
test module)."""

from __future__ import annotations

from dprelease.core.privacy import guarantee
from dprelease.mechanisms.swag_ppm.card import render

PPM = guarantee.ppm(10.6, 5.3, posterior_draws=500, round=3).as_dict()

DPSGD = guarantee.accountant("DP-SGD", 3.0, 1e-5, accountant="RDP").as_dict()

NONE = guarantee.none().as_dict()

LABELS = {"codes": ["10", "11", "12", "13", "14"], "titles": ["a", "b", "c", "d", "e"]}

DATA = {
    "rows": 5252,
    "classes": 5,
    "train_rows": 2626,
    "test_rows": 2626,
    "public": {"classes": 5, "until": "2015-12-31", "expected_train_size": 2500},
}

UTILITY = {
    "released_weighted_f1": 0.58703,
    "released_macro_f1": 0.25889,
    "draws": 30,
    "weighted_f1_mean": 0.59185,
    "weighted_f1_sd": 0.00592,
    "macro_f1_mean": 0.25916,
    "macro_f1_sd": 0.00392,
}

QUARTILES = [  # as csv.DictReader gives them (strings)
    {
        "group": "top quartile",
        "n_classes": "27",
        "train_size_range": "30-100",
        "test_support": "2096",
        "macro_f1": "0.6713803846472276",
        "weighted_f1": "0.6639810035648581",
    },
    {
        "group": "bottom quartile",
        "n_classes": "27",
        "train_size_range": "1-2",
        "test_support": "39",
        "macro_f1": "0.0",
        "weighted_f1": "0.0",
    },
    {
        "group": "all classes",
        "n_classes": "108",
        "train_size_range": "1-100",
        "test_support": "2626",
        "macro_f1": "0.25889123112104934",
        "weighted_f1": "0.5870336616576767",
    },
]

NONPRIVATE = {
    "weighted_f1": 0.594863,
    "macro_f1": 0.260262,
    "top_quartile_weighted_f1": 0.676031,
    "top_quartile_macro_f1": 0.684814,
    "bottom_quartile_weighted_f1": 0.0,
    "bottom_quartile_macro_f1": 0.0125,
}

AUDIT_ROWS = [
    {
        "arm": "swag_ppm_reweighted",
        "claimed_epsilon": "10.6",
        "guarantee": "ppm_local_asymptotic",
        "attack": "loss",
        "method": "heuristic_l3",
        "auc": "0.5123",
        "tpr_at_fpr_0.01": "0.0153",
        "tpr_at_fpr_0.001": "0.0021",
        "epsilon_lower_bound": "0.25",
        "ceiling": "",
        "confidence": "",
        "guesses": "",
        "correct": "",
        "bound": "heuristic (L.3: one model, records are not independent trials): not a bound",
    },
    {
        "arm": "swag_ppm_reweighted",
        "claimed_epsilon": "9.5",
        "guarantee": "ppm_local_asymptotic",
        "attack": "canary_input",
        "method": "steinke_pure",
        "auc": "",
        "tpr_at_fpr_0.01": "nan",
        "tpr_at_fpr_0.001": "",
        "epsilon_lower_bound": "0.8125",
        "ceiling": "6.5",
        "confidence": "0.95",
        "guesses": "3000",
        "correct": "1700",
        "bound": "one-run canary bound (Steinke et al. 2023, δ = 0), 95 % confidence, claim of the canary run",
    },
    {
        "arm": "swag_ppm_reweighted",
        "claimed_epsilon": "9.5",
        "guarantee": "ppm_local_asymptotic",
        "attack": "canary_input",
        "method": "fdp_pure",
        "auc": "",
        "tpr_at_fpr_0.01": "",
        "tpr_at_fpr_0.001": "",
        "epsilon_lower_bound": "0.7",
        "ceiling": "6.49",
        "confidence": "0.95",
        "guesses": "3000",
        "correct": "1700",
        "bound": "one-run f-DP bound (Mahloujifar et al. 2024, ε-DP curve), 95 % confidence, claim of the canary run",
    },
]


def manifest(g: dict = PPM, **extra) -> dict:
    m = {
        "guarantee": g,
        "backend": "head",
        "dataset": {"rows": 5252, "classes": 5, "train_rows": 2626, "test_rows": 2626},
    }
    return m | extra


def card(g: dict = PPM, *, utility=UTILITY, quartiles=QUARTILES, nonprivate=None, audit_rows=(), **extra) -> str:
    return render(
        manifest(g, **extra),
        data=DATA,
        utility=utility,
        quartiles=quartiles,
        nonprivate=nonprivate,
        audit_rows=list(audit_rows),
        labels=LABELS,
    )


def section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def quartile_lines(text: str) -> dict[str, str]:
    return {
        line.split(" (")[0].lstrip("| "): line
        for line in text.splitlines()
        if line.startswith(("| top quartile", "| bottom quartile", "| all classes"))
    }


UNCERTIFIED = guarantee.uncertified(
    9.31,
    4.655,
    certified_directions=19,
    parameters=126_316,
    posterior_draws=500,
    round=2,
    uncertified_index_point=7.145,
    temperature=1.0,
    temperature_min=1.0,
    temperature_all=0.0034,
    local_sensitivity_bound=4.655,
    claim_basis="GEV upper bound",
).as_dict()

CERTIFIED = guarantee.ppm(
    9.31,
    3.5726,
    certified_directions=126_316,
    parameters=126_316,
    posterior_draws=500,
    round=2,
    epsilon_point_estimate=7.145,
    temperature=1.0,
    temperature_min=1.0,
    temperature_all=1.2,
    temperature_min_all=1.0,
    local_sensitivity_bound=4.655,
    claim_basis="GEV upper bound",
).as_dict()
