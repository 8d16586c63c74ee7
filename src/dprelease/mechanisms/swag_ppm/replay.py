"""Stage ``audit_replay``: the standard adversary (the code, the params, the public seed, D∖{x} and x; not the key)
re-fits the released round on D and D∖{x} and scores the released draw (docs/guarantees.md, L.5).

See docs/audit.md, "Notes from the code", `mechanisms/swag_ppm/replay.py`."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from scipy import stats

from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.data.splits import backend_for, features
from dprelease.core.io import atomic_dir, read_json, write_json
from dprelease.core.privacy import guarantee, secret
from dprelease.core.seeds import SeedFn, public_seeds, stage_seed
from dprelease.mechanisms.swag_ppm import gaussian
from dprelease.mechanisms.swag_ppm.fit import refit, release_censor, round_weights
from dprelease.mechanisms.swag_ppm.reweighting import attempt_tag, decision_file, released_round
from dprelease.mechanisms.swag_ppm.swag import SwagMoments, sample

VIEWS = ("public", "operator")
NOT_COVERED = "the adversary holds the secret key: not covered by the guarantee (why the key stays private)"
COVERED = "the standard adversary (code, params, public seed, D∖{x}, x; no key): what the claim must hold against"

ARM = "swag_ppm_release"  # the audited model: SWAG-PPM's released draw


def claimed_number(g: guarantee.Guarantee) -> float | None:
    """The number the release quotes: its ε, or an uncertified release's index (never shown as ε)."""
    if g.epsilon is not None:
        return float(g.epsilon)
    value = g.quantities.get(guarantee.UNCERTIFIED_INDEX)
    return None if value is None else float(value)


def same_sampler(a: SwagMoments, b: SwagMoments) -> bool:
    """Whether two fitted samplers are the same one (to float rounding)."""
    return (
        a.rank == b.rank
        and math.isclose(a.scale, b.scale, rel_tol=1e-9)
        and all(
            torch.allclose(x.double().cpu(), y.double().cpu(), rtol=1e-6, atol=1e-9)
            for x, y in ((a.mean, b.mean), (a.var, b.var), (a.deviations, b.deviations))
        )
    )


def decision_bound(tp: int, fp: int, k: int, alpha: float) -> float:
    """ln(TPR_low / FPR_high) with one-sided Clopper–Pearson bounds at α/2 each (0 when not positive)."""
    tpr_low = stats.beta.ppf(alpha / 2, tp, k - tp + 1) if tp > 0 else 0.0
    fpr_high = stats.beta.ppf(1 - alpha / 2, fp + 1, k - fp) if fp < k else 1.0
    return max(0.0, math.log(tpr_low / fpr_high)) if tpr_low > 0 else 0.0


def verdict(
    *,
    llr_member: np.ndarray,
    llr_nonmember: np.ndarray,
    kl: np.ndarray,
    reproduces: bool,
    claimed: float | None,
    alpha: float,
) -> dict:
    """Scores in, one row out (module docstring): counts, the decision bound, the exact-sampler loss and KL."""
    k = len(llr_member)
    tp, fp = int((llr_member > 0).sum()), int((llr_nonmember > 0).sum())
    bound = decision_bound(tp, fp, k, alpha)
    out = {
        "targets": k,
        "members_called_member": tp,
        "non_members_called_member": fp,
        "correct": tp + (k - fp),
        "decisions": 2 * k,
        "epsilon_lower_bound": bound,
        "reproduces_release": reproduces,
        "max_privacy_loss": float(llr_member.max()) if reproduces else None,
        "max_kl": float(kl.max()) if reproduces else None,
        "median_kl": float(np.median(kl)),
    }
    over = claimed is not None and (
        bound > claimed or (reproduces and (llr_member.max() > claimed or kl.max() > claimed))
    )
    out["convicted"] = bool(over)
    return out


def _without(feats: dict, y: torch.Tensor, w: np.ndarray | None, i: int):
    keep = torch.ones(len(y), dtype=torch.bool)
    keep[i] = False
    return ({k: v[keep] for k, v in feats.items()}, y[keep], None if w is None else np.delete(w, i))


