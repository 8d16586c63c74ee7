"""MLflow runs of the representation mechanisms' experiments: NVDP's, and any plug-in's :class:`TrackedRun`
(GPP's): a parent run per experiment and a child per task / dataset, built from their aggregate outputs (tables, metrics JSON), never from per-record data.
Shares :mod:`dprelease.pipeline.tracking`'s store set-up; reads files, imports no mechanism."""

from __future__ import annotations

from pathlib import Path

from dprelease.core.config import Params

from .layout import Layout
from .mechanism import TrackedRun
from .tracking import _flatten, _is_number, _run, _setup


def log_nvdp_run(params: Params, root: str | Path = ".") -> str:
    """A parent run for the NVDP experiments (report, table, figure) and a child run per task × variant,
    with one metric step per λ. Reads the aggregates table ``reports/nvdp/table.csv`` (a file, not an import)."""
    import pandas as pd

    mlflow = _setup(params, root)
    lay = Layout.from_params(params, root)
    out = lay.reports / "nvdp"
    df = pd.read_csv(out / "table.csv")
    metrics = ["score", "bdp_epsilon", "rd_max", "rd_avg", "rd_max_filtered", "rd_avg_filtered", "bdp_nan_terms_zeroed",
               "rd_nan_pairs"]
    with _run(mlflow, root, run_name="nvdp") as parent:
        mlflow.log_params({k: v for k, v in _flatten(params.model_dump(mode="json")).items()
                           if k.startswith(("nvdp.", "seed"))})
        mlflow.set_tag("guarantees", "NVDP: no finite ε claimed; bdp_epsilon is the reference accountant's figure, "
                       "not an ε (see the sanitizer card); RD bound over test pairs")
        for (task, variant), g in df.groupby(["task", "variant"], sort=False):
            with _run(mlflow, root, run_name=f"nvdp {task} {variant}", nested=True):
                mlflow.set_tags({"task": task, "variant": variant})
                for step, row in enumerate(g.sort_values("lambda").itertuples(index=False)):
                    values = {m: float(getattr(row, m)) for m in metrics if _is_number(getattr(row, m))}
                    lam = row[2]
                    if _is_number(lam) and lam == lam:
                        values["lambda"] = float(lam)
                    mlflow.log_metrics({k: v for k, v in values.items() if v == v}, step=step)
        for path in sorted(out.glob("*")):
            mlflow.log_artifact(str(path), "nvdp")
        return parent.info.run_id


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
