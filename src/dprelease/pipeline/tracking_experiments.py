"""MLflow runs of the experiments beside the release: the comparison, the tuning, the privacy audit, NVDP's, and
any plug-in's :class:`TrackedRun` (GPP's, the frontier's): a parent run per experiment and a child per arm / task /
dataset, built from their aggregate outputs (tables, metrics JSON), never from per-record data. Shares
:mod:`dprelease.pipeline.tracking`'s store set-up; reads files, imports no mechanism."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from dprelease.compare.reports.compare import arm_metrics
from dprelease.contracts import plugins
from dprelease.contracts.layout import Layout
from dprelease.contracts.mechanism import TrackedRun
from dprelease.core.config import Params
from dprelease.core.io import read_json
from dprelease.core.utility.evaluate import quartile_summary
from dprelease.core.utility.metrics import quartile_table

from .tracking import _flatten, _guarantee_metrics, _guarantee_tags, _is_number, _run, _setup


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


def log_compare_run(params: Params, root: str | Path = ".") -> str:
    """One parent run for the comparison, a child run per arm (ε, δ, F1, quartile F1, per-class table)."""
    mlflow = _setup(params, root)
    lay = Layout.from_params(params, root)
    out = lay.reports / "compare"
    with _run(mlflow, root, run_name="compare") as parent:
        mlflow.log_params({k: v for k, v in _flatten(params.model_dump(mode="json")).items()
                           if k.startswith(("compare.", "dpsgd.", "model.backend", "seed", "ppm."))})
        for arm in params.compare.arms:
            m, g, per_class = arm_metrics(lay, arm)
            with _run(mlflow, root, run_name=plugins.arms()[arm].label, nested=True):
                mlflow.set_tag("arm", arm)
                _guarantee_tags(mlflow, g)
                mlflow.log_metrics({"weighted_f1": m["weighted_f1"], "macro_f1": m["macro_f1"],
                                    **quartile_summary(quartile_table(per_class)), **_guarantee_metrics(g)})
                with tempfile.TemporaryDirectory() as tmp:  # per-class aggregates of this arm
                    per_class.to_csv(Path(tmp) / "per_class_f1.csv", index=False)
                    mlflow.log_artifact(str(Path(tmp) / "per_class_f1.csv"))
        for path in sorted(out.glob("*")):
            mlflow.log_artifact(str(path), "compare")
        mlflow.set_tag("guarantees", "SWAG-PPM: local ε, asymptotic δ; DP-SGD: (ε, δ) from the RDP accountant")
        return parent.info.run_id


def log_tune_run(params: Params, root: str | Path, result: dict) -> str:
    """A parent run for the tuning procedure and a child run per (c, FT epochs) run."""
    mlflow = _setup(params, root)
    out = Path(root) / "reports" / "tune"
    with _run(mlflow, root, run_name=f"tune-{result['mode']}") as parent:
        mlflow.log_params({f"tune.{k}": v for k, v in params.tune.model_dump().items()})
        mlflow.log_metrics({f"baseline_{k}": v for k, v in result["baseline"].items()})
        for i, row in enumerate(result["trail"]):
            with _run(mlflow, root, run_name=f"c={row['c']:g} FT={row['epochs']}", nested=True):
                mlflow.log_params({"c": row["c"], "ft_epochs": row["epochs"], "step": i})
                mlflow.set_tag("verdict", row["verdict"])
                if "decision" in row:
                    mlflow.set_tag("decision", row["decision"])
                mlflow.log_metrics({k: row[k] for k in ("epsilon", "weighted_f1", "macro_f1")
                                    if row.get(k) is not None and math.isfinite(row[k])})  # no ε: not logged
        if result["chosen"]:
            mlflow.log_params({"chosen_c": result["chosen"]["c"], "chosen_epochs": result["chosen"]["epochs"]})
        for path in sorted(out.glob(f"{result['mode']}*")):
            mlflow.log_artifact(str(path), "tune")
        return parent.info.run_id


def log_audit_run(params: Params, root: str | Path = ".") -> str:
    """A parent run for the privacy audit (figures, table) and a child run per arm: claimed ε, each
    attack's AUC / TPR at low FPR / heuristic ε figure, and the canary ε lower bound. Aggregates only."""
    mlflow = _setup(params, root)
    lay = Layout.from_params(params, root)
    mia, canary = read_json(lay.metrics / "privacy_audit.json"), read_json(lay.metrics / "audit_canary.json")
    with _run(mlflow, root, run_name="privacy-audit") as parent:
        mlflow.log_params({f"privacy_audit.{k}": v for k, v in params.privacy_audit.model_dump().items()})
        mlflow.set_tag("mlflow.note.content", "Membership inference (loss, LiRA offline) and one-run canary audit")
        for arm, d in mia["arms"].items():
            with _run(mlflow, root, run_name=f"audit {arm}", nested=True):
                mlflow.set_tags({"arm": arm, "guarantee": d["guarantee"]})
                values = {f"{atk}.{k}": v for atk, r in d["attacks"].items() for k, v in r.items() if _is_number(v)}
                if d["claimed_epsilon"] is not None:
                    values["claimed_epsilon"] = d["claimed_epsilon"]
                for kind, c in canary["arms"].get(arm, {}).get("audits", {}).items():
                    values |= {f"canary_{kind}.{k}": c["gate"][k] for k in ("epsilon_lower_bound", "ceiling")}
                mlflow.log_metrics(values)
        for path in sorted((lay.reports / "privacy").glob("*")):
            mlflow.log_artifact(str(path), "privacy")
        return parent.info.run_id
