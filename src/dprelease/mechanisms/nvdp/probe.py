"""The attacker's view: a fresh probe trained on released representations of the training records to predict
an attribute the task does not need (OSHA: the industry sector, first two digits of ``Primary NAICS``), scored
by macro one-vs-rest AUC on the test records' representations. Pure numpy / scikit-learn."""

from __future__ import annotations

from collections import Counter

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

from dprelease.core.data.sectors import OTHER, UNKNOWN


def sector_labels(
    train: list[str], test: list[str], *, min_count: int = 20
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Sectors with at least ``min_count`` training records keep their own class; the rest (and unknown
    codes) become ``other``."""
    counts = Counter(s for s in train if s and s != UNKNOWN)  # "" too: the marker of older state caches
    keep = sorted(s for s, c in counts.items() if c >= min_count)
    classes = keep + [OTHER]
    index = {s: i for i, s in enumerate(classes)}
    enc = lambda xs: np.array([index.get(s, index[OTHER]) for s in xs])  # noqa: E731
    return enc(train), enc(test), classes


def probe_auc(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, *, seed: int, max_iter: int = 300
) -> dict:
    """Multinomial logistic-regression probe; macro OvR AUC over the classes present in the test split."""
    majority = np.bincount(y_train).argmax()
    base = {"classes": int(len(np.unique(y_test))), "majority_accuracy": float((y_test == majority).mean())}
    if len(np.unique(y_train)) < 2 or len(np.unique(y_test)) < 2:
        return base | {"auc": float("nan"), "accuracy": float("nan")}
    scaler = StandardScaler().fit(x_train)
    clf = LogisticRegression(max_iter=max_iter, C=1.0, random_state=seed % 2**32)
    clf.fit(scaler.transform(x_train), y_train)
    proba = clf.predict_proba(scaler.transform(x_test))
    present = [k for k in np.unique(y_test) if k in set(clf.classes_)]
    cols = [list(clf.classes_).index(k) for k in present]
    aucs = [
        roc_auc_score(y_test == k, proba[:, c]) for k, c in zip(present, cols) if 0 < (y_test == k).sum() < len(y_test)
    ]
    return base | {
        "auc": float(np.mean(aucs)),
        "accuracy": float((clf.predict(scaler.transform(x_test)) == y_test).mean()),
    }
