"""Stage ``audit_pool``: the population pool and the canaries (docs/guarantees.md, L.1, L.4).

Pool: bundled rows the split did not sample (same recipe and seed), with a label of the label map and a narrative not
in the split (duplicates would be members in disguise); at most ``privacy_audit.pool_size``. It under-represents rare
classes (the report says so, with the coverage). Canaries: the first ``privacy_audit.canaries`` pool rows with a label
re-drawn among the OTHER classes and (head backend) ``privacy_audit.input_canaries`` random unit embeddings with random
labels, each included with probability ½; labels and coins come from the secret key. The rest of the pool trains the
LiRA references. Membership and per-record data stay in ``artifacts/`` (private); embeddings cached (``audit_cache``).

See docs/audit.md, "Notes from the code", `compare/mia/population.py`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from dprelease.compare.mia import audit_cache, workers
from dprelease.contracts.layout import Layout
from dprelease.core.backends import make_backend
from dprelease.core.backends.base import save_features
from dprelease.core.backends.encoder import encoder_reference
from dprelease.core.config import Params
from dprelease.core.data import records
from dprelease.core.data.splits import backend_for, label_info
from dprelease.core.io import atomic_dir, write_json
from dprelease.core.privacy import secret
from dprelease.core.seeds import stage_seed


def audit_dir(lay: Layout) -> Path:
    return lay.artifacts / "audit"


def _pool(params: Params, root: str | Path, codes: list[str]) -> pd.DataFrame:
    """Reports of the label space that no split holds (the stratify stage's roles: neither train, validation,
    test nor the public parts): the audit's population of non-members."""
    d = params.data
    df = records.read_records(Path(root) / d.path, d.text_column, d.label_column, d.encoding)
    lay = Layout.from_params(params, root)
    used = set()
    for split in ("train", "validation", "test", "proxy_train", "proxy_validation", "public_rest"):
        path = lay.data / f"{split}.csv"
        if path.is_file():
            used |= set(pd.read_csv(path, dtype=str, keep_default_na=False)["text"])
    rest = df[df["label"].isin(set(codes)) & ~df["text"].isin(used)]
    rng = np.random.default_rng(stage_seed(params.seed, "audit-pool"))
    take = rng.permutation(len(rest))[: params.privacy_audit.pool_size]
    return rest.iloc[take].reset_index(drop=True)


BATCHES_PER_CHUNK = 4  # embedding batches per piece of work: small pieces keep two workers evenly busy


def _start_embedding(raw: dict, n_classes: int) -> None:
    workers.STATE["backend"] = make_backend(workers.params_of(raw), n_classes)


def _embed_chunk(texts: list[str]) -> dict[str, torch.Tensor]:
    return workers.STATE["backend"].featurize(texts)


def pool_features(params: Params, lay: Layout, texts: list[str]) -> dict[str, torch.Tensor]:
    """The pool's features: from the audit cache, else embedded in the worker processes (then cached). The head
    backend only (its encoder is the cost); another backend featurises here, uncached."""
    backend = backend_for(params, lay)
    if backend.name != "head":
        return backend.featurize(texts, progress=True)
    k = audit_cache.key(
        "pool-embeddings",
        encoder=encoder_reference(backend.encoder),
        backend=backend.name,
        max_length=backend.max_length,
        batch_size=backend.batch_size,
        device=backend.device.type,
        torch=torch.__version__,
        rows=len(texts),
        texts=audit_cache.text_hash(texts),
    )
    hit = audit_cache.load("embeddings", k)
    if hit is not None and hit["x"].shape[0] == len(texts):
        return {"x": hit["x"]}
    # the encoder's batches: length-sorted (stable), batch_size each; a piece of work is whole batches of that
    # order, so the encoder re-sorts nothing and every batch (its padding included) is the one it would embed
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    step = backend.batch_size * BATCHES_PER_CHUNK
    chunks = [order[i : i + step] for i in range(0, len(order), step)]
    n = workers.count(len(chunks), backend.device)
    parts = workers.run_all(
        _embed_chunk,
        [[texts[i] for i in c] for c in chunks],
        workers=n,
        init=_start_embedding,
        initargs=(workers.ship(params, n), backend.n_classes),
    )
    x = torch.empty(len(texts), parts[0]["x"].shape[1]) if parts else torch.empty(0, 0)
    for c, part in zip(chunks, parts):
        x[c] = part["x"]
    audit_cache.save("embeddings", k, {"x": x})
    return {"x": x}


def audit_pool(params: Params, root: str | Path = ".") -> dict:
    lay, a = Layout.from_params(params, root), params.privacy_audit
    labels = label_info(lay)
    codes = labels["codes"]
    index = {c: i for i, c in enumerate(codes)}
    pool = _pool(params, root, codes)
    if len(pool) < a.canaries + 2 * max(1, len(pool) // 10):
        raise ValueError(
            f"privacy_audit: only {len(pool)} unused rows for {a.canaries} canaries and the reference "
            "pool; lower privacy_audit.canaries or raise data.cap headroom"
        )
    y = np.array([index[c] for c in pool["label"]])
    # canary labels and inclusion coins: secret (privacy/secret.py), or an attacker could replay membership
    rng = secret.numpy_rng(lay.artifacts, "audit-canaries")
    m = a.canaries
    shift = rng.integers(1, len(codes), size=m)  # a different class, uniformly
    canary_y = (y[:m] + shift) % len(codes)
    member = rng.random(m) < 0.5
    feats = pool_features(params, lay, pool["text"].tolist())
    with atomic_dir(audit_dir(lay) / "pool", private=True) as tmp:
        head = {k: v[:m] for k, v in feats.items()}
        tail = {k: v[m:] for k, v in feats.items()}
        save_features(tmp / "canaries.safetensors", head, torch.from_numpy(canary_y).long())
        save_features(tmp / "reference_pool.safetensors", tail, torch.from_numpy(y[m:]).long())
        np.save(tmp / "canary_member.npy", member)
        n_in = a.input_canaries if params.model.backend == "head" else 0
        dim = int(feats["x"].shape[1]) if n_in else 0
        x = rng.standard_normal((n_in, dim)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)
        save_features(
            tmp / "input_canaries.safetensors",
            {"x": torch.from_numpy(x)},
            torch.from_numpy(rng.integers(0, len(codes), size=n_in)).long(),
        )
        np.save(tmp / "input_member.npy", rng.random(n_in) < 0.5)
    covered = int(len(set(y[m:].tolist())))
    summary = {
        "pool_rows": int(len(pool)),
        "reference_pool_rows": int(len(pool) - m),
        "canaries": m,
        "canaries_included": int(member.sum()),
        "classes": len(codes),
        "input_canaries": a.input_canaries if params.model.backend == "head" else 0,
        "reference_pool_classes": covered,
    }
    write_json(lay.metrics / "audit_pool.json", summary)
    return summary
