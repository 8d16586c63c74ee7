"""GPP's MLflow record, as plain data (:class:`dprelease.contracts.mechanism.TrackedRun`; this package never imports
MLflow): a parent run with the ``gpp.*`` params and a child per dataset holding each audited row's utility and
adversary figures and the communication figures. Aggregates and public config only; the report is attached."""

from __future__ import annotations

from pathlib import Path

from dprelease.contracts.layout import Layout
from dprelease.contracts.mechanism import TrackedRun
from dprelease.contracts.stage import flat
from dprelease.core.config import Params
from dprelease.core.io import read_json

DATASETS = ("gpp_digits", "gpp_osha")
FIGURES = ("utility_auc", "utility_accuracy", "adversary_auc")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def dataset_metrics(m: dict) -> dict[str, float]:
    """One dataset's figures keyed by experiment, method, setting (and sweep value)."""
    values = {}
    for r in m.get("rows", []):
        key = f"{r['experiment']}.{r['method']}.{r['setting']}"
        if r["experiment"].startswith("sweep_"):
            swept = r["experiment"][6:]
            key += f".{swept}_{r[swept]}"
        values |= {f"{key}.{k}": r[k] for k in FIGURES if _number(r.get(k))}
    for setting, c in m.get("communication", {}).items():
        if isinstance(c, dict):
            values |= {f"comm.{setting}.{k}": v for k, v in c.items() if _number(v)}
    return values


def tracked_run(params: Params, root: str | Path = ".", timings: dict | None = None) -> TrackedRun:
    lay = Layout.from_params(params, root)
    children = [
        TrackedRun(name=name, metrics=dataset_metrics(read_json(lay.metrics / f"{name}.json")))
        for name in DATASETS
        if (lay.metrics / f"{name}.json").is_file()
    ]
    return TrackedRun(
        name="gpp",
        params=flat(params, ["gpp"]),
        tags={"guarantee": "GPP: no DP epsilon; empirical (probe AUC) + S003 mutual-information statement"},
        metrics={f"time_s.{k}": v for k, v in (timings or {}).items() if _number(v)},
        artifacts=[(path, "gpp") for path in sorted((lay.reports / "gpp").glob("*"))],
        children=children,
    )
