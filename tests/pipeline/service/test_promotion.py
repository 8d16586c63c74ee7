"""The promotion protocol (dprelease.pipeline.service.promotion) on a real MLflow registry (SQLite in a temporary
folder): candidate → gates → ``production`` or ``refused``, figures read back from the registry's tags;
an audit attached to a version that lacks it; the retrain's registry summary. The whole registry step
(``register_release``: MLflow run, model, ledger) runs end to end in tests/flows/test_retrain_flow.py."""

from __future__ import annotations

import pytest
from conftest import fresh_registry

from dprelease.core.config import GateParams
from dprelease.pipeline.service import model_registry as mr
from dprelease.pipeline.service.promotion import attach_audit, promote, summary

NAME = "promotion-test"


@pytest.fixture
def registry(tmp_path):
    """(mlflow, client, a model source) on a fresh SQLite registry; the tracking URI is restored after."""
    pytest.importorskip("mlflow")
    with fresh_registry(tmp_path) as opened:
        yield opened


def _version(registry, digest: str, epsilon: float, f1: float, **extra) -> str:
    mlflow, _, source = registry
    tags = {"release.digest": digest, "epsilon": epsilon, "weighted_f1": f1, "cumulative_epsilon": epsilon} | extra
    return mr.register(mlflow, NAME, source, tags)


def _alias(client, alias: str) -> str | None:
    try:
        return str(client.get_model_version_by_alias(NAME, alias).version)
    except Exception:  # noqa: BLE001 - no such alias
        return None


def test_passing_version_is_promoted_failing_ones_refused_with_the_reason(registry):
    _, client, _ = registry
    gates = GateParams(epsilon_budget=5.0, utility_tolerance=0.01)
    v1 = _version(registry, "a", 2.0, 0.70, epsilon_lb=1.1, epsilon_lb_method="one-run")
    first = promote(client, NAME, v1, gates=gates)
    assert first.promote and [g.name for g in first.gates] == ["epsilon", "audit"]  # no production yet: no utility
    assert _alias(client, mr.PRODUCTION) == v1 and _alias(client, mr.REFUSED) is None
    assert client.get_model_version(NAME, v1).tags["gate.decision"] == "promoted"

    cases = [
        ("b", 6.0, 0.80, {}, "epsilon", "ε 6.000 vs budget 5"),  # over the ε budget
        ("c", 2.0, 0.68, {}, "utility", "utility 0.6800 vs production 0.7000"),  # more than 0.01 below
        ("d", 2.0, 0.75, {"epsilon_lb": 3.0}, "audit", "audit ε lower bound 3.000 vs claimed 2.000"),
    ]
    for digest, eps, f1, extra, failed, detail in cases:
        v = _version(registry, digest, eps, f1, **extra)
        decision = promote(client, NAME, v, gates=gates)
        tags = client.get_model_version(NAME, v).tags
        assert not decision.promote and decision.failed == [failed]
        assert tags["gate.decision"] == "refused" and tags["gate.failed"] == failed
        assert tags["gate.reason"] == decision.reason() and detail in tags["gate.reason"]
        assert _alias(client, mr.REFUSED) == v and _alias(client, mr.CANDIDATE) == v
        assert _alias(client, mr.PRODUCTION) == v1  # production never moved

    # within the tolerance of production, under budget: production moves to it
    v5 = _version(registry, "e", 2.0, 0.695)
    assert promote(client, NAME, v5, gates=gates).promote and _alias(client, mr.PRODUCTION) == v5


def test_gates_read_the_configured_metric_and_cumulative_cap(registry):
    _, client, _ = registry
    v1 = _version(registry, "a", 1.0, 0.9, macro_f1=0.5, cumulative_epsilon=1.0)
    gates = GateParams(utility_metric="macro_f1", cumulative_budget=2.5, utility_tolerance=0.0)
    assert promote(client, NAME, v1, gates=gates).promote
    # better macro F1 (worse weighted): the gate reads macro_f1, so only the cumulative cap refuses it
    v2 = _version(registry, "b", 1.0, 0.1, macro_f1=0.6, cumulative_epsilon=3.0)
    decision = promote(client, NAME, v2, gates=gates)
    assert decision.failed == ["cumulative"] and "cumulative ε 3.000 vs cap 2.5" in decision.reason()
    assert _alias(client, mr.PRODUCTION) == v1


