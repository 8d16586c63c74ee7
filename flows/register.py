"""The registry step of a retrain: MLflow run + model, a registered version, the ledger, the gates.

Order matters for a crash: the version is registered (its tags hold the figures), then added to the
ledger, then tagged with the cumulative ε and the decision, and only then may ``production`` move. A
retrain of a release already registered (same manifest digest) registers nothing new.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dprelease.config import Params
from dprelease.io import file_hash, read_json
from dprelease.layout import Layout
from dprelease.service import model_registry as mr
from dprelease.service.gates import Figures, decide
from dprelease.service.ledger import Ledger, record_hashes
from dprelease.privacy.guarantee import Guarantee
from dprelease.tracking import log_pipeline_run, open_store, release_run_name


def figures_tags(lay: Layout, arm: str) -> dict:
    """The version's tags: guarantee, utility and (when the audit ran) audit figures. Aggregates only."""
    rel, audit = read_json(lay.metrics / "release.json"), read_json(lay.metrics / "audit.json")
    g = rel["guarantee"]
    tags = {"privacy.epsilon": g["epsilon"], "privacy.guarantee": g["kind"], "privacy.delta": g["delta"],
            "privacy.round": rel["round"], "privacy.temperature": g["quantities"].get("temperature"),
            "utility.weighted_f1": audit["released_weighted_f1"], "utility.macro_f1": audit["released_macro_f1"],
            "utility.weighted_f1_mean": audit["weighted_f1_mean"], "utility.macro_f1_mean": audit["macro_f1_mean"],
            "data.train_rows": read_json(lay.metrics / "data.json")["train_rows"]}
    canary, mia = lay.metrics / "audit_canary.json", lay.metrics / "privacy_audit.json"
    if canary.is_file() and arm in read_json(canary)["arms"]:
        tags["privacy.audit_epsilon_lower_bound"] = read_json(canary)["arms"][arm]["epsilon_lower_bound"]
        tags["privacy.audit_loss_auc"] = read_json(mia)["arms"][arm]["attacks"]["loss"]["auc"]
    return {k: v for k, v in tags.items() if v is not None}


def register_release(p: Params, rp: Params, top: Path, where: Path, arm: str, snapshot_file: Path,
                     timings: dict | None = None) -> dict:
    lay = Layout.from_params(rp, where)
    name, gates = p.service.registered_model, p.service.gates
    mlflow = open_store(p, top)
    client = mlflow.MlflowClient()
    digest = file_hash(lay.release / "release.json")
    known = mr.find_version(client, name, digest)
    if known is not None:  # an unchanged snapshot and params: nothing new to register
        prod = mr.production(client, name)
        return {"registry": _summary(known, prod, unchanged=True)}
    g = Guarantee.from_dict(read_json(lay.metrics / "release.json")["guarantee"])
    run_name = f"retrain {snapshot_file.name.split('.')[0]} · {release_run_name(rp, g)}"
    run_id = log_pipeline_run(rp, where, run_name=run_name, store_root=top, timings=timings)
    with mlflow.start_run(run_id=run_id):
        model_uri = mr.log_model(mlflow, lay.release)
        mlflow.set_tag("snapshot", snapshot_file.name)
    signed = read_json(lay.release / "release.json").get("signed_by") or {}
    tags = figures_tags(lay, arm) | {"release.digest": digest, "release.signer": signed.get("name", "unsigned"),
                                     "release.key_id": signed.get("key_id", "none"), "data.snapshot": snapshot_file.name,
                                     "data.snapshot_sha256": file_hash(snapshot_file), "run_id": run_id}
    version = mr.register(mlflow, name, model_uri, tags)
    train = pd.read_csv(lay.data / "train.csv", dtype=str, keep_default_na=False)
    ledger = Ledger(top / p.artifacts / "ledger")
    ledger.add(version, tags["privacy.epsilon"], record_hashes(train["text"].tolist(), train["label"].tolist(),
                                                               ledger.salt), snapshot=tags["data.snapshot_sha256"])
    cumulative = ledger.cumulative(version)
    client.set_model_version_tag(name, version, "privacy.cumulative_epsilon", str(cumulative))
    client.set_model_version_tag(name, version, "privacy.composition", "basic (per-record sum over published versions)")
    candidate = mr.figures(client.get_model_version(name, version), gates.utility_metric)
    prod = mr.production(client, name)
    decision = decide(candidate, None if prod is None else mr.figures(prod, gates.utility_metric),
                      epsilon_budget=gates.epsilon_budget, cumulative_budget=gates.cumulative_budget,
                      utility_tolerance=gates.utility_tolerance, audit=gates.audit)
    mr.record_decision(client, name, version, decision)
    if decision.promote:
        ledger.publish(version)
    return {"mlflow_run_id": run_id,
            "registry": _summary(client.get_model_version(name, version), mr.production(client, name))}


def _summary(version, prod, unchanged: bool = False) -> dict:
    t = version.tags
    promoted = t.get("gate.decision") == "promoted"
    return {"version": str(version.version), "epsilon": float(t["privacy.epsilon"]),
            "cumulative_epsilon": float(t["privacy.cumulative_epsilon"]), "utility": float(t["utility.weighted_f1"]),
            "decision": ("unchanged, already " if unchanged else "") + t.get("gate.decision", "?"),
            "promoted": promoted, "reason": t.get("gate.reason", ""),
            "production": None if prod is None else str(prod.version)}
