"""tracking_experiments: a plug-in's TrackedRun (plain data) logged to a real MLflow store (SQLite under
tmp_path) and read back — parent and nested children, params, tags, metrics, metric steps, artifacts."""

from __future__ import annotations

import pytest
from conftest import mlflow_globals

from dprelease.contracts.mechanism import TrackedRun
from dprelease.core.config import parse_params
from dprelease.pipeline.tracking_experiments import log_tracked


@pytest.fixture(autouse=True)
def mlflow_state():
    pytest.importorskip("mlflow")
    with mlflow_globals():
        yield


def test_a_tracked_run_and_its_children_are_logged_as_nested_runs(tmp_path):
    import mlflow

    report = tmp_path / "report.md"
    report.write_text("# a report\n", encoding="utf-8")
    record = TrackedRun(
        name="toy",
        params={"toy.scale": 3},
        tags={"guarantee": "none"},
        metrics={"time_s.a": 1.5},
        steps=[{"loss": 2.0}, {"loss": 1.0}],
        artifacts=[(report, "toy")],
        children=[TrackedRun(name="toy child", metrics={"auc": 0.75})],
    )
    params = parse_params({"tracking": {"mlflow_uri": "sqlite:///mlflow.db", "experiment": "toy-experiment"}})
    parent_id = log_tracked(params, tmp_path, record)

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")  # anchored at the root, not the cwd
    parent = client.get_run(parent_id)
    assert parent.info.run_name == "toy" and parent.data.params == {"toy.scale": "3"}
    assert parent.data.tags["guarantee"] == "none" and parent.data.metrics["time_s.a"] == 1.5
    assert [m.value for m in client.get_metric_history(parent_id, "loss")] == [2.0, 1.0]  # one step each
    assert [a.path for a in client.list_artifacts(parent_id, "toy")] == ["toy/report.md"]
    exp = client.get_experiment(parent.info.experiment_id)
    children = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parent_id}'")
    assert [(c.info.run_name, c.data.metrics) for c in children] == [("toy child", {"auc": 0.75})]
    assert exp.name == "toy-experiment"
