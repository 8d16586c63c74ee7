"""The data stages: ``stratify`` (the data floor: public design, record-local roles; docs/guarantees.md) and ``featurize`` (backend
features for every split)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from dprelease.contracts.layout import Layout
from dprelease.contracts.stage import Stage
from dprelease.core.backends.base import save_features
from dprelease.core.config import Params
from dprelease.core.data import records, roles
from dprelease.core.data.splits import SPLITS, backend_for, label_info
from dprelease.core.io import atomic_dir, file_hash, write_json
from dprelease.core.privacy import secret
from dprelease.core.privacy.stages import key_id_file


def period_split(params: Params, root: str | Path = ".") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the private period's reports, the public period's reports): reports up to ``proxy.until`` were published
    before the private period and are public inputs (the label space, the rates, the proxy); the rest is private.
    Both frames keep their ``date`` column (a report's content id includes it)."""
    d, px = params.data, params.proxy
    df = records.read_records(
        Path(root) / d.path, d.text_column, d.label_column, d.encoding, date_column=px.date_column
    )
    public = df["date"] <= pd.Timestamp(px.until)
    if public.all() or not public.any():
        raise records.DataError(
            f"proxy.until {px.until}: every report falls on one side of it ({d.path}): no "
            f"public period or no private period; set proxy.until between its first and last "
            f"{px.date_column} ({df['date'].min():%Y-%m-%d} to {df['date'].max():%Y-%m-%d})"
        )
    return df[~public].reset_index(drop=True), df[public].reset_index(drop=True)


def public_design(params: Params, public: pd.DataFrame) -> dict:
    """Everything the data floor decides from the PUBLIC period alone (fixed before a private report is read):
    the label space, the per-code inclusion rates, the role shares and the expected role sizes."""
    d = params.data
    try:
        codes = roles.label_space(
            public, min_class_size=d.min_class_size, limit_classes=d.limit_classes, declared=d.codes
        )
    except ValueError as e:
        raise records.DataError(f"{d.path}: {e}") from None
    if len(codes) < 2:
        raise records.DataError(
            f"{d.path}: the public period (up to {params.proxy.until}) has {len(codes)} code(s) "
            f"with >= {d.min_class_size} reports; the label space needs at least 2"
        )
    rates = roles.inclusion_rates(public, codes, cap=d.cap)
    shares = roles.fractions(test_size=d.test_size, validation_size=d.validation_size)
    return {"codes": codes, "rates": rates, "shares": shares, "expected": roles.expected_sizes(public, rates, shares)}


def proxy_splits(public: pd.DataFrame, design: dict, params: Params) -> dict[str, pd.DataFrame]:
    """The public proxy's splits, record-local by a hash of each public report and the public seed: of the reports
    included at the private roles' rates, the training share is ``proxy_train`` (a pseudo-private set of about the
    private training size), ``proxy.validation_size`` is ``proxy_validation``; every other public report of the
    label space is ``public_rest`` (with the proxy's parts, what the public model trains on)."""
    ids = roles.report_ids(public)
    u = roles.public_uniforms(ids, seed=params.seed, purpose="proxy")
    train, val = design["shares"][0], params.proxy.validation_size
    if train + val >= 1.0:
        raise records.DataError(f"proxy.validation_size {val} + the training share {train:g} must stay below 1")
    role = roles.assign(u, public["label"].tolist(), rates=design["rates"], shares=(train, val, 1.0 - train - val))
    inside = public["label"].isin(design["codes"]).to_numpy()
    if params.proxy.rest_rate < 1.0:
        kept = roles.public_uniforms(ids, seed=params.seed, purpose="rest")
        inside = inside & (kept < params.proxy.rest_rate)
    masks = {
        "proxy_train": role == "train",
        "proxy_validation": role == "validation",
        "public_rest": inside & ((role == "test") | (role == "unused")),
    }
    return {name: _ordered(public[m], ids[m]) for name, m in masks.items()}


def _ordered(frame: pd.DataFrame, ids: np.ndarray) -> pd.DataFrame:
    """A split in content-id order: a function of the set of reports, never of their positions in the file."""
    return frame.assign(_id=ids).sort_values("_id", kind="stable").drop(columns="_id").reset_index(drop=True)


def all_splits(params: Params, root: str | Path = "."):
    """(private reports, public reports, the public design, each private report's role, the splits by name): what
    the stratify stage writes, in memory (mechanisms that need extra columns of the same reports join on text)."""
    lay = Layout.from_params(params, root)
    private, public = period_split(params, root)
    design = public_design(params, public)
    ids = roles.report_ids(private)
    role = roles.assign(
        secret.record_uniforms(lay.artifacts, ids),
        private["label"].tolist(),
        rates=design["rates"],
        shares=design["shares"],
    )
    splits = {name: _ordered(private[role == name], ids[role == name]) for name in ("train", "validation", "test")}
    if params.data.validation_size == 0:
        splits.pop("validation")
    splits |= proxy_splits(public, design, params)  # already in content-id order
    return private, public, design, role, splits


def joined(split: pd.DataFrame, extra: pd.DataFrame) -> pd.DataFrame:
    """``split`` (text, label) with the other columns of ``extra`` (a frame of the same reports), matched on
    (text, label); a repeated report takes its first row's columns. Order and length of ``split`` kept."""
    extra = extra.drop_duplicates(["text", "label"])
    out = split[["text", "label"]].merge(extra, on=["text", "label"], how="left", validate="many_to_one")
    return out.reset_index(drop=True)


