"""The data stages: ``stratify`` (load, stratify, split; docs/algorithms.md, D.1–D.3) and ``featurize`` (backend
features for every split)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch

from ..backends.base import save_features
from ..config import Params
from ..io import atomic_dir, write_json
from ..layout import Layout
from ..stage import Stage
from . import records
from .splits import SPLITS, backend_for, label_info


def stratify(params: Params, root: str | Path = ".") -> dict:
    """Load, stratify (min(N_c, cap) per class), drop tiny classes, split 50/50 (docs/algorithms.md, D.1–D.3)."""
    lay, d = Layout.from_params(params, root), params.data
    df = records.read_records(Path(root) / d.path, d.text_column, d.label_column, d.encoding)
    sample = records.stratified_sample(df, cap=d.cap, min_class_size=d.min_class_size, seed=params.seed,
                                       limit_classes=d.limit_classes)
    train, test = records.split(sample, test_size=d.test_size, seed=params.seed)
    validation = None
    if d.validation_size > 0:  # held out for private selection scoring (random, not stratified)
        validation = test.sample(frac=d.validation_size, random_state=params.seed)
        test = test.drop(validation.index).reset_index(drop=True)
        validation = validation.reset_index(drop=True)
    codes = sorted(sample["label"].unique(), key=lambda c: (not c.isdigit(), int(c) if c.isdigit() else 0, c))
    titles = records.load_titles()
    train_sizes = train["label"].value_counts()
    test_sizes = test["label"].value_counts()
    labels = {"codes": codes, "titles": [titles.get(c, c) for c in codes],
              "train_sizes": [int(train_sizes.get(c, 0)) for c in codes],
              "test_sizes": [int(test_sizes.get(c, 0)) for c in codes]}
    summary = {"source_rows": len(df), "rows": len(sample), "classes": len(codes), "train_rows": len(train),
               "test_rows": len(test), "validation_rows": 0 if validation is None else len(validation),
               "train_class_gini": round(records.gini(labels["train_sizes"]), 4),
               "largest_class": max(labels["train_sizes"]), "smallest_class": min(labels["train_sizes"])}
    with atomic_dir(lay.data, private=True) as tmp:
        train[["text", "label"]].to_csv(tmp / "train.csv", index=False)
        test[["text", "label"]].to_csv(tmp / "test.csv", index=False)
        if validation is not None:
            validation[["text", "label"]].to_csv(tmp / "validation.csv", index=False)
        write_json(tmp / "labels.json", labels)
    write_json(lay.metrics / "data.json", summary)
    return summary


def featurize(params: Params, root: str | Path = ".") -> dict:
    """Backend features for every split (head: cached encoder embeddings; full: token ids)."""
    lay = Layout.from_params(params, root)
    index = {c: i for i, c in enumerate(label_info(lay)["codes"])}
    backend = backend_for(params, lay)
    with atomic_dir(lay.features, private=True) as tmp:
        for split in SPLITS:
            if not (lay.data / f"{split}.csv").is_file():
                continue
            df = pd.read_csv(lay.data / f"{split}.csv", dtype=str, keep_default_na=False)
            feats = backend.featurize(df["text"].tolist(), progress=True)
            y = torch.tensor([index[c] for c in df["label"]], dtype=torch.long)
            save_features(tmp / f"{split}.safetensors", feats, y)
    return {"backend": params.model.backend}


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    return [
        Stage(name="stratify", run=stratify, params=["seed", "data"], deps=[params.data.path], outs=[f"{a}/data"],
              metrics=["metrics/data.json"]),
        Stage(name="featurize", run=featurize, params=["seed", "model.backend", "model.device", "model.full.tiny", "features"],
              deps=[f"{a}/data"], outs=[f"{a}/features"]),
    ]
