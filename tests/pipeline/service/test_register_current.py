"""``make serve`` registers the project's current release before the first scheduled retrain
(dprelease.pipeline.service.promotion.register_current, called by flows/serve.py start before the worker starts;
the order: tests/pipeline/service/test_supervisor.py): a real release of the head slice becomes version 1 with
its ε, kind (``guarantee``) and weighted F1 as tags and the gates' decision, in the ledger too; a second
``make serve`` adds no version; no release, or a release folder that is not the one metrics/ describes,
is one line and nothing registered."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import copy_root, mlflow_globals, slice_raw

NAME = "oiics-autocoder"


@pytest.fixture
def project(head_run, tmp_path):
    root = copy_root(head_run.root, tmp_path / "project")
    (root / "params.yaml").write_text(yaml.safe_dump(slice_raw("head"), sort_keys=False), encoding="utf-8")
    with mlflow_globals():
        yield root, head_run.params


def _versions(root):
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    return client, sorted(client.search_model_versions(f"name = '{NAME}'"), key=lambda v: int(v.version))


def test_the_current_release_is_registered_once_with_its_figures_and_gate(project):
    from dprelease.core.headline import headline
    from dprelease.core.io import read_json
    from dprelease.pipeline.service.ledger import Ledger
    from dprelease.pipeline.service.promotion import register_current
    from flows import serve

    root, p = project
    first = register_current(p, root)
    reg = first["registry"]
    assert reg["version"] == "1" and not reg["decision"].startswith("unchanged")
    client, versions = _versions(root)
    assert [str(v.version) for v in versions] == ["1"]
    tags = versions[0].tags
    figures = headline(root / "metrics")
    g = read_json(root / "release" / "release.json")["guarantee"]
    assert tags["guarantee"] == g["kind"]  # its kind
    assert float(tags["weighted_f1"]) == pytest.approx(figures["weighted_f1"])  # its weighted F1
    if g.get("epsilon") is not None:
        assert float(tags["epsilon"]) == pytest.approx(figures["epsilon"])  # its ε (when it claims one)
    assert tags["gate.decision"] in ("promoted", "refused") and tags["gate.reason"]  # the gates were evaluated
    assert tags["source"] == "release" and tags["snapshot"] == "sir.csv.gz"
    assert {"snapshot_id", "code_hash", "params_hash", "release.digest", "cumulative_epsilon"} <= set(tags)
    alias = "production" if tags["gate.decision"] == "promoted" else "refused"
    assert str(client.get_model_version_by_alias(NAME, alias).version) == "1"
    assert [e.version for e in Ledger(root / "artifacts" / "ledger").entries] == ["1"]
    assert json.loads((root / "metrics" / "mlflow_run.json").read_text())["run_id"] == tags["run_id"]

    # a second `make serve`: the same release is found, nothing is added (flows/serve.py's line says so)
    again = serve.register_current(root, "params.yaml")
    assert again["line"].startswith("registry: the current release is already version 1, nothing registered (")
    assert [str(v.version) for v in _versions(root)[1]] == ["1"]
    assert [e.version for e in Ledger(root / "artifacts" / "ledger").entries] == ["1"]


def test_nothing_to_register_is_one_line(project, tmp_path):
    from dprelease.core.io import read_json, write_json
    from dprelease.core.locks import root_lock
    from dprelease.pipeline.service.promotion import register_current
    from flows import serve

    root, p = project
    with root_lock(root, "make run"):  # a run holds the root
        assert register_current(p, root)["skipped"].startswith(f"{root} is in use by another dprelease run: pid ")
    manifest = read_json(root / "metrics" / "released.json")
    write_json(root / "metrics" / "released.json", manifest | {"guarantee": manifest["guarantee"] | {"epsilon": 1.0}})
    assert register_current(p, root) == {
        "skipped": "release/ is not the release metrics/released.json describes (run `make run` again)"
    }
    empty = tmp_path / "empty"
    empty.mkdir()
    assert serve.register_current(empty, "../project/params.yaml")["line"] == (
        "registry: nothing registered (no release in release/ (`make run` makes one))"
    )
    assert not (empty / "mlflow.db").exists() and not _versions(root)[1]


def test_the_declared_dpsgd_release_becomes_production_and_answers(head_run, tmp_path, monkeypatch):
    """The default declaration (DP-SGD at ε 8, kind dp_accountant) passes the gates at once: right after `make
    serve`'s registration the registry has a `production` version, whose model (loaded as `make serve-model` loads
    it) codes a narrative; the ledger holds the declared ε."""
    import mlflow
    from conftest import compare_raw

    from dprelease.core.config import parse_params
    from dprelease.core.io import read_json
    from dprelease.pipeline import registry
    from dprelease.pipeline.service.ledger import Ledger
    from dprelease.pipeline.service.promotion import register_current

    root = copy_root(head_run.root, tmp_path / "project")
    raw = compare_raw(released__mechanism="dpsgd")
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    p = parse_params(raw)
    for name in ("dpsgd_release", "publish"):
        registry.run_stage(name, p, root)
    g = read_json(root / "release" / "release.json")["guarantee"]
    assert g["kind"] == "dp_accountant" and g["epsilon"] <= p.service.gates.epsilon_budget
    monkeypatch.setenv("DPRELEASE_AGENCY_KEY", str(root / "artifacts" / "keys" / "agency.pub"))
    with mlflow_globals():
        reg = register_current(p, root)["registry"]
        assert reg["decision"] == "promoted" and reg["production"] == reg["version"] == "1", reg
        client, versions = _versions(root)
        tags = versions[0].tags
        assert tags["guarantee"] == "dp_accountant" and tags["mechanism"] == "dpsgd" and "round" not in tags
        assert float(tags["epsilon"]) == pytest.approx(g["epsilon"]) and float(tags["delta"]) == pytest.approx(
            g["delta"]
        )
        assert [e.epsilon for e in Ledger(root / "artifacts" / "ledger").entries] == [pytest.approx(g["epsilon"])]
        mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow.db'}")
        model = mlflow.pyfunc.load_model(f"models:/{NAME}@production")
        import pandas as pd

        coded = model.predict(pd.DataFrame({"narrative": ["An employee fell from a ladder and fractured his wrist."]}))
    assert len(coded) == 1 and coded["code"][0] in read_json(root / "release" / "labels.json")["codes"]
