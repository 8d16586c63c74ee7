"""``mlflow ui --app-name dprelease`` (src/dprelease/pipeline/mlflow_app.py): the script it adds to the UI's page,
and — in headless Chromium, as a first-time visitor opening the plain experiment URL — the runs table
showing ε and weighted F1 as visible columns, on the model-training view, with no assistant panel.
The browser test needs Chromium (``apt-get install -y chromium``; ``make test`` installs it when it can)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from dprelease.core import headline
from dprelease.pipeline import mlflow_app

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("mlflow_screenshots", ROOT / "scripts" / "mlflow_screenshots.py")
shots = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shots)


def test_seed_script_sets_only_defaults_the_browser_lacks():
    script = mlflow_app.seed_script(["1", "42"])
    assert script.startswith("<script>") and script.endswith("</script>") and "s.getItem(k)===null" in script
    defaults = json.loads(script[script.index("d=") + 2 : script.index(";for(")])
    assert json.loads(defaults["mlflow.workflowType_v1"]) == "machine_learning"
    assert defaults["mlflow.assistant.fab.autoOpenedOnFirstLoad_v1"] == "true"
    state = json.loads(defaults['MLflowLocalStorage-1.1-ExperimentPage-["42"]-ReactComponentState'])
    assert state["selectedColumns"][:2] == ["metrics.`epsilon`", "metrics.`weighted_f1`"]
    assert {f"metrics.`{n}`" for n in headline.NAMES} <= set(state["selectedColumns"])
    assert state["columnOrder"].index("metrics.`epsilon`") < state["columnOrder"].index("attributes.`Models`")
    assert "</script" not in script[8:-9]  # nothing in the data can close the tag early


def test_the_app_entry_point_is_installed():
    from mlflow.server import _find_app

    assert _find_app("dprelease") == "dprelease.pipeline.mlflow_app:create_app"


@pytest.fixture(scope="module")
def browser():
    for name in shots.BROWSERS:
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("no Chromium on PATH: apt-get install -y chromium chromium-driver (make test installs it as root)")


def test_runs_table_shows_epsilon_and_weighted_f1_on_first_open(browser, tmp_path):
    """A store made the way the pipeline makes it (experiment set-up of dprelease.pipeline.tracking), one run with the
    headline metrics and as many params as a release run logs; then the plain URL in a fresh profile."""

    from dprelease.core.config import parse_params
    from dprelease.pipeline import tracking

    params = parse_params({"tracking": {"mlflow_uri": "sqlite:///mlflow.db", "experiment": "dprelease"}})
    store = tracking.open_store(params, tmp_path)
    with store.start_run(run_name="SWAG-PPM · head · round 2 · ε=5.496 · c=1 · calibration=scale") as run:
        store.log_params(tracking.mechanism_params(params))
        store.log_metrics({n: 0.5 + i / 100 for i, n in enumerate(headline.NAMES)})
    exp_id = run.info.experiment_id
    uri = tracking.tracking_uri(params, tmp_path)
    port = shots.free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile("w+") as log:
        proc = shots.start_server(uri, port, log)
        try:
            shots.wait_ready(base, proc, log)
            dom = shots.rendered(browser, shots.ui_urls(base, exp_id, run.info.run_id)["runs_table.png"][0], 30000)
        finally:
            shots.stop_server(proc)
    columns = shots.visible_metric_columns(dom)
    assert columns[:2] == ["epsilon", "weighted_f1"], columns
    assert "Model training" in dom and 'col-id="attributes.`Run Name`"' in dom  # the training view's runs table
    assert "Ask questions about your experiments" not in dom  # the assistant panel is shut
