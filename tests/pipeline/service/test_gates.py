"""Promotion gates: each gate alone, and the reasons a refusal gives."""

from __future__ import annotations

import pytest

from dprelease.pipeline.service.gates import Figures, decide

BUDGET = {"epsilon_budget": 6.0, "cumulative_budget": 12.0, "utility_tolerance": 0.01}


def test_first_version_passes_on_privacy_alone():
    d = decide(Figures(5.0, 0.5, cumulative_epsilon=5.0), None, **BUDGET)
    assert d.promote and [g.name for g in d.gates] == ["epsilon", "cumulative"]


@pytest.mark.parametrize(
    "candidate, failed",
    [
        (Figures(6.5, 0.60, 6.5), ["epsilon"]),
        (Figures(5.0, 0.60, 12.5), ["cumulative"]),
        (Figures(5.0, 0.585, 10.0), ["utility"]),  # 0.585 < 0.60 - 0.01
        (Figures(5.0, 0.59, 10.0, audit_lower_bound=5.5), ["audit"]),
        (Figures(7.0, 0.50, 13.0, audit_lower_bound=8.0), ["epsilon", "cumulative", "utility", "audit"]),
    ],
)
def test_each_gate_refuses_on_its_own(candidate, failed):
    d = decide(candidate, Figures(5.0, 0.60), **BUDGET)
    assert not d.promote and d.failed == failed
    assert d.reason().startswith("refused by " + failed[0])


def test_tolerance_edge_and_audit_switch():
    prod = Figures(5.0, 0.60)
    assert decide(Figures(5.0, 0.59, 10.0), prod, **BUDGET).promote  # exactly production - tolerance
    lb = Figures(5.0, 0.60, 10.0, audit_lower_bound=9.0)
    assert not decide(lb, prod, **BUDGET).promote
    assert decide(lb, prod, **BUDGET | {"audit": False}).promote  # gate switched off
    assert decide(Figures(5.0, 0.6), prod, epsilon_budget=6.0).promote  # no cap: no cumulative gate


def test_cap_without_a_cumulative_figure_is_an_error():
    with pytest.raises(ValueError, match="no cumulative"):
        decide(Figures(5.0, 0.6), None, epsilon_budget=6.0, cumulative_budget=10.0)


def test_audit_gate_names_its_audit_and_false_alarm_rate():
    c = Figures(5.5, 0.60, 10.0, audit_lower_bound=2.9, audit_method="multi-run audit, 108000 runs")
    d = decide(c, None, **BUDGET)
    audit = next(g for g in d.gates if g.name == "audit")
    assert audit.passed and "multi-run audit, 108000 runs" in audit.detail and "false-alarm rate ≤ 5%" in audit.detail


def test_an_uncertified_release_fails_the_epsilon_gate_without_being_read_as_an_epsilon():
    c = Figures(None, 0.70, float("inf"), audit_lower_bound=0.5, kind="ppm_uncertified")
    d = decide(c, Figures(5.0, 0.60), **BUDGET)
    assert not d.promote and d.failed == ["epsilon", "cumulative"]  # no audit gate: no claim to convict
    assert "epsilon (no ε claimed (kind ppm_uncertified) vs budget 6)" in d.reason()
    huge = decide(Figures(None, 0.7, kind="ppm_uncertified"), None, epsilon_budget=1e12)
    assert huge.failed == ["epsilon"]  # whatever the budget: an index is never compared with it
