"""Evaluate a model on the test split: F1, per-class F1 with class sizes and the quartile table
(docs/algorithms.md, D.7.4–D.9), and the per-arm outputs every comparison arm writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from dprelease.contracts.layout import Layout
from dprelease.core.data.splits import features
from dprelease.core.io import atomic_path, write_json
from dprelease.core.privacy.guarantee import Guarantee
from dprelease.core.utility.metrics import f1_summary, per_class_f1, quartile_table


def evaluate(
    backend, model, features, labels: torch.Tensor, label_info: dict
) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """Test F1 (weighted, macro), per-class F1 with class sizes and the quartile table for ``model``."""
    return score(labels.numpy(), backend.predict_proba(model, features).argmax(1).numpy(), label_info)


def score(y_true: np.ndarray, pred: np.ndarray, label_info: dict) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """F1 summary, per-class F1 table and quartile table of predictions ``pred``."""
    classes = list(range(len(label_info["codes"])))
    per_class = per_class_f1(
        y_true, pred, classes, label_info["train_sizes"], label_info["codes"], label_info["titles"]
    )
    return f1_summary(y_true, pred, classes), per_class, quartile_table(per_class)


def quartile_summary(quartiles: pd.DataFrame) -> dict:
    """Top- and bottom-quartile weighted and macro F1 as flat keys (reports and MLflow read these)."""
    top, bottom = (quartiles.set_index("group").loc[g] for g in ("top quartile", "bottom quartile"))
    return {
        "top_quartile_weighted_f1": float(top["weighted_f1"]),
        "top_quartile_macro_f1": float(top["macro_f1"]),
        "bottom_quartile_weighted_f1": float(bottom["weighted_f1"]),
        "bottom_quartile_macro_f1": float(bottom["macro_f1"]),
    }


def write_tables(folder: Path, per_class: pd.DataFrame, quartiles: pd.DataFrame) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, frame in (("per_class_f1.csv", per_class), ("quartiles.csv", quartiles)):
        with atomic_path(folder / name) as tmp:
            frame.to_csv(tmp, index=False)


def arm_dir(lay: Layout, arm: str) -> Path:
    return lay.reports / "arms" / arm


def write_arm(lay: Layout, arm: str, backend, model, label_info: dict, g: Guarantee, extra: dict) -> dict:
    """Evaluate an arm's model on the test split; write ``reports/arms/<arm>/`` tables and
    ``metrics/<arm>.json`` (its guarantee record, F1 and quartile F1)."""
    feats, y = features(lay, "test")
    f1, per_class, quartiles = evaluate(backend, model, feats, y, label_info)
    write_tables(arm_dir(lay, arm), per_class, quartiles)
    summary = {"arm": arm, "guarantee": g.as_dict(), **extra, **f1, **quartile_summary(quartiles)}
    write_json(lay.metrics / f"{arm}.json", summary)
    return summary
