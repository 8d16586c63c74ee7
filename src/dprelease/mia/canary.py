"""Stage ``canary_runs``: the one-run canary audit (TRUST.md L.4; Steinke, Nasr & Jagielski 2023).

The canaries (``audit_pool``: pool records with re-drawn labels, each included w.p. ½) are added to the
training split of a sub-project in ``artifacts/audit/canary_run/``, and every audited arm's pipeline runs
there ONCE: the SWAG-PPM chain (round 1 → risk → rounds 2 and 3 → draw; its round-2 arm draws from the
same run), the non-private fine-tune and DP-SGD at the compared release's ε. Each arm's model is then
loaded from its release-format folder and scores every canary (loss of its re-drawn label); the k₊
highest are guessed "in", the k₋ lowest "out"; ε_LB (δ = 0, 95 %) follows from the right guesses.
Sanity rule: a DP-SGD arm's ε_LB above its accountant ε means a bug in the audit or the accounting, and
the stage fails loudly. Canary membership stays private; only counts and bounds are written.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch

from ..backends.base import load_features, save_features
from ..config import Params, parse_params
from ..data.splits import backend_for, features
from ..errors import OneLineError
from ..io import atomic_dir, private_dir, read_json, write_json
from ..layout import Layout
from ..privacy import secret
from ..release import load_release_model
from ..stage import run_other, stage_names
from . import onerun
from .attack import arm_folder
from .population import audit_dir
from .scores import loss_scores

SKIP = {"stratify", "featurize", "audit", "select", "publish"}  # data given directly; no utility eval, no card


class AuditError(OneLineError):
    """An audit result that contradicts a proven guarantee (a bug somewhere)."""


def _sub_params(params: Params, target_epsilon: float) -> Params:
    raw = params.model_dump(mode="json")
    overrides = {"artifacts": "artifacts", "release": "release", "force_release_path": False,
                 "dpsgd.target_epsilon": target_epsilon}
    return parse_params(raw, overrides)


def _prepare(params: Params, lay: Layout, sub: Path) -> np.ndarray:
    """The sub-project's split: training features + included canaries; test and validation as they are.
    Returns membership."""
    pool = audit_dir(lay) / "pool"
    can, y_can = load_features(pool / "canaries.safetensors")
    member = np.load(pool / "canary_member.npy")
    inc = torch.from_numpy(np.flatnonzero(member))
    train, y_train = features(lay, "train")
    test, y_test = features(lay, "test")
    shutil.rmtree(sub, ignore_errors=True)
    private_dir(sub / "artifacts")
    secret.derive_child(lay.artifacts, sub / "artifacts", "canary_run")  # its draws and DP-SGD noise: secret too
    with atomic_dir(sub / "artifacts" / "features", private=True) as tmp:
        save_features(tmp / "train.safetensors", {k: torch.cat([train[k], can[k][inc]]) for k in train},
                      torch.cat([y_train, y_can[inc]]))
        save_features(tmp / "test.safetensors", test, y_test)
        if (lay.features / "validation.safetensors").is_file():  # re-weighting's acceptance check scores on it
            save_features(tmp / "validation.safetensors", *features(lay, "validation"))
    labels = read_json(lay.data / "labels.json")
    with atomic_dir(sub / "artifacts" / "data", private=True) as tmp:
        write_json(tmp / "labels.json", labels)
    data = read_json(lay.metrics / "data.json")
    write_json(sub / "metrics" / "data.json", data | {"train_rows": data["train_rows"] + len(inc),
                                                      "rows": data["rows"] + len(inc)})
    return member


def canary_runs(params: Params, root: str | Path = ".") -> dict:
    lay, a = Layout.from_params(params, root), params.privacy_audit
    sub = audit_dir(lay) / "canary_run"
    release_eps = read_json(lay.metrics / "release.json")["guarantee"]["epsilon"]
    sp = _sub_params(params, release_eps)
    member = _prepare(params, lay, sub)
    for name in stage_names(sp, "release"):
        if name not in SKIP:
            run_other(name, sp, sub)
    for arm in ("swag_ppm", "nonprivate", "dpsgd"):
        if arm in a.arms:
            run_other(arm, sp, sub)
    can, y_can = load_features(audit_dir(lay) / "pool" / "canaries.safetensors")
    backend = backend_for(params, lay)
    out = {"canaries": int(len(member)), "included": int(member.sum()), "k_plus": a.guesses, "k_minus": a.guesses,
           "alpha": a.alpha, "arms": {}}
    for arm in a.arms:
        manifest, _, model = load_release_model(sub / arm_folder(sp, arm), backend.device)
        s = loss_scores(backend.predict_proba(model, can).numpy(), y_can.numpy())
        full = onerun.canary_audit(s, member, guess_grid=[2 * a.guesses], alpha=a.alpha)
        result = {"guesses": full["steinke"]["guesses"], "correct": full["steinke"]["correct"],
                  "epsilon_lower_bound": full["steinke"]["epsilon_lower_bound"],
                  "max_certifiable": full["steinke"]["ceiling"]}
        g = manifest["guarantee"]
        if g["kind"] == "dp_accountant" and result["epsilon_lower_bound"] > g["epsilon"] + 1e-9:
            raise AuditError(f"canary audit: {arm} ε_LB {result['epsilon_lower_bound']:.3f} exceeds its accountant "
                             f"ε {g['epsilon']:.3f}: a bug in the audit or in the accounting")
        out["arms"][arm] = {**result, "canary_run_epsilon": g["epsilon"], "guarantee": g["kind"]}
    write_json(lay.metrics / "audit_canary.json", out)
    return {arm: round(d["epsilon_lower_bound"], 3) for arm, d in out["arms"].items()}
