"""Stage ``publish``: the shared release folder = the staged release of ``draw`` + its model card
(:mod:`dprelease.release.card`), built from the manifest and whatever public evidence exists: the utility
evaluation, the non-private comparison (``make compare``) and the privacy audit (``make audit``). The
flows re-run it at their end, so the card always reflects what has been measured."""

from __future__ import annotations

import csv
from pathlib import Path

from ..release.card import audit_rows as release_audit_rows, render
from ..config import Params
from ..headline import epsilon_sensitivity_near
from ..io import read_json
from ..layout import Layout, check_release_path
from ..release.folder import publish as write_published
from ..release.folder import verify_release
from ..release.signing import agency_signer


def staged(params: Params) -> str:
    return f"{params.artifacts}/draw/release"


def publish(params: Params, root: str | Path = ".") -> dict:
    lay = Layout.from_params(params, root)
    target = check_release_path(params, root)
    staging = Path(root) / staged(params)
    manifest = verify_release(staging)
    sens = epsilon_sensitivity_near(root, manifest["prior_precision"]) if "prior_precision" in manifest else None
    extra = {"epsilon_sensitivity": sens} if sens else {}
    manifest |= extra  # the card quotes it beside the release's ε
    quartiles_csv = lay.evaluation / "quartiles.csv"
    with open(quartiles_csv, newline="", encoding="utf-8") as fh:
        quartiles = list(csv.DictReader(fh))
    nonprivate = lay.metrics / "nonprivate.json"
    replay = lay.metrics / "audit_replay.json"  # the replay audit (release stage audit_replay), when it ran
    audit_rows = release_audit_rows(lay.reports / "privacy" / "audit.csv", "swag_ppm_reweighted" if params.ppm.reweight
                             else "swag_ppm")
    card = render(manifest, data=read_json(lay.metrics / "data.json"), utility=read_json(lay.metrics / "evaluation.json"),
                  quartiles=quartiles, nonprivate=read_json(nonprivate) if nonprivate.is_file() else None,
                  audit_rows=audit_rows, labels=read_json(staging / "labels.json"),
                  replay=read_json(replay) if replay.is_file() else None)
    write_published(staging, target, card, signer=agency_signer(params, root), extra=extra)
    return {"release": str(lay.release), "audited": bool(audit_rows), "compared": nonprivate.is_file()}
