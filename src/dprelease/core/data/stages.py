"""The data stages: ``stratify`` (load, stratify, split; docs/algorithms.md, D.1–D.3) and ``featurize`` (backend
features for every split)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch

from ..backends.base import save_features
from ..config import Params
from ..io import atomic_dir, write_json
from dprelease.pipeline.layout import Layout
from dprelease.pipeline.stage import Stage
from . import records
from .splits import SPLITS, backend_for, label_info


def period_split(params: Params, root: str | Path = ".") -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(the reports the private sample is drawn from, the public proxy's reports or None): with ``proxy.until``
    the reports up to that EventDate are the public proxy and only later ones may enter the private sample."""
    d, px = params.data, params.proxy
    df = records.read_records(Path(root) / d.path, d.text_column, d.label_column, d.encoding,
                              date_column=px.date_column if px.until else None)
    if not px.until:
        return df, None
    public = df["date"] <= pd.Timestamp(px.until)
    if public.all() or not public.any():
        raise records.DataError(f"proxy.until {px.until}: every report falls on one side of it ({d.path}): no "
                                "public proxy or no private period")
    return df[~public].drop(columns="date"), df[public].drop(columns="date")


def _proxy(public: pd.DataFrame, codes: list[str], n_train: int, params: Params) -> tuple[dict, dict]:
    """The proxy's splits (train of the private training set's size at most, validation) over the private codes
    it holds, and its coverage of the private sample (aggregates)."""
    d = params.data
    pool = public[public["label"].isin(codes)]
    sample = records.stratified_sample(pool, cap=d.cap, min_class_size=2, seed=params.seed)
    train, validation = records.split(sample, test_size=params.proxy.validation_size, seed=params.seed)
    if len(train) > n_train:  # a proxy training set of the private one's size: its noise regime is the release's
        train = train.sample(n=n_train, random_state=params.seed).reset_index(drop=True)
    return {"proxy_train": train, "proxy_validation": validation}, {
        "until": params.proxy.until, "public_reports": len(public), "rows": len(sample), "train_rows": len(train),
        "validation_rows": len(validation), "classes": int(sample["label"].nunique())}


def stratify(params: Params, root: str | Path = ".") -> dict:
    """Load, stratify (min(N_c, cap) per class), drop tiny classes, split 50/50 (docs/algorithms.md, D.1–D.3); with a
    public proxy (``proxy.until``), the private sample from the later period only, and the proxy's splits."""
    lay, d = Layout.from_params(params, root), params.data
    df, public = period_split(params, root)
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
    proxy = {}
    if public is not None:
        proxy, summary["proxy"] = _proxy(public, codes, len(train), params)
        held = set(proxy["proxy_train"]["label"]) | set(proxy["proxy_validation"]["label"])
        summary["proxy"] |= {"private_classes_covered": sum(c in held for c in codes),
                             "private_rows_covered": round(float(sample["label"].isin(held).mean()), 4)}
    with atomic_dir(lay.data, private=True) as tmp:
        for name, frame in proxy.items():  # public reports: the configurations are chosen on these, at zero ε
            frame[["text", "label"]].to_csv(tmp / f"{name}.csv", index=False)
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
        Stage(name="stratify", run=stratify, params=["seed", "data", "proxy"], deps=[params.data.path], outs=[f"{a}/data"],
              metrics=["metrics/data.json"]),
        Stage(name="featurize", run=featurize, params=["seed", "model.backend", "model.device", "model.full.tiny", "features"],
              deps=[f"{a}/data"], outs=[f"{a}/features"]),
    ]
