"""The privacy audit's MLflow record, as plain data (:class:`dprelease.contracts.mechanism.TrackedRun`; MLflow is not
imported here): a parent run with the ``privacy_audit.*`` params and a child per audited arm holding its claimed ε,
each attack's AUC / TPR at low FPR / heuristic ε figure and the canary ε lower bound; the figures and table attached.
Aggregates only."""

from __future__ import annotations

from pathlib import Path

from dprelease.contracts.layout import Layout
from dprelease.contracts.mechanism import TrackedRun
from dprelease.core.config import Params
from dprelease.core.io import read_json

NOTE = "Membership inference (loss, LiRA offline) and one-run canary audit"


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def tracked_run(params: Params, root: str | Path, timings: dict | None = None) -> TrackedRun:
    """The audit flow's record (``timings`` unused: the children are the audited arms, not the stages)."""
    lay = Layout.from_params(params, root)
    mia, canary = read_json(lay.metrics / "privacy_audit.json"), read_json(lay.metrics / "audit_canary.json")
    children = []
    for arm, d in mia["arms"].items():
        values = {f"{atk}.{k}": v for atk, r in d["attacks"].items() for k, v in r.items() if _is_number(v)}
        if d["claimed_epsilon"] is not None:
            values["claimed_epsilon"] = d["claimed_epsilon"]
        for kind, c in canary["arms"].get(arm, {}).get("audits", {}).items():
            values |= {f"canary_{kind}.{k}": c["gate"][k] for k in ("epsilon_lower_bound", "ceiling")}
        children.append(TrackedRun(name=f"audit {arm}", tags={"arm": arm, "guarantee": d["guarantee"]}, metrics=values))
    return TrackedRun(
        name="privacy-audit",
        params={f"privacy_audit.{k}": v for k, v in params.privacy_audit.model_dump().items()},
        tags={"mlflow.note.content": NOTE},
        children=children,
        artifacts=[(path, "privacy") for path in sorted((lay.reports / "privacy").glob("*"))],
    )
