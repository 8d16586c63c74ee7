"""Stage ``audit_references``: LiRA reference models (docs/guarantees.md, L.2), R offline and R online.

Each is trained like the non-private arm (the strongest attacker mimics the leakiest target). Offline: R models on
random subsets of the reference pool; none ever sees a target. Online: R models each on a random half of the targets,
so every target is IN for about half of them. Per target, the logit-scaled true-class confidence φ under each model is
stored with the online IN mask (private: per record). The coins are the attacker's: public seed. The fits run in the
audit's workers (``workers``), each seeded by its own number; the offline models are kept in ``audit_cache``.

See docs/audit.md, "Notes from the code", `compare/mia/references.py`."""

from __future__ import annotations

from functools import reduce
from pathlib import Path

import numpy as np
import torch

from dprelease.compare.mia import audit_cache, workers
from dprelease.compare.mia.population import audit_dir
from dprelease.compare.mia.scores import logit_confidence
from dprelease.contracts import plugins
from dprelease.contracts.layout import Layout
from dprelease.contracts.source import code_hash
from dprelease.core.backends.base import load_features
from dprelease.core.config import Params
from dprelease.core.data.splits import backend_for, features
from dprelease.core.io import atomic_dir, file_hash, write_json
from dprelease.core.seeds import stage_seed
from dprelease.core.training import finetune


def targets(lay: Layout):
    """Members (train) then non-members (test): features, labels, membership."""
    train, y_train = features(lay, "train")
    test, y_test = features(lay, "test")
    feats = {k: torch.cat([train[k], test[k]]) for k in train}
    member = np.r_[np.ones(len(y_train), bool), np.zeros(len(y_test), bool)]
    return feats, torch.cat([y_train, y_test]), member


REFERENCE_CODE = [
    "core/training.py",
    "core/backends",
    "compare/mia/references.py",
]  # what a reference model's weights depend on


def epochs_key() -> str:
    """The dotted params key of the reference models' epochs: the one arm declaring ``reference_epochs``."""
    keys = [arm.reference_epochs for arm in plugins.arms().values() if arm.reference_epochs]
    if len(keys) != 1:
        raise RuntimeError(f"the audit's reference models need one arm declaring reference_epochs, found {keys}")
    return keys[0]


def epochs(params: Params) -> int:
    """The reference models' epochs (the value at :func:`epochs_key`)."""
    return reduce(getattr, epochs_key().split("."), params)


def _start(raw: dict, root: str) -> None:
    """A worker's data, loaded once: the reference pool, the targets, the backend and the recipe."""
    params = workers.params_of(raw)
    lay = Layout.from_params(params, root)
    pool, y_pool = load_features(audit_dir(lay) / "pool" / "reference_pool.safetensors")
    feats, y, _ = targets(lay)
    workers.STATE.update(
        params=params,
        backend=backend_for(params, lay),
        pool=(pool, y_pool),
        targets=(feats, y),
        opt=params.backend.finetune.model_copy(update={"epochs": epochs(params)}),
    )


def _fit(task: tuple) -> np.ndarray:
    """One reference model: (``offline`` | ``online``, its number, its training rows, its cache key or None) →
    φ of every target under it. An offline model (pool rows only) comes from the audit cache when it holds it."""
    kind, r, rows, k = task
    s = workers.STATE
    params, backend = s["params"], s["backend"]
    x_all, y_all = s["pool"] if kind == "offline" else s["targets"]
    idx = torch.from_numpy(rows)
    x, labels = {n: v[idx] for n, v in x_all.items()}, y_all[idx]
    model = backend.new_model(x)
    state = audit_cache.load("references", k) if k else None
    if state is not None:
        model.load_state_dict(state)
    else:
        finetune(backend, model, x, labels, None, s["opt"], seed=stage_seed(params.seed, "audit-reference", r))
        if k:
            audit_cache.save("references", k, model.state_dict())
    feats, y = s["targets"]
    return logit_confidence(backend.predict_proba(model, feats).numpy(), y.numpy()).astype(np.float32)


def audit_references(params: Params, root: str | Path = ".") -> dict:
    lay, a = Layout.from_params(params, root), params.privacy_audit
    backend = backend_for(params, lay)
    pool_file = audit_dir(lay) / "pool" / "reference_pool.safetensors"
    pool, y_pool = load_features(pool_file)
    feats, y, _ = targets(lay)
    n_train = int(features(lay)[1].shape[0])
    size = min(n_train, len(y_pool) // 2)
    rng = np.random.default_rng(stage_seed(params.seed, "audit-references"))
    opt = params.backend.finetune.model_copy(update={"epochs": epochs(params)})
    # the offline models see pool rows only: cached under everything their weights depend on
    recipe = {
        "pool": file_hash(pool_file),
        "model": {"seed": params.seed, "model": params.model.model_dump(mode="json")},
        "opt": opt.model_dump(mode="json"),
        "classes": backend.n_classes,
        "code": code_hash(REFERENCE_CODE),
        "torch": torch.__version__,
    }
    tasks = []
    for r in range(a.references):
        rows = np.sort(rng.choice(len(y_pool), size=size, replace=False))
        cacheable = backend.name == "head" and backend.device.type == "cpu"  # small weights; CPU numerics
        k = audit_cache.key("reference", r=r, rows=audit_cache.array_hash(rows), **recipe) if cacheable else None
        tasks.append(("offline", r, rows, k))
    in_mask = np.zeros((a.references, len(y)), dtype=bool)
    for r in range(a.references):  # balanced: each target IN in exactly half of the models (pairs of halves)
        if r % 2 == 0:
            half = rng.permutation(len(y))[: len(y) // 2]
            in_mask[r, half] = True
        else:
            in_mask[r] = ~in_mask[r - 1]
        tasks.append(("online", a.references + r, np.flatnonzero(in_mask[r]), None))  # targets: never cached
    n = workers.count(len(tasks), backend.device)
    phis = workers.run_all(_fit, tasks, workers=n, init=_start, initargs=(workers.ship(params, n), str(root)))
    phi = np.stack(phis[: a.references]).astype(np.float32)
    phi_on = np.stack(phis[a.references :]).astype(np.float32)
    with atomic_dir(audit_dir(lay) / "references", private=True) as tmp:
        np.save(tmp / "phi.npy", phi)
        np.save(tmp / "phi_online.npy", phi_on)
        np.save(tmp / "in_mask.npy", in_mask)
    summary = {
        "references": a.references,
        "online_references": a.references,
        "reference_train_size": size,
        "online_train_size": len(y) // 2,
        "reference_epochs": opt.epochs,
        "targets": int(len(y)),
    }
    write_json(lay.metrics / "audit_references.json", summary)
    return summary
