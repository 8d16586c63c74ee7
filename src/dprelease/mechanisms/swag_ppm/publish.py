"""What SWAG-PPM releases through the shared publish step (:mod:`dprelease.core.release.stages`) when
``released.mechanism`` is ``swag_ppm``: the staged release of ``draw`` and its model card
(:mod:`dprelease.core.release.card`), built from the manifest and whatever public evidence exists: the utility
evaluation, the non-private comparison (``make compare``) and the privacy audit (``make audit``). The
flows re-run ``publish`` at their end, so the card always reflects what has been measured."""

from __future__ import annotations

import csv
from pathlib import Path

from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.headline import epsilon_sensitivity_near
from dprelease.core.io import read_json
from dprelease.core.release.card import audit_rows as release_audit_rows
from dprelease.mechanisms.swag_ppm.card import render
from dprelease.mechanisms.swag_ppm.record import DRAW, RELEASED_ARM, details, own_figures


def staged(params: Params) -> str:
    return f"{params.artifacts}/draw/release"


def card(params: Params, root: str | Path, manifest: dict) -> tuple[str, dict]:
    """SWAG-PPM's model card and the manifest's additions (the ε-sensitivity grid's maximum, when measured)."""
    lay = Layout.from_params(params, root)
    staging = Path(root) / staged(params)
    sens = epsilon_sensitivity_near(root, manifest["prior_precision"]) if "prior_precision" in manifest else None
    extra = {"epsilon_sensitivity": sens} if sens else {}
    manifest = manifest | extra  # the card quotes it beside the release's ε
    with open(lay.evaluation / "quartiles.csv", newline="", encoding="utf-8") as fh:
        quartiles = list(csv.DictReader(fh))
    nonprivate = lay.metrics / "nonprivate.json"
    replay = lay.metrics / "audit_replay.json"  # the replay audit (release stage audit_replay), when it ran
    rows = release_audit_rows(
        lay.reports / "privacy" / "audit.csv", "swag_ppm_reweighted" if params.ppm.reweight else "swag_ppm"
    )
    text = render(
        manifest,
        data=read_json(lay.metrics / "data.json"),
        utility=read_json(lay.metrics / "evaluation.json"),
        quartiles=quartiles,
        nonprivate=read_json(nonprivate) if nonprivate.is_file() else None,
        audit_rows=rows,
        labels=read_json(staging / "labels.json"),
        replay=read_json(replay) if replay.is_file() else None,
    )
    return text, extra


def figures(params: Params, root: str | Path, manifest: dict) -> dict:
    """The release record's figures: the released draw's test F1, the fit verdicts of the released round, SWAG-PPM's
    own headline figures and its registry tag (the round)."""
    lay = Layout.from_params(params, root)
    ev = read_json(lay.metrics / "evaluation.json")
    rnd = read_json(lay.metrics / DRAW)["round"]
    diag = lay.metrics / "diagnostics.json"
    verdicts = {k: d.get("verdict") for k, d in read_json(diag).items()} if diag.is_file() else {}
    return {
        "weighted_f1": ev["released_weighted_f1"],
        "macro_f1": ev["released_macro_f1"],
        "arm": RELEASED_ARM[rnd],
        "diagnostics": {"round": rnd, **{f"verdict {k}": v for k, v in verdicts.items() if k == f"round {rnd}"}},
        "headline": own_figures(lay.metrics),
        "tags": {"round": rnd},
        "details": details(params, root),
    }


DEPS = [
    "metrics/data.json",
    "metrics/evaluation.json",
    "metrics/swag_ppm_draw.json",
    "reports/release",
    "metrics/risk.json",
    *(f"metrics/{m}_r{r}.json" for m in ("sensitivity", "temperature") for r in (2, 3)),
    "metrics/reweight.json",
    "metrics/diagnostics.json",
]  # the card, the figures and the record's details read them


def deps(params: Params) -> list[str]:
    """What the card and the release record read: :data:`DEPS` and the released round's loss histories."""
    return DEPS + [f"{params.artifacts}/round{r}/{phase}" for r in (2, 3) for phase in ("finetune", "swag")]


EVIDENCE = ["metrics/nonprivate.json", "reports/privacy", "metrics/audit_replay.json", "reports/epsilon_sensitivity"]
