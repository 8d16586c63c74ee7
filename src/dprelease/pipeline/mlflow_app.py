"""``mlflow ui --app-name dprelease``: MLflow's own tracking server and UI, unchanged, with first-visit
defaults for a browser that has not opened it before.

MLflow 3.17's UI keeps two choices in the browser's local storage, and their defaults do not suit a
model-training project: it opens every experiment on the GenAI overview (traces, token usage) unless the
URL says ``workflowType=machine_learning``, and its runs table shows name, source, models and dataset —
no metric — until a person picks columns. This app adds a few lines of script to the UI's page that set,
only where the browser holds no choice yet, the model-training view and, per experiment, the headline
figures (:mod:`dprelease.core.headline`: ε, its interval, ε lower bound, F1, T̂, records) as visible columns.
Anything the person changes afterwards is theirs: a stored choice is never overwritten.
"""

from __future__ import annotations

import json

from flask import request
from mlflow.server import app as flask_app

from dprelease.core.headline import NAMES

WORKFLOW_KEY, ML_VIEW = "mlflow.workflowType_v1", "machine_learning"
# the assistant side panel, which MLflow opens by itself on a first visit to a local server (a quarter of
# the page): left closed until the person opens it
ASSISTANT_KEYS = {"mlflow.assistant.fab.autoOpenedOnFirstLoad_v1": "true", "mlflow.assistant.panelOpen_v1": "false"}
# the runs table's columns: the headline figures, ε and weighted F1 first, then the registered model
ORDER = (
    "epsilon",
    "weighted_f1",
    "macro_f1",
    "epsilon_lb",
    "epsilon_point",
    "epsilon_ci_low",
    "epsilon_ci_high",
    "uncertified_index",
    "temperature",
    "weighted_f1_mean",
    "macro_f1_mean",
    "records",
)
assert sorted(ORDER) == sorted(NAMES)
METRICS = [f"metrics.`{n}`" for n in ORDER]
COLUMNS = [*METRICS, "attributes.`Models`"]
COLUMN_ORDER = ["attributes.`Run Name`", "runDateAndNestInfo", *METRICS, "duration", "attributes.`Models`"]


def state_key(experiment_id: str) -> str:
    """Where the UI keeps its state for the runs page of one experiment (MLflow 3.17's local-storage key)."""
    return (
        f"MLflowLocalStorage-1.1-ExperimentPage-{json.dumps([experiment_id], separators=(',', ':'))}"
        "-ReactComponentState"
    )


def seed_script(experiment_ids: list[str]) -> str:
    """The ``<script>`` that fills in the defaults the browser does not hold yet."""
    defaults = {WORKFLOW_KEY: json.dumps(ML_VIEW), **ASSISTANT_KEYS}
    defaults |= {
        state_key(e): json.dumps({"selectedColumns": COLUMNS, "columnOrder": COLUMN_ORDER}) for e in experiment_ids
    }
    return (
        "<script>(function(){try{var s=window.localStorage,d="
        + json.dumps(defaults).replace("</", "<\\/")
        + ";for(var k in d){if(s.getItem(k)===null){s.setItem(k,d[k]);}}}catch(e){}})();</script>"
    )


def _experiment_ids() -> list[str]:
    from mlflow.server.handlers import _get_tracking_store

    try:
        return [e.experiment_id for e in _get_tracking_store().search_experiments(max_results=1000)]
    except Exception:  # noqa: BLE001 - no defaults is better than no UI
        return []


@flask_app.after_request
def _seed_defaults(response):
    """The UI's page (``/``) with the script in its head; every other response untouched."""
    if (
        request.path.rstrip("/") not in ("", "/index.html")
        or response.status_code != 200
        or response.mimetype != "text/html"
    ):
        return response
    response.direct_passthrough = False
    page = response.get_data(as_text=True)
    if "<head>" in page:
        response.set_data(page.replace("<head>", "<head>" + seed_script(_experiment_ids()), 1))
        response.headers.pop("ETag", None)
        response.headers["Cache-Control"] = "no-cache"
    return response


def create_app():
    """The app ``mlflow ui --app-name dprelease`` serves (a factory: MLflow's FastAPI app over its Flask app)."""
    from mlflow.server.fastapi_app import create_fastapi_app

    return create_fastapi_app(flask_app)
