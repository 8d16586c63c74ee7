"""The frontier's MLflow record, as plain data (:class:`dprelease.contracts.mechanism.TrackedRun`; this package never imports
MLflow): one parent run per frontier, one child run per point — ε, δ, target, test and validation F1 as metrics,
mechanism, kind and accountant as params and tags, so the runs table filters and sorts by them — with the plot,
the table and the report as the parent's artifacts. Aggregates and public configuration only."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from dprelease.contracts.layout import Layout
from dprelease.contracts.mechanism import TrackedRun
from dprelease.core.config import Params
from dprelease.core.io import read_json

# the table's columns → the child run's metric names; the headline's names (dprelease.core.headline) where one means the
# same thing, so the MLflow UI's default columns (ε, F1 means, the audit's ε lower bound) show the frontier too
METRICS = {
    "epsilon": "epsilon",
    "target_epsilon": "target_epsilon",
    "delta": "delta",
    "weighted_f1_mean": "weighted_f1_mean",
    "weighted_f1_sd": "weighted_f1_sd",
    "macro_f1_mean": "macro_f1_mean",
    "macro_f1_sd": "macro_f1_sd",
    "validation_weighted_f1": "validation_weighted_f1",
    "audit_bound": "epsilon_lb",
    "seeds": "seeds",
    "grid_size": "grid_size",
}


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def point_run(row: dict) -> TrackedRun:
    level = row["epsilon"] if _number(row["epsilon"]) else None
    name = f"{row['mechanism']} @ ε {level:.3g}" if level is not None else row["mechanism"]
    index = json.loads(row["config"]).get("uncertified_index")  # 2Δ̂ of a point that claims no ε: never "epsilon"
    return TrackedRun(
        name=name,
        params={
            "mechanism": row["mechanism"],
            "kind": row["kind"],
            "accountant": row["accountant"],
            "config": row["config"],
        },
        tags={
            "mechanism": row["mechanism"],
            "kind": row["kind"],
            "label": row["label"],
            "tuning": str(row.get("tuning") or "not stated"),
        },
        metrics={name: float(row[k]) for k, name in METRICS.items() if _number(row.get(k))}
        | ({"uncertified_index": float(index)} if _number(index) else {}),
    )


def tracked_run(params: Params, root: str | Path = ".", timings: dict | None = None) -> TrackedRun:
    lay = Layout.from_params(params, root)
    folder = lay.reports / "frontier"
    frame = pd.read_csv(folder / "frontier.csv", keep_default_na=True)
    rows = [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
        for r in frame.to_dict("records")
    ]
    rec = read_json(folder / "recommendation.json")
    return TrackedRun(
        name="frontier",
        params={
            "frontier.epsilons": str(params.frontier.epsilons),
            "frontier.budget_epsilon": params.frontier.budget_epsilon,
            "frontier.seeds": params.frontier.seeds,
            "frontier.accountants": ",".join(params.frontier.accountants),
        },
        tags={"recommendation": rec["line"][:5000]},
        metrics={f"time_s.{k}": float(v) for k, v in (timings or {}).items() if _number(v)},
        artifacts=[(path, "frontier") for path in sorted(folder.glob("*")) if path.is_file()],
        children=[point_run(r) for r in rows],
    )
