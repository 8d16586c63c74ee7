"""The promotion protocol: a released run folder in, a registered (and perhaps promoted) version out, in an order that
is safe under a crash.

See docs/service.md, "Notes from the code", `pipeline/service/promotion.py`."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.errors import OneLineError
from dprelease.core.headline import NAMES, audit_bound, headline, markdown, released_record
from dprelease.core.io import file_hash, read_json
from dprelease.core.locks import Busy, root_lock
from dprelease.core.privacy.guarantee import Guarantee
from dprelease.core.release.signing import PUBLIC, key_folder
from dprelease.pipeline.service import fingerprint as fpr
from dprelease.pipeline.service import model_registry as mr
from dprelease.pipeline.service.gates import Decision, decide
from dprelease.pipeline.service.ledger import Ledger, record_hashes
from dprelease.pipeline.tracking import log_pipeline_run, open_store, release_run_name

AUDIT_TAGS = ("epsilon_lb", "audit_loss_auc")
COMPOSITION = "basic (per-record sum over published versions)"


def figures_tags(lay: Layout, arm: str) -> dict:
    """The version's tags: the headline figures (named as the run's metrics), the guarantee and, when the
    audit ran, its loss-attack AUC. Aggregates only."""
    rec = released_record(lay.metrics)  # the declared mechanism's release record (the shared publish step's)
    g = rec["guarantee"]
    tags = headline(lay.metrics) | {"guarantee": g["kind"], "delta": g.get("delta"), "mechanism": rec["mechanism"]}
    tags |= rec.get("tags") or {}  # the mechanism's own (its plug-in's figures hook: SWAG-PPM's released round)
    mia = lay.metrics / "privacy_audit.json"
    if "epsilon_lb" in tags and arm and mia.is_file() and arm in read_json(mia)["arms"]:
        tags["audit_loss_auc"] = read_json(mia)["arms"][arm]["attacks"]["loss"]["auc"]
    bound = audit_bound(lay.metrics, arm) if "epsilon_lb" in tags else None
    if bound is not None:  # which audit the gate's bound comes from (headline.audit_bound)
        tags["epsilon_lb_method"] = bound[1]
    return {k: v for k, v in tags.items() if v is not None}


def attach_audit(client, name: str, version, tags: dict) -> list[str]:
    """Audit figures of this run that ``version`` lacks: tagged on the version, logged on its run."""
    new = {k: tags[k] for k in AUDIT_TAGS if k in tags and mr.tag(version, k) is None}
    for k, v in new.items():
        client.set_model_version_tag(name, version.version, k, str(v))
    run_id = version.tags.get("run_id")
    if new and run_id:
        for k, v in new.items():
            if k in NAMES:  # a headline figure: a metric of the run under the same name
                client.log_metric(run_id, k, float(v))
    return sorted(new)


def promote(client, name: str, version: str, *, gates) -> Decision:
    """Candidate → gates → alias: read the version's figures and the current ``production`` version's
    from the registry, decide (:func:`.gates.decide` with ``gates``: ``service.gates``), tag the version
    with the decision and move ``production`` to it, or ``refused`` when a gate fails."""
    candidate = mr.figures(client.get_model_version(name, version), gates.utility_metric)
    prod = mr.production(client, name)
    decision = decide(
        candidate,
        None if prod is None else mr.figures(prod, gates.utility_metric),
        epsilon_budget=gates.epsilon_budget,
        cumulative_budget=gates.cumulative_budget,
        utility_tolerance=gates.utility_tolerance,
        audit=gates.audit,
    )
    mr.record_decision(client, name, version, decision)
    return decision


def register_release(
    p: Params,
    rp: Params,
    top: Path,
    where: Path,
    arm: str,
    snapshot_file: Path,
    *,
    timings: dict | None = None,
    fingerprint: dict | None = None,
    audited: bool = False,
    source: str = "retrain",
) -> dict:
    """Register the release of run folder ``where`` (run params ``rp``; project params ``p`` at ``top``)
    as a new version, add it to the ledger and run the gates. Returns ``{"mlflow_run_id", "registry"}``
    (``registry``: :func:`summary`); for a release already registered, ``{"registry"}`` with the audit
    figures it attached. ``fingerprint`` (:func:`.fingerprint.fingerprint`, computed before the stages ran)
    and ``audited`` (the released arm's audit ran) are tagged on the version — on a version already
    registered too (the same release: the same record holds); ``source`` names what made it (``retrain``,
    or ``release``: the project's own release folder)."""
    lay = Layout.from_params(rp, where)
    name, gates = p.service.registered_model, p.service.gates
    mlflow = open_store(p, top)
    client = mlflow.MlflowClient()
    digest = file_hash(lay.release / "release.json")
    known = mr.find_version(client, name, digest)
    record = dict(fingerprint or {}) | ({"audited": "true"} if audited else {})
    if known is not None:  # an unchanged snapshot and params: nothing new to register
        attached = attach_audit(client, name, known, figures_tags(lay, arm))
        for k, v in record.items():  # what this release was made from, for the next retrain's check
            if known.tags.get(k) != v:
                client.set_model_version_tag(name, known.version, k, v)
        return {
            "registry": summary(
                client.get_model_version(name, known.version), mr.production(client, name), unchanged=True
            )
            | {"attached": attached}
        }
    g = Guarantee.from_dict(released_record(lay.metrics)["guarantee"])
    run_name = f"{source} {snapshot_file.name.split('.')[0]} · {release_run_name(rp, g)}"
    run_id = log_pipeline_run(rp, where, run_name=run_name, store_root=top, timings=timings)
    with mlflow.start_run(run_id=run_id):
        model_uri = mr.log_model(mlflow, lay.release, key=key_folder(p, top) / PUBLIC)  # the key that signed it
        mlflow.set_tag("snapshot", snapshot_file.name)
    signed = read_json(lay.release / "release.json").get("signed_by") or {}
    tags = (
        figures_tags(lay, arm)
        | {
            "release.digest": digest,
            "release.signer": signed.get("name", "unsigned"),
            "release.key_id": signed.get("key_id", "none"),
            "snapshot": snapshot_file.name,
            "run_id": run_id,
            "source": source,
            "audited": "true" if audited else "false",
        }
        | record
    )
    version = mr.register(mlflow, name, model_uri, tags)
    train = pd.read_csv(lay.data / "train.csv", dtype=str, keep_default_na=False)
    ledger = Ledger(top / p.artifacts / "ledger")
    spent = tags.get("epsilon", math.inf)  # no ε claimed (ppm_uncertified): its records' spend is unbounded
    ledger.add(
        version,
        spent,
        record_hashes(train["text"].tolist(), train["label"].tolist(), ledger.salt),
        snapshot=tags["snapshot_id"],
    )
    cumulative = ledger.cumulative(version)
    client.set_model_version_tag(name, version, "cumulative_epsilon", str(cumulative))
    client.set_model_version_tag(name, version, "composition", COMPOSITION)
    decision = promote(client, name, version, gates=gates)
    if decision.promote:
        ledger.publish(version)
    out = summary(client.get_model_version(name, version), mr.production(client, name))
    # the version page shows a few tags but the whole description: the gate's reason and every figure
    client.update_model_version(
        name,
        version,
        description=decision.reason()[:2000]
        + "\n\n"
        + markdown(
            out["figures"],
            f"version {version}",
            {"cumulative ε (basic composition)": f"{cumulative:.4g}", "snapshot": snapshot_file.name},
        ),
    )
    return {"mlflow_run_id": run_id, "registry": out}


def summary(version, prod, *, unchanged: bool = False) -> dict:
    """What the retrain reports (and its Prefect artifact shows): the version, its headline figures, the
    cumulative ε and the gate decision."""
    t = version.tags
    promoted = t.get("gate.decision") == "promoted"
    figures = {k: float(v) for k in NAMES if (v := mr.tag(version, k)) is not None}
    return {
        "version": str(version.version),
        "epsilon": figures.get("epsilon"),
        "guarantee": t.get("guarantee"),
        "figures": figures,
        "cumulative_epsilon": float(mr.tag(version, "cumulative_epsilon")),
        "utility": figures["weighted_f1"],
        "decision": ("unchanged, already " if unchanged else "") + t.get("gate.decision", "?"),
        "promoted": promoted,
        "reason": t.get("gate.reason", ""),
        "production": None if prod is None else str(prod.version),
    }


def unchanged_since(client, name: str, fp: dict, *, audit: bool):
    """The ``production`` version, else the newest (``candidate``), whose release was made from exactly the
    snapshot, code and params of ``fp`` (:mod:`.fingerprint`) — and audited, when ``audit`` asks for the
    audit — or None: a retrain with these would register nothing new."""
    seen = set()
    for alias in (mr.PRODUCTION, mr.CANDIDATE):
        try:
            version = client.get_model_version_by_alias(name, alias)
        except Exception:  # noqa: BLE001 - no such alias (or no model) yet
            continue
        if version.version in seen:
            continue
        seen.add(version.version)
        if fpr.matches(version.tags, fp) and (not audit or version.tags.get("audited") == "true"):
            return version
    return None


def unchanged(p: Params, top: Path, fp: dict) -> dict | None:
    """:func:`unchanged_since` in the project's registry: that version's :func:`summary` (decision
    ``unchanged, already …``), or None."""
    name = p.service.registered_model
    client = open_store(p, top).MlflowClient()
    version = unchanged_since(client, name, fp, audit=p.service.audit)
    return None if version is None else summary(version, mr.production(client, name), unchanged=True)


class NotRegistered(OneLineError):
    """The project's release folder cannot be registered (none, incomplete, or not the metrics' release)."""


def current_release(p: Params, top: Path) -> tuple[Layout, str | None]:
    """The project's release folder, checked, and its released arm; :class:`NotRegistered` says why not."""
    from dprelease.core.release.check import check_release_folder

    lay = Layout.from_params(p, top)
    manifest = lay.release / "release.json"
    if not manifest.is_file():
        raise NotRegistered(f"no release in {p.release}/ (`make run` makes one)")
    check_release_folder(lay.release)  # the manifest's hashes and allow-list (a ReleaseError names the file)
    rec = released_record(lay.metrics)
    if rec is None or rec.get("guarantee") != read_json(manifest).get("guarantee"):
        raise NotRegistered(f"{p.release}/ is not the release metrics/released.json describes (run `make run` again)")
    if not (lay.data / "train.csv").is_file():
        raise NotRegistered(f"{lay.data.relative_to(top)}/train.csv is missing: the ledger needs the training records")
    return lay, rec.get("arm")


def register_current(p: Params, top: Path) -> dict:
    """Register the project's release folder (``make serve``, before the first schedule fires) as a retrain's
    is registered (:func:`register_release`: figures as tags, the ledger, the gates), once: a release
    already registered (same digest) adds no version. Returns register_release's result, or ``{"skipped":
    why}`` (nothing to register, or the root busy with a run)."""
    top = Path(top).resolve()
    try:
        with root_lock(top, "make serve: register the current release"):
            lay, arm = current_release(p, top)
            snapshot = top / p.data.path
            if not snapshot.is_file():
                raise NotRegistered(f"data.path: file not found: {p.data.path}")
            fp = fpr.fingerprint(p, top, snapshot, top / p.artifacts)
            audited = "epsilon_lb" in figures_tags(lay, arm)
            return register_release(p, p, top, top, arm, snapshot, fingerprint=fp, audited=audited, source="release")
    except (NotRegistered, Busy) as err:
        return {"skipped": str(err)}
