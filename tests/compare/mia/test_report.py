"""audit.csv with the tight multi-run audit merged (``make audit-tight`` writes metrics/audit_tight.json):
its rows join the table, and an arm with a multi-run bound has the gate on that bound, not the one-run one."""

from __future__ import annotations

from dprelease.compare.mia.report import COLUMNS, _tight_section, audit_table

BOUND = {"epsilon_lower_bound": 0.7, "guesses": 100, "correct": 80, "ceiling": 3.0}
CANARY = {
    "alpha": 0.05,
    "planted": {},
    "arms": {
        "dpsgd": {
            "epsilon": 5.49,
            "delta": 1e-4,
            "guarantee": "dp_accountant",
            "audits": {
                "input": {"canaries": 4000, "included": 2000, "gate": {"method": "fdp"}, "steinke": BOUND, "fdp": BOUND}
            },
        }
    },
}
MIA = {"arms": {"dpsgd": {"attacks": {}, "claimed_epsilon": 5.49, "guarantee": "dp_accountant"}}}
TIGHT_ROW = {
    "arm": "dpsgd",
    "claimed_epsilon": 5.49,
    "delta": 1e-4,
    "attack": "tight_gradient_canary",
    "method": "multirun_cp",
    "epsilon_lower_bound": 2.9,
    "confidence": 0.95,
    "guesses": 108000,
    "correct": 55000,
    "ceiling": 9.1,
    "convicted": False,
    "gate": True,
    "runs": 120000,
    "tightness": 0.53,
    "bound": "multi-run audit",
}


def test_without_the_tight_audit_the_one_run_gate_stays():
    table = audit_table(MIA, CANARY)
    assert list(table.columns) == COLUMNS
    assert table["gate"].tolist() == [False, True]  # steinke, fdp (the gate's bound for δ > 0)
    assert "Not run here" in "\n".join(_tight_section(table, None))


def test_tight_rows_are_merged_and_take_the_gate():
    table = audit_table(MIA, CANARY, {"rows": [TIGHT_ROW], "arms": {"dpsgd": {"records": 32}}})
    assert len(table) == 3 and table["gate"].tolist() == [False, False, True]
    row = table[table["method"] == "multirun_cp"].iloc[0]
    assert (row["runs"], row["tightness"], row["epsilon_lower_bound"]) == (120000, 0.53, 2.9)
    md = "\n".join(_tight_section(table, {"arms": {"dpsgd": {"records": 32}}}))
    assert "multirun_cp" in md and "subsample of 32" in md and "not a bound" in md


REPLAY = {
    "claimed": 7.1,
    "guarantee": "ppm_local_asymptotic",
    "alpha": 0.05,
    "views": {
        "public": {
            "epsilon_lower_bound": 0.0,
            "decisions": 20,
            "correct": 10,
            "targets": 10,
            "convicted": False,
            "reproduces_release": False,
            "max_privacy_loss": None,
            "covers": "the standard adversary",
        },
        "operator": {
            "epsilon_lower_bound": 0.81,
            "decisions": 20,
            "correct": 20,
            "targets": 10,
            "convicted": True,
            "reproduces_release": True,
            "max_privacy_loss": 1.6e6,
            "covers": "not covered",
        },
    },
}


def test_replay_rows_join_the_table_one_per_view_and_never_take_the_gate():
    from dprelease.compare.mia.report import _replay_section

    table = audit_table(MIA, CANARY, None, REPLAY)
    rows = table[table["attack"] == "replay"]
    assert rows["method"].tolist() == ["replay_public", "replay_operator"]  # in the order of the views given
    assert rows["convicted"].tolist() == [False, True] and not rows["gate"].any()
    assert "privacy loss 1.6e+06" in rows.iloc[1]["bound"] and "descriptive" in rows.iloc[0]["bound"]
    assert "replay_operator" in "\n".join(_replay_section(table))
    assert rows["arm"].tolist() == ["replayed release"] * 2  # an older file names no arm: the neutral label
    named = audit_table(MIA, CANARY, None, REPLAY | {"arm": "toy_release"})
    assert named[named["attack"] == "replay"]["arm"].tolist() == ["toy_release"] * 2  # the arm its file names
    assert "Not run here" in "\n".join(_replay_section(audit_table(MIA, CANARY)))
