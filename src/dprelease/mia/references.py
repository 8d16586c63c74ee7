"""Stage ``audit_references``: LiRA-offline reference models (TRUST.md L.2).

R models, each trained with the backend's fine-tune recipe (round 1's: unweighted AdamW) on a random
subset of the reference pool as large as the training split (or half the pool, if smaller); none ever
sees a target. For every target record (train = members, test = non-members) the logit-scaled
true-class confidence φ under each reference model is stored (private: per record).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..backends.base import load_features
from ..config import Params
from ..data.splits import backend_for, features
from ..io import atomic_dir, write_json
from ..layout import Layout
from ..seeds import stage_seed
from ..training import finetune
from .population import audit_dir
from .scores import logit_confidence


def targets(lay: Layout):
    """Members (train) then non-members (test): features, labels, membership."""
    train, y_train = features(lay, "train")
    test, y_test = features(lay, "test")
    feats = {k: torch.cat([train[k], test[k]]) for k in train}
    member = np.r_[np.ones(len(y_train), bool), np.zeros(len(y_test), bool)]
    return feats, torch.cat([y_train, y_test]), member


def audit_references(params: Params, root: str | Path = ".") -> dict:
    lay, a = Layout.from_params(params, root), params.privacy_audit
    backend = backend_for(params, lay)
    pool, y_pool = load_features(audit_dir(lay) / "pool" / "reference_pool.safetensors")
    feats, y, _ = targets(lay)
    n_train = int(features(lay)[1].shape[0])
    size = min(n_train, len(y_pool) // 2)
    rng = np.random.default_rng(stage_seed(params.seed, "audit-references"))
    phi = np.empty((a.references, len(y)), dtype=np.float32)
    for r in range(a.references):
        idx = torch.from_numpy(np.sort(rng.choice(len(y_pool), size=size, replace=False)))
        sub = {k: v[idx] for k, v in pool.items()}
        model = backend.new_model(sub)
        finetune(backend, model, sub, y_pool[idx], None, params.backend.finetune,
                 seed=stage_seed(params.seed, "audit-reference", r))
        phi[r] = logit_confidence(backend.predict_proba(model, feats).numpy(), y.numpy())
    with atomic_dir(audit_dir(lay) / "references", private=True) as tmp:
        np.save(tmp / "phi.npy", phi)
    summary = {"references": a.references, "reference_train_size": size, "targets": int(len(y))}
    write_json(lay.metrics / "audit_references.json", summary)
    return summary