def test_audit_attached_to_a_version_that_lacks_it(registry):
    mlflow, client, _ = registry
    with mlflow.start_run() as run:
        mlflow.log_metric("epsilon", 2.0)
    v = _version(registry, "a", 2.0, 0.7, run_id=run.info.run_id)
    version = client.get_model_version(NAME, v)
    new = {"epsilon_lb": 0.8, "audit_loss_auc": 0.52, "weighted_f1": 0.1}  # only the audit tags are attached
    assert attach_audit(client, NAME, version, new) == ["audit_loss_auc", "epsilon_lb"]
    tags = client.get_model_version(NAME, v).tags
    assert tags["epsilon_lb"] == "0.8" and tags["audit_loss_auc"] == "0.52" and tags["weighted_f1"] == "0.7"
    assert client.get_run(run.info.run_id).data.metrics["epsilon_lb"] == pytest.approx(0.8)  # a headline metric
    # a second attach finds nothing missing and changes nothing
    assert attach_audit(client, NAME, client.get_model_version(NAME, v), {"epsilon_lb": 9.0}) == []
    assert client.get_model_version(NAME, v).tags["epsilon_lb"] == "0.8"


def test_summary_reports_the_decision_and_production(registry):
    _, client, _ = registry
    v1 = _version(registry, "a", 2.0, 0.7, macro_f1=0.4)
    promote(client, NAME, v1, gates=GateParams(epsilon_budget=1.0))
    out = summary(client.get_model_version(NAME, v1), mr.production(client, NAME))
    assert out["version"] == v1 and out["decision"] == "refused" and not out["promoted"]
    assert out["production"] is None and out["reason"].startswith("refused by epsilon")
    assert out["figures"] == {"epsilon": 2.0, "weighted_f1": 0.7, "macro_f1": 0.4}  # the headline names only
    assert (out["epsilon"], out["utility"], out["cumulative_epsilon"]) == (2.0, 0.7, 2.0)
    v2 = _version(registry, "b", 0.5, 0.7)
    promote(client, NAME, v2, gates=GateParams(epsilon_budget=1.0))
    again = summary(client.get_model_version(NAME, v2), mr.production(client, NAME), unchanged=True)
    assert again["decision"] == "unchanged, already promoted" and again["production"] == v2


FP = {"snapshot_id": "s1", "code_hash": "c1", "params_hash": "p1"}


def test_unchanged_since_finds_the_production_or_newest_version_made_from_the_same_inputs(registry):
    from dprelease.pipeline.service.promotion import unchanged_since

    _, client, _ = registry

    def found(fp: dict, audit: bool = False) -> str | None:
        version = unchanged_since(client, NAME, fp, audit=audit)
        return None if version is None else str(version.version)

    assert found(FP) is None  # no model yet
    v1 = _version(registry, "a", 2.0, 0.7, **FP)
    assert found(FP) == v1  # the newest (candidate)
    promote(client, NAME, v1, gates=GateParams(epsilon_budget=5.0))
    for key in FP:  # any hash that differs: a retrain has something new to run
        assert found(FP | {key: "other"}) is None
    assert found(FP, audit=True) is None  # not audited, audit asked for
    client.set_model_version_tag(NAME, v1, "audited", "true")
    assert found(FP, audit=True) == v1
    # a newer version from other inputs: production (v1) still matches; the newest matches its own inputs
    v2 = _version(registry, "b", 2.0, 0.7, **(FP | {"snapshot_id": "s2"}))
    assert found(FP) == v1 and found(FP | {"snapshot_id": "s2"}) == v2
    # a version that is neither production nor the newest any more is not looked at
    v3 = _version(registry, "c", 2.0, 0.7, **(FP | {"code_hash": "c3"}))
    promote(client, NAME, v3, gates=GateParams(epsilon_budget=5.0))
    assert found(FP) is None and found(FP | {"snapshot_id": "s2"}) is None
    assert found(FP | {"code_hash": "c3"}) == v3
