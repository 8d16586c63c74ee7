"""Stage ``privacy_audit``: membership inference on every arm (docs/guarantees.md, L.1–L.3).

Each arm's model is loaded from its release-format folder and verified (what an attacker gets); the
attacker also has the public encoder, the audited records and a population pool. Members = the training
split, non-members = the test split (same distribution). Attacks: loss threshold, LiRA offline and online.
Per arm and attack: AUC, TPR at FPR 1 % and 0.1 %, the ROC on a fixed log-spaced FPR grid (an aggregate),
and the L.3 ε figure, which is HEURISTIC on one trained model. Only aggregates leave ``artifacts/``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dprelease.compare.mia import bounds
from dprelease.compare.mia.population import audit_dir
from dprelease.compare.mia.references import targets
from dprelease.compare.mia.scores import lira_offline, lira_online, logit_confidence, loss_scores
from dprelease.contracts import plugins
from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.data.splits import backend_for
from dprelease.core.io import write_json
from dprelease.core.release.folder import arm_model_dir, load_release_model
from dprelease.core.seeds import stage_seed

FPR_GRID = np.logspace(-4, 0, 41)
ATTACKS = ("loss", "lira_offline", "lira_online")


def arm_folder(params: Params, arm: str) -> str:
    """Release-format folder of an arm, relative to the root: its declared ``model`` folder (the release arm's
    is the release as staged by ``draw``: the files the shared folder holds, minus the model card), else the
    comparison arms' own."""
    folder = plugins.arms()[arm].model
    return f"{params.artifacts}/{folder}" if folder is not None else arm_model_dir(params, arm)


def attack_scores(
    probs: np.ndarray,
    y: np.ndarray,
    phi_reference: np.ndarray,
    phi_online: np.ndarray | None = None,
    in_mask: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    phi = logit_confidence(probs, y)
    out = {"loss": loss_scores(probs, y), "lira_offline": lira_offline(phi, phi_reference)}
    if phi_online is not None:
        out["lira_online"] = lira_online(phi, phi_online, in_mask)
    return out


def summarise(scores: np.ndarray, member: np.ndarray, *, rng: np.random.Generator, alpha: float) -> dict:
    """AUC, TPR at FPR 1 % and 0.1 % with their counts, Clopper–Pearson interval and null band, the L.3
    figure (HEURISTIC), and the ROC on the fixed grid."""
    fpr, tpr = bounds.roc(scores, member)
    out = {"auc": bounds.auc(scores, member)}
    for target, key in ((0.01, "0.01"), (0.001, "0.001")):
        c = bounds.tpr_at_fpr_counts(scores, member, target, alpha)
        out[f"tpr_at_fpr_{key}"] = c["tpr"]
        out |= {f"{k}_{key}": c[k] for k in ("tp", "fp", "tpr_ci_low", "tpr_ci_high", "null_tpr_95")}
    return out | {
        "heuristic_epsilon": bounds.heuristic_epsilon(scores, member, rng=rng, alpha=alpha),
        "roc_tpr": np.interp(FPR_GRID, fpr, tpr).round(5).tolist(),
    }


def privacy_audit(params: Params, root: str | Path = ".") -> dict:
    lay, a = Layout.from_params(params, root), params.privacy_audit
    backend = backend_for(params, lay)
    feats, y, member = targets(lay)
    ref = audit_dir(lay) / "references"
    phi_ref, phi_on, in_mask = (np.load(ref / f) for f in ("phi.npy", "phi_online.npy", "in_mask.npy"))
    out = {"members": int(member.sum()), "non_members": int((~member).sum()), "fpr_grid": FPR_GRID.tolist(), "arms": {}}
    for arm in a.arms:
        manifest, _, model = load_release_model(Path(root) / arm_folder(params, arm), backend.device)
        probs = backend.predict_proba(model, feats).numpy()
        g = manifest["guarantee"]
        rows = {}
        for attack, s in attack_scores(probs, y.numpy(), phi_ref, phi_on, in_mask).items():
            rng = np.random.default_rng(stage_seed(params.seed, f"mia-{arm}-{attack}"))
            rows[attack] = summarise(s, member, rng=rng, alpha=a.alpha)
        out["arms"][arm] = {
            "claimed_epsilon": g["epsilon"],
            "delta": g["delta"],
            "guarantee": g["kind"],
            "attacks": rows,
        }
    write_json(lay.metrics / "privacy_audit.json", out)
    return {arm: {k: round(v["auc"], 3) for k, v in d["attacks"].items()} for arm, d in out["arms"].items()}
