"""The privacy-gated registry (dprelease.pipeline.service.model_registry) on a real MLflow registry (SQLite in a
temporary folder): versions, the candidate / production / refused aliases, gate tags, figures read back."""

from __future__ import annotations

import pytest
from conftest import fresh_registry

from dprelease.pipeline.service import model_registry as mr
from dprelease.pipeline.service.gates import Decision, Figures, Gate

NAME = "autocoder-test"


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """(mlflow, client, a model source) on a fresh SQLite registry; the tracking URI is restored after."""
    pytest.importorskip("mlflow")
    with fresh_registry(tmp_path_factory.mktemp("registry")) as opened:
        yield opened


def _alias(client, alias: str) -> str:
    return str(client.get_model_version_by_alias(NAME, alias).version)


def _tags(digest: str, epsilon: float, f1: float, **extra) -> dict:
    return {"release.digest": digest, "epsilon": epsilon, "weighted_f1": f1} | extra


def test_gates_move_production_only_when_every_gate_passes(registry):
    mlflow, client, source = registry
    assert mr.production(client, NAME) is None and mr.find_version(client, NAME, "aaa") is None  # nothing yet
    v1 = mr.register(mlflow, NAME, source, _tags("aaa", 1.5, 0.71, epsilon_lb=0.4, epsilon_lb_method="one-run"))
    assert _alias(client, mr.CANDIDATE) == v1  # every new version
    assert mr.production(client, NAME) is None  # registering alone promotes nothing
    mr.record_decision(client, NAME, v1, Decision((Gate("privacy", True, "ε 1.5 ≤ 2"), Gate("utility", True, "ok"))))
    assert str(mr.production(client, NAME).version) == v1

    v2 = mr.register(mlflow, NAME, source, _tags("bbb", 3.0, 0.75))
    assert v2 != v1 and _alias(client, mr.CANDIDATE) == v2
    refused = Decision((Gate("privacy", False, "ε 3 > 2"), Gate("utility", True, "ok")))
    mr.record_decision(client, NAME, v2, refused)
    assert str(mr.production(client, NAME).version) == v1  # the refused version never serves
    assert _alias(client, mr.REFUSED) == v2
    tags = client.get_model_version(NAME, v2).tags
    assert tags["gate.decision"] == "refused" and tags["gate.failed"] == "privacy"
    assert tags["gate.reason"] == refused.reason() and "ε 3 > 2" in tags["gate.reason"]
    assert client.get_model_version(NAME, v1).tags["gate.decision"] == "promoted"

    assert str(mr.find_version(client, NAME, "bbb").version) == v2  # the same release is found, not registered twice
    assert mr.find_version(client, NAME, "ccc") is None


def test_figures_are_read_back_from_the_tags(registry):
    mlflow, client, source = registry
    mr.register(mlflow, NAME, source, _tags("ddd", 1.25, 0.7, epsilon_lb=0.4, epsilon_lb_method="one-run"))
    mr.register(mlflow, NAME, source, _tags("eee", 2.0, 0.5, cumulative_epsilon=3.25))
    version = mr.find_version(client, NAME, "ddd")
    assert mr.figures(version, "weighted_f1") == Figures(
        epsilon=1.25, utility=0.7, cumulative_epsilon=None, audit_lower_bound=0.4, audit_method="one-run"
    )
    without_audit = mr.figures(mr.find_version(client, NAME, "eee"), "weighted_f1")
    assert without_audit.cumulative_epsilon == 3.25
    assert without_audit.audit_lower_bound is None and without_audit.audit_method is None


def test_versions_tagged_with_the_old_names_still_read():
    class Version:
        tags = {"privacy.epsilon": "2.5", "utility.macro_f1": "0.6", "privacy.cumulative_epsilon": "7.0"}

    assert mr.tag(Version, "epsilon") == "2.5" and mr.tag(Version, "epsilon_lb") is None
    assert mr.figures(Version, "macro_f1") == Figures(epsilon=2.5, utility=0.6, cumulative_epsilon=7.0)


def test_requirements_pin_this_environment_without_local_labels():
    from importlib import metadata

    pins = dict(r.split("==") for r in mr.requirements())
    assert set(pins) == set(mr.RUNTIME)
    assert all("+" not in v for v in pins.values())
    assert pins["torch"] == metadata.version("torch").split("+")[0]


def test_a_version_without_an_epsilon_tag_reads_as_no_epsilon_with_its_kind():
    class Version:
        tags = {
            "uncertified_index": "9.3",
            "weighted_f1": "0.6",
            "guarantee": "ppm_uncertified",
            "cumulative_epsilon": "inf",
        }

    f = mr.figures(Version, "weighted_f1")
    assert (f.epsilon, f.kind, f.cumulative_epsilon) == (None, "ppm_uncertified", float("inf"))
