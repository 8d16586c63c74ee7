"""MLflow runs of the experiments beside the release: the comparison, and any plug-in's :class:`TrackedRun` (the
audit's, NVDP's, GPP's, the frontier's, the tuning search's: each built where what it tracks lives): a parent run
per experiment and a child per arm / task / dataset, built from their aggregate outputs (tables, metrics JSON),
never from per-record data. Shares
:mod:`dprelease.pipeline.tracking`'s store set-up; reads files, imports no mechanism."""

from __future__ import annotations

import tempfile
from pathlib import Path

from dprelease.compare.reports.compare import arm_metrics
from dprelease.contracts import plugins
from dprelease.contracts.layout import Layout
from dprelease.contracts.mechanism import TrackedRun
from dprelease.contracts.stage import flat
from dprelease.core.config import Params
from dprelease.core.utility.evaluate import quartile_summary
from dprelease.core.utility.metrics import quartile_table
from dprelease.pipeline.tracking import _guarantee_metrics, _guarantee_tags, _run, _setup


def log_tracked(params: Params, root: str | Path, record: TrackedRun) -> str:
    """Log a plug-in's :class:`TrackedRun` (and its children, nested); returns the parent run id."""
    mlflow = _setup(params, root)

    def log(r: TrackedRun, nested: bool) -> str:
        with _run(mlflow, root, run_name=r.name, nested=nested) as run:
            if r.params:
                mlflow.log_params(r.params)
            if r.tags:
                mlflow.set_tags(r.tags)
            if r.metrics:
                mlflow.log_metrics(r.metrics)
            for step, values in enumerate(r.steps):
                mlflow.log_metrics(values, step=step)
            for child in r.children:
                log(child, True)
            for path, folder in r.artifacts:
                mlflow.log_artifact(str(path), folder)
            return run.info.run_id

    return log(record, False)


def log_compare_run(params: Params, root: str | Path = ".") -> str:
    """One parent run for the comparison, a child run per arm (ε, δ, F1, quartile F1, per-class table)."""
    mlflow = _setup(params, root)
    lay = Layout.from_params(params, root)
    out = lay.reports / "compare"
    with _run(mlflow, root, run_name="compare") as parent:
        arms = plugins.arms()
        read = [key for arm in params.compare.arms for key in arms[arm].params]  # the arms' own settings
        mlflow.log_params(flat(params, ["compare", "model.backend", "seed", *dict.fromkeys(read)]))
        said = []
        for arm in params.compare.arms:
            m, g, per_class = arm_metrics(lay, arm)
            said.append(f"{arms[arm].label}: {g.kind}")
            with _run(mlflow, root, run_name=arms[arm].label, nested=True):
                mlflow.set_tag("arm", arm)
                _guarantee_tags(mlflow, g)
                mlflow.log_metrics(
                    {
                        "weighted_f1": m["weighted_f1"],
                        "macro_f1": m["macro_f1"],
                        **quartile_summary(quartile_table(per_class)),
                        **_guarantee_metrics(g),
                    }
                )
                with tempfile.TemporaryDirectory() as tmp:  # per-class aggregates of this arm
                    per_class.to_csv(Path(tmp) / "per_class_f1.csv", index=False)
                    mlflow.log_artifact(str(Path(tmp) / "per_class_f1.csv"))
        for path in sorted(out.glob("*")):
            mlflow.log_artifact(str(path), "compare")
        mlflow.set_tag("guarantees", "; ".join(said))  # each arm's guarantee kind, from its own record
        return parent.info.run_id
