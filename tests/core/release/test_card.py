"""dprelease.core.release.card: what every release's card shares (the audit rows of an arm, the claim's sentence,
the replay audit's lines)."""

from __future__ import annotations

import csv

from dprelease.core.privacy import guarantee
from dprelease.core.release.card import audit_rows, guarantee_sentence

PPM = guarantee.ppm(10.6, 5.3, posterior_draws=500, round=3).as_dict()
DPSGD = guarantee.accountant("DP-SGD", 3.0, 1e-5, accountant="RDP").as_dict()
NONE = guarantee.none().as_dict()
# an audit.csv's columns, one row per (arm, attack, method)
AUDIT_ROWS = [
    {
        "arm": "swag_ppm_reweighted",
        "claimed_epsilon": "9.5",
        "attack": attack,
        "method": method,
        "epsilon_lower_bound": bound,
    }
    for attack, method, bound in [
        ("loss", "heuristic_l3", "0.25"),
        ("canary_input", "steinke_pure", "0.81"),
        ("canary_input", "fdp_pure", "0.7"),
    ]
]


def test_audit_rows_filters_by_arm(tmp_path):
    path = tmp_path / "audit.csv"
    assert audit_rows(path, "swag_ppm") == []  # no file yet
    rows = AUDIT_ROWS + [AUDIT_ROWS[0] | {"arm": "dpsgd"}]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(AUDIT_ROWS[0]))
        w.writeheader()
        w.writerows(rows)
    got = audit_rows(path, "swag_ppm_reweighted")
    assert [r["attack"] for r in got] == ["loss", "canary_input", "canary_input"]
    assert [r["attack"] for r in audit_rows(path, "dpsgd")] == ["loss"]
    assert audit_rows(path, "swag_ppm") == []


# guarantee_sentence -------------------------------------------------------------------------------
def test_guarantee_sentence_ppm():
    s = guarantee_sentence(PPM)
    assert "ONE random draw" in s
    assert "ε = 10.600" in s and "*locally*" in s and "*asymptotically*" in s
    assert "Δ̂" in s and "δ is not quantified" in s and "SWAG approximation" in s


def test_guarantee_sentence_dp_accountant():
    assert guarantee_sentence(DPSGD) == "(ε = 3.000, δ = 1e-05)-differential privacy from RDP accountant."
    no_name = guarantee.accountant("DP-SGD", 2.5, 0.001).as_dict()
    assert guarantee_sentence(no_name) == "(ε = 2.500, δ = 0.001)-differential privacy from an accountant."


def test_guarantee_sentence_none():
    assert guarantee_sentence(NONE) == "No privacy guarantee."


def test_the_card_shows_the_replay_audit_with_what_each_view_covers():
    from dprelease.core.release.card import replay_lines

    replay = {
        "views": {
            "public": {"targets": 10, "reproduces_release": False, "correct": 10, "decisions": 20, "convicted": False},
            "operator": {"targets": 10, "reproduces_release": True, "correct": 20, "decisions": 20, "convicted": True},
        }
    }
    text = "\n".join(replay_lines(replay))
    assert "| public | no | 10 of 20 | not convicted | yes: the standard adversary |" in text
    assert "| operator | yes | 20 of 20 | convicted | no: holds the secret key |" in text
    assert "not run" in "\n".join(replay_lines(None))
