"""MLflow runs of the representation mechanisms' experiments (NVDP, GPP): a parent run per experiment and a
child per task / dataset, built from their aggregate outputs (tables, metrics JSON), never from per-record data.
Shares :mod:`dprelease.tracking`'s store set-up; reads files, imports no mechanism."""

from __future__ import annotations

from pathlib import Path

from .config import Params
from .io import read_json
from .layout import Layout
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


def log_gpp_run(params: Params, root: str | Path = ".", timings: dict | None = None) -> str:
    """A parent run for the GPP experiments (issue 12) and a child run per dataset: each audited row's
    utility / adversary figures (keyed by method, setting and sweep value) and the communication figures.
    Aggregates and public config only; the report folder is attached."""
    mlflow = _setup(params, root)
    lay = Layout.from_params(params, root)
    with _run(mlflow, root, run_name="gpp") as parent:
        mlflow.log_params({k: v for k, v in _flatten(params.model_dump(mode="json")).items() if k.startswith("gpp.")})
        mlflow.set_tag("guarantee", "GPP: no DP epsilon; empirical (probe AUC) + S003 mutual-information statement")
        if timings:
            mlflow.log_metrics({f"time_s.{k}": v for k, v in timings.items() if _is_number(v)})
        for name in ("gpp_digits", "gpp_osha"):
            path = lay.metrics / f"{name}.json"
            if not path.is_file():
                continue
            m = read_json(path)
            with _run(mlflow, root, run_name=name, nested=True):
                values = {}
                for r in m.get("rows", []):
                    key = f"{r['experiment']}.{r['method']}.{r['setting']}"
                    if r["experiment"].startswith("sweep_"):
                        key += f".{r['experiment'][6:]}={r[r['experiment'][6:]]}"
                    values |= {f"{key}.{k}": r[k] for k in ("utility_auc", "utility_accuracy", "adversary_auc")
                               if _is_number(r.get(k))}
                for setting, c in m.get("communication", {}).items():
                    if isinstance(c, dict):
                        values |= {f"comm.{setting}.{k}": v for k, v in c.items() if _is_number(v)}
                mlflow.log_metrics({k.replace("=", "_"): v for k, v in values.items()})
        for path in sorted((lay.reports / "gpp").glob("*")):
            mlflow.log_artifact(str(path), "gpp")
        return parent.info.run_id