def stratify(params: Params, root: str | Path = ".") -> dict:
    """The data floor (docs/guarantees.md, "The boundary"): the public design from the public period, then each
    private report's role from its own keyed hash (record-local: one report added or removed changes only its own
    role), the public proxy's splits, the public label map and the per-release noise context."""
    lay, d = Layout.from_params(params, root), params.data
    private, public, design, role, splits = all_splits(params, root)
    codes = design["codes"]
    titles = records.load_titles()
    labels = {"codes": codes, "titles": [titles.get(c, c) for c in codes]}  # public: the same for every extract
    sizes = {
        f"{name}_sizes": [int(n) for n in splits[name]["label"].value_counts().reindex(codes, fill_value=0)]
        for name in splits
    }
    train_sizes = sizes["train_sizes"]
    summary = {
        "public": {
            "until": params.proxy.until,
            "public_reports": len(public),
            "classes": len(codes),
            "expected_train_size": design["expected"]["train"],
            "expected_test_size": design["expected"]["test"],
            "expected_validation_size": design["expected"]["validation"],
            "proxy_train_rows": len(splits["proxy_train"]),
            "proxy_validation_rows": len(splits["proxy_validation"]),
            "public_rest_rows": len(splits["public_rest"]),
            "capped_codes": sum(r < 1.0 for r in design["rates"].values()),
        },
        "internal": "the figures below count private reports: the operator's aggregates, never released",
        "source_rows": len(private),
        "rows": int((role != "unused").sum()),
        "classes": len(codes),
        "train_rows": len(splits["train"]),
        "test_rows": len(splits["test"]),
        "validation_rows": len(splits.get("validation", ())),
        "outside_label_space": int((~private["label"].isin(codes)).sum()),
        "train_class_gini": round(records.gini(train_sizes), 4),
        "largest_class": max(train_sizes),
        "smallest_class": min(train_sizes),
    }
    if len(splits["train"]) < 2 or len(splits["test"]) < 1:
        raise records.DataError(
            f"{d.path}: the private period gives {len(splits['train'])} training and "
            f"{len(splits['test'])} test reports; too few to train and evaluate"
        )
    context = secret.release_context(
        snapshot_digest=file_hash(Path(root) / d.path), release_id=params.released.release_id
    )
    with atomic_dir(lay.data, private=True) as tmp:
        for name, frame in splits.items():
            frame[["text", "label"]].to_csv(tmp / f"{name}.csv", index=False)
        write_json(tmp / "labels.json", labels)
        counts = public["label"].value_counts()
        write_json(
            tmp / "public.json",
            summary["public"]
            | {  # public inputs only
                "rates": design["rates"],
                "public_counts": {c: int(counts.get(c, 0)) for c in codes},
            },
        )
        write_json(tmp / "sizes.json", sizes)  # private counts: internal evaluation tables only
        (tmp / secret.CONTEXT).write_text(context + "\n", encoding="ascii")
    write_json(lay.metrics / "data.json", summary)
    return summary["public"]  # public figures only: a stage's return value reaches Prefect's store


PUBLIC_SPLITS = ("proxy_train", "proxy_validation", "public_rest")


def featurize(params: Params, root: str | Path = ".") -> dict:
    """Backend features for every split (head: cached encoder embeddings; full: token ids). With the public encoder,
    the public splits' embeddings come from its shipped table of the public period where it holds the narrative
    (fp16: every public split at that precision), so only the private reports are embedded here."""
    lay = Layout.from_params(params, root)
    tuned, shipped = params.model.backend == "head" and params.features.encoder == "public_tuned", 0
    if tuned:
        from dprelease.core.encoder_recipe import check_period

        try:
            check_period(params.proxy.until)
        except (ValueError, FileNotFoundError) as e:
            raise records.DataError(str(e)) from None
    index = {c: i for i, c in enumerate(label_info(lay)["codes"])}
    backend = backend_for(params, lay)
    with atomic_dir(lay.features, private=True) as tmp:
        for split in SPLITS:
            if not (lay.data / f"{split}.csv").is_file():
                continue
            df = pd.read_csv(lay.data / f"{split}.csv", dtype=str, keep_default_na=False)
            if tuned and split in PUBLIC_SPLITS:  # public narratives: the shipped table where it holds them
                from dprelease.core.backends.public_encoder import public_features

                x, hits = public_features(
                    df["text"].tolist(),
                    lambda t: backend.featurize(t, progress=True)["x"],
                    max_length=params.features.max_length,
                )
                feats, shipped = {"x": x}, shipped + hits
            else:
                feats = backend.featurize(df["text"].tolist(), progress=True)
            y = torch.tensor([index[c] for c in df["label"]], dtype=torch.long)
            save_features(tmp / f"{split}.safetensors", feats, y)
    return {"backend": params.model.backend, "public_embeddings_shipped": shipped}


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    return [
        Stage(
            name="stratify",
            run=stratify,
            params=["seed", "data", "proxy", "released.release_id"],
            deps=[params.data.path, key_id_file(params)],
            outs=[f"{a}/data"],
            metrics=["metrics/data.json"],
        ),
        Stage(
            name="featurize",
            run=featurize,
            params=["seed", "model.backend", "model.device", "model.full.tiny", "features", "proxy.until"],
            deps=[f"{a}/data"],
            outs=[f"{a}/features"],
        ),
    ]