def audit_replay(params: Params, root: str | Path = ".") -> dict:
    lay, a = Layout.from_params(params, root), params.privacy_audit
    r = released_round(params, lay)
    tag = attempt_tag(read_json(decision_file(lay))["refits"] - 1) if r == 3 else ""
    claim = guarantee.Guarantee.from_dict(read_json(lay.metrics / "swag_ppm_draw.json")["guarantee"])
    claimed = claimed_number(claim)
    backend = backend_for(params, lay)
    feats, y = features(lay)
    w = round_weights(lay, r)
    censor = release_censor(params)
    released = SwagMoments.load(lay.swag(r) / "moments.safetensors")
    theta_star = load_file(str(lay.draw / "theta.safetensors"))["theta"].double().numpy()
    k = min(a.replay_targets, len(y))
    targets = np.sort(np.random.default_rng(stage_seed(params.seed, "audit-replay")).choice(len(y), k, replace=False))
    seeds: dict[str, SeedFn] = {"public": public_seeds(params.seed), "operator": secret.training_seeds(lay.artifacts)}

    def fit(view: str, f, yy, ww) -> SwagMoments:
        return refit(params, backend, f, yy, ww, r=r, seeds=seeds[view], censor=censor, tag=tag)["moments"]

    on_d = {view: fit(view, feats, y, w) for view in VIEWS}
    q_d = {view: gaussian.LowRankGaussian.from_moments(m) for view, m in on_d.items()}
    scores = {view: {"member": [], "non_member": [], "kl": []} for view in VIEWS}
    for j, i in enumerate(targets):
        f, yy, ww = _without(feats, y, w, int(i))
        q_out = {view: fit(view, f, yy, ww) for view in VIEWS}
        gen = torch.Generator().manual_seed(secret.seed(lay.artifacts, f"replay/non-member/{j}"))
        theta_out = sample(q_out["operator"], 1, gen)[0].double().numpy()  # the release had x not been in D
        for view in VIEWS:
            q = gaussian.LowRankGaussian.from_moments(q_out[view])
            scores[view]["member"].append(gaussian.log_ratio(theta_star, q_d[view], q))
            scores[view]["non_member"].append(gaussian.log_ratio(theta_out, q_d[view], q))
            scores[view]["kl"].append(gaussian.kl(q_d[view], q))
    rows = {}
    for view in VIEWS:
        s = {key: np.asarray(v) for key, v in scores[view].items()}
        rows[view] = {
            "view": view,
            "covers": COVERED if view == "public" else NOT_COVERED,
            "centre_distance": float((on_d[view].mean - released.mean.to(on_d[view].mean)).norm()),
            **verdict(
                llr_member=s["member"],
                llr_nonmember=s["non_member"],
                kl=s["kl"],
                reproduces=same_sampler(on_d[view], released),
                claimed=claimed,
                alpha=a.alpha,
            ),
        }
    per_record = [
        {
            "target": j,
            **{
                f"{view}_{key}": float(scores[view][key][j]) for view in VIEWS for key in ("member", "non_member", "kl")
            },
        }
        for j in range(k)
    ]
    with atomic_dir(lay.artifacts / "audit" / "replay", private=True) as tmp:  # the operator's figures: private
        write_json(tmp / "per_record.json", {"per_record": per_record}, private=True)
    public = [
        {
            "target": j,
            "llr_released_draw": row["public_member"],
            "llr_non_member_draw": row["public_non_member"],
            "kl": row["public_kl"],
            "says_member": row["public_member"] > 0,
        }
        for j, row in enumerate(per_record)
    ]
    out = {
        "arm": ARM,  # its rows' arm in the audit table (dprelease.compare.mia.report reads it from here)
        "round": r,
        "claimed": claimed,
        "guarantee": claim.kind,
        "alpha": a.alpha,
        "views": rows,
        "public_per_record": public,
    }
    write_json(lay.metrics / "audit_replay.json", out)
    return {"round": r, "targets": k, **{f"{v}_convicted": rows[v]["convicted"] for v in VIEWS}}
