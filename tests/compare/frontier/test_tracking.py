"""The frontier in MLflow, read in a real browser: a parent run per frontier and a child run per point, whose
ε and F1 columns the runs table shows on first open (headless Chromium, as tests/pipeline/test_mlflow_app.py)."""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import make_root, mlflow_globals, slice_raw

from dprelease.compare.frontier import report, tracking
from dprelease.core.config import parse_params
from dprelease.core.utility.points import Point, write_points

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("mlflow_screenshots", ROOT / "scripts" / "mlflow_screenshots.py")
shots = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shots)


def _point(mech: str, eps: float, f1: float) -> Point:
    return Point(
        mechanism=mech,
        label=mech,
        kind="dp_accountant",
        epsilon=eps,
        delta=1e-4,
        accountant="RDP",
        weighted_f1=[f1, f1 + 0.01, f1 - 0.01],
        macro_f1=[f1 / 2] * 3,
        target_epsilon=eps,
        validation_weighted_f1=f1,
    )


@pytest.fixture(scope="module")
def browser():
    for name in shots.BROWSERS:
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("no Chromium on PATH: apt-get install -y chromium chromium-driver (make test installs it as root)")


def test_runs_table_shows_the_frontier_points_columns(browser, tmp_path):
    from dprelease.pipeline.tracking_experiments import log_tracked

    root = make_root(tmp_path)
    raw = slice_raw("head")
    raw["frontier"] = {"sources": ["dpsgd"]}
    raw["tracking"] = {"mlflow_uri": "sqlite:///mlflow.db", "experiment": "dprelease"}
    params = parse_params(raw)
    write_points(
        root,
        "dpsgd",
        [_point("dpsgd_linear_rdp", 8.0, 0.51), _point("dpsgd_linear_rdp", 2.0, 0.36)],
        grid_size=40,
        selection="best on validation",
    )
    report.frontier_report(params, root)
    record = tracking.tracked_run(params, root)
    with mlflow_globals():
        run_id = log_tracked(params, root, record)
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    parent = client.get_run(run_id)
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{run_id}'")
    assert sorted(c.data.metrics["epsilon"] for c in children) == [2.0, 8.0]  # filterable: one child per point
    exp_id = parent.info.experiment_id
    port = shots.free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile("w+") as log:
        proc = shots.start_server(f"sqlite:///{root / 'mlflow.db'}", port, log)
        try:
            shots.wait_ready(base, proc, log)
            dom = shots.rendered(browser, shots.ui_urls(base, exp_id, run_id)["runs_table.png"][0], 30000)
        finally:
            shots.stop_server(proc)
    columns = shots.visible_metric_columns(dom, within_px=2000)
    assert {"epsilon", "weighted_f1_mean", "macro_f1_mean"} <= set(columns), columns
    assert "frontier" in dom  # the parent run's row
