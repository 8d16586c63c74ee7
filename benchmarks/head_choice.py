"""How the `head` backend's model and training defaults were chosen (non-private, default split).

Compares a logistic-regression probe on the cached mean-pooled MiniLM embeddings with linear and MLP
heads trained by the pipeline's own fine-tune loop. Needs `artifacts/features` (run `make run` or
`dprelease stage stratify && dprelease stage featurize` first).

    python benchmarks/head_choice.py
"""

from __future__ import annotations

import time

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression

from dprelease.core.backends.base import load_features
from dprelease.core.backends.head import HeadBackend
from dprelease.core.config import HeadParams, OptimParams, load_params
from dprelease.core.training import finetune
from dprelease.core.utility.metrics import f1_summary


def main() -> None:
    params = load_params()
    (xtr, ytr), (xte, yte) = (load_features(f"{params.artifacts}/features/{s}.safetensors") for s in ("train", "test"))
    labels = list(range(int(max(ytr.max(), yte.max())) + 1))
    rows = []
    for C in (1.0, 10.0, 100.0):
        t = time.perf_counter()
        probe = LogisticRegression(C=C, max_iter=3000).fit(xtr["x"].numpy(), ytr.numpy())
        f1 = f1_summary(yte.numpy(), probe.predict(xte["x"].numpy()), labels)
        rows.append((f"logistic-regression probe, C={C:g}", f1, time.perf_counter() - t))
    grid = [(0, 10, 1e-3), (0, 30, 3e-3), (256, 10, 1e-3), (512, 10, 1e-3), (512, 20, 1e-3), (1024, 10, 1e-3)]
    for hidden, epochs, lr in grid:
        hp = HeadParams(
            hidden=hidden, dropout=0.1, finetune=OptimParams(epochs=epochs, lr=lr, batch_size=32, weight_decay=0.01)
        )
        backend = HeadBackend(len(labels), torch.device("cpu"), params.seed, hp)
        model = backend.build_model(xtr["x"].shape[1])
        t = time.perf_counter()
        finetune(backend, model, xtr, ytr, None, hp.finetune, seed=1)
        pred = backend.predict_proba(model, xte).argmax(1).numpy()
        name = f"{'linear' if not hidden else f'MLP {hidden}'} head, AdamW lr {lr:g}, {epochs} epochs"
        rows.append((name, f1_summary(yte.numpy(), pred, labels), time.perf_counter() - t))
    print("| model | weighted F1 | macro F1 | fit s |\n|---|---|---|---|")
    for name, f1, secs in rows:
        print(f"| {name} | {f1['weighted_f1']:.3f} | {f1['macro_f1']:.3f} | {secs:.1f} |")


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    main()
