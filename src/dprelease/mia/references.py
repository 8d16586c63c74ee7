"""Stage ``audit_references``: LiRA reference models (docs/guarantees.md, L.2), R offline and R online.

Every reference model is trained like the non-private arm (the backend's fine-tune recipe, unweighted
AdamW, ``compare.nonprivate_epochs`` epochs: the strongest attacker mimics the leakiest target).
*Offline*: R models on random subsets of the reference pool as large as the training split (or half the
pool, if smaller); none ever sees a target. *Online*: R models each on a random half of the targets
(train ∪ test; the attacker holds the candidate records, not their membership), so every target is IN
for about half of them. For every target the logit-scaled true-class confidence φ under each model is
stored with the online IN mask (private: per record). The coins are the attacker's: public seed.
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
    opt = params.backend.finetune.model_copy(update={"epochs": params.compare.nonprivate_epochs})

    def phi_of(x: dict, labels: torch.Tensor, r: int) -> np.ndarray:
        model = backend.new_model(x)
        finetune(backend, model, x, labels, None, opt, seed=stage_seed(params.seed, "audit-reference", r))
        return logit_confidence(backend.predict_proba(model, feats).numpy(), y.numpy())

    phi = np.empty((a.references, len(y)), dtype=np.float32)
    for r in range(a.references):
        idx = torch.from_numpy(np.sort(rng.choice(len(y_pool), size=size, replace=False)))
        phi[r] = phi_of({k: v[idx] for k, v in pool.items()}, y_pool[idx], r)
    phi_on = np.empty((a.references, len(y)), dtype=np.float32)
    in_mask = np.zeros((a.references, len(y)), dtype=bool)
    for r in range(a.references):  # balanced: each target IN in exactly half of the models (pairs of halves)
        if r % 2 == 0:
            half = rng.permutation(len(y))[: len(y) // 2]
            in_mask[r, half] = True
        else:
            in_mask[r] = ~in_mask[r - 1]
        idx = torch.from_numpy(np.flatnonzero(in_mask[r]))
        phi_on[r] = phi_of({k: v[idx] for k, v in feats.items()}, y[idx], a.references + r)
    with atomic_dir(audit_dir(lay) / "references", private=True) as tmp:
        np.save(tmp / "phi.npy", phi)
        np.save(tmp / "phi_online.npy", phi_on)
        np.save(tmp / "in_mask.npy", in_mask)
    summary = {"references": a.references, "online_references": a.references, "reference_train_size": size,
               "online_train_size": len(y) // 2, "reference_epochs": opt.epochs, "targets": int(len(y))}
    write_json(lay.metrics / "audit_references.json", summary)
    return summary
