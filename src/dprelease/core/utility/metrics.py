"""Utility numbers for a classifier: F1 summaries, per-class F1, class-size quartiles.

Arrays in, arrays/DataFrames out. ``labels`` is always the full class list of the problem
(ints 0..C-1), so a class that is never predicted (or absent from the test set) still counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import f1_score, precision_recall_fscore_support

PER_CLASS_COLUMNS = ["code", "title", "train_size", "test_support", "precision", "recall", "f1"]
QUARTILE_COLUMNS = ["group", "n_classes", "train_size_range", "test_support", "macro_f1", "weighted_f1"]


def f1(y_true, y_pred, labels, *, average: str) -> float:
    """F1 over all ``labels`` with sklearn's ``average`` (zero_division=0)."""
    return float(f1_score(y_true, y_pred, labels=list(labels), average=average, zero_division=0))


def f1_summary(y_true, y_pred, labels) -> dict[str, float]:
    """Weighted and macro F1 over all ``labels`` (zero_division=0)."""
    labels = list(labels)
    return {f"{avg}_f1": f1(y_true, y_pred, labels, average=avg) for avg in ("weighted", "macro")}


def _aligned(values: Any, labels: Sequence, name: str) -> list:
    """``values`` aligned with ``labels``: a Mapping keyed by label, or a sequence of len(labels)."""
    if isinstance(values, Mapping):
        return [values[lab] for lab in labels]
    values = list(values)
    if len(values) != len(labels):
        raise ValueError(f"{name} has {len(values)} entries, expected one per label ({len(labels)})")
    return values


def per_class_f1(y_true, y_pred, labels, train_sizes, codes, titles) -> pd.DataFrame:
    """One row per label with precision/recall/F1 on the test set and the training-set size.

    ``train_sizes``, ``codes`` and ``titles`` are aligned with ``labels`` (sequences of the same
    length, or mappings keyed by label). Rows are sorted by train_size descending, then code.
    """
    labels = list(labels)
    prec, rec, f1, support = precision_recall_fscore_support(
        y_true, y_pred, labels=labels, average=None, zero_division=0
    )
    df = pd.DataFrame(
        {
            "code": _aligned(codes, labels, "codes"),
            "title": _aligned(titles, labels, "titles"),
            "train_size": np.asarray(_aligned(train_sizes, labels, "train_sizes"), dtype=np.int64),
            "test_support": np.asarray(support, dtype=np.int64),
            "precision": np.asarray(prec, dtype=float),
            "recall": np.asarray(rec, dtype=float),
            "f1": np.asarray(f1, dtype=float),
        },
        columns=PER_CLASS_COLUMNS,
    )
    return _rank(df)


def _rank(per_class: pd.DataFrame) -> pd.DataFrame:
    """Sort by train_size descending, then code ascending (stable), fresh index."""
    return per_class.sort_values(["train_size", "code"], ascending=[False, True], kind="mergesort").reset_index(
        drop=True
    )


def _group_row(name: str, g: pd.DataFrame) -> dict[str, Any]:
    n = len(g)
    support = int(g["test_support"].sum()) if n else 0
    if n:
        rng = f"{int(g['train_size'].min())}-{int(g['train_size'].max())}"
        macro = float(g["f1"].mean())
    else:
        rng, macro = "", float("nan")
    weighted = float((g["f1"] * g["test_support"]).sum() / support) if support > 0 else float("nan")
    return {
        "group": name,
        "n_classes": n,
        "train_size_range": rng,
        "test_support": support,
        "macro_f1": macro,
        "weighted_f1": weighted,
    }


def quartile_table(per_class: pd.DataFrame) -> pd.DataFrame:
    """F1 of the largest and smallest quarter of classes (by training-set size) and of all classes.

    q = C // 4 classes per quartile, after ranking by train_size descending then code (stable).
    macro_f1 is the plain mean of per-class F1; weighted_f1 the test-support-weighted mean
    (NaN when the group has no test support). With C < 4 the quartile rows are empty (n_classes 0).
    """
    ranked = _rank(per_class)
    c = len(ranked)
    q = c // 4
    rows = [
        _group_row("top quartile", ranked.iloc[:q]),
        _group_row("bottom quartile", ranked.iloc[c - q :] if q else ranked.iloc[:0]),
        _group_row("all classes", ranked),
    ]
    return pd.DataFrame(rows, columns=QUARTILE_COLUMNS)


def mean_sd(values) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1); sd is 0.0 for a single value."""
    arr = np.asarray(values, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError("mean_sd needs at least one value")
    sd = float(np.std(arr, ddof=1)) if arr.size > 1 else 0.0
    return float(np.mean(arr)), sd
