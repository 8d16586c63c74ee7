"""The OSHA setting of GPP on the release pipeline's own split and cached public-encoder features.

The stratify stage keeps only text and label; the same sample and split are re-drawn here (same
functions, params and seed) on a frame that also carries each record's industry sector and OSHA region,
and checked row by row against the pipeline's split before its cached features are used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.data import records
from dprelease.core.data.sectors import group_rare
from dprelease.core.data.splits import features, label_info
from dprelease.core.data.stages import all_splits, joined
from dprelease.core.errors import DataError
from dprelease.mechanisms.gpp.data import GPPData, load_regions, merge_regions, osha_columns


def pipeline_split(params: Params, root: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train and test frames (text, label, sector, region) exactly as the stratify stage drew them."""
    d = params.data
    raw = records.read_csv(Path(root) / d.path, d.encoding, na_filter=False)
    frame = osha_columns(
        raw,
        text_column=d.text_column,
        label_column=d.label_column,
        regions=load_regions(Path(root) / params.gpp.osha.regions),
    )
    frame["text"], frame["label"] = frame["text"].astype(str).str.strip(), frame["label"].astype(str).str.strip()
    splits = all_splits(params, root)[4]  # the stratify stage's roles (record-local, keyed), in memory
    return joined(splits["train"], frame), joined(splits["test"], frame)


def _check_same(ours: pd.DataFrame, lay: Layout, split: str) -> None:
    theirs = pd.read_csv(lay.data / f"{split}.csv", dtype=str, keep_default_na=False)
    if (
        len(theirs) != len(ours)
        or not (theirs["text"].to_numpy() == ours["text"].to_numpy()).all()
        or not (theirs["label"].to_numpy() == ours["label"].to_numpy()).all()
    ):
        raise DataError(
            f"the {split} split in {lay.data} is not the one these params draw; re-run the stratify "
            "and featurize stages"
        )


def osha_data(params: Params, root: str | Path = ".") -> GPPData:
    """U = Nature code (the pipeline's label index), S = industry sector (first two NAICS digits, rare
    sectors grouped), client = OSHA region (tiny regions merged), x = the cached MiniLM embeddings."""
    lay, g = Layout.from_params(params, root), params.gpp.osha
    if params.model.backend != "head":
        raise DataError("the GPP OSHA setting needs the head backend's cached embeddings (model.backend: head)")
    train, test = pipeline_split(params, root)
    _check_same(train, lay, "train")
    _check_same(test, lay, "test")
    (f_train, y_train), (f_test, y_test) = features(lay, "train"), features(lay, "test")
    sectors = group_rare(train["sector"], g.min_sector_rows)
    names = sorted(set(sectors))
    if len(names) < 2:
        raise DataError("fewer than two industry sectors in the training split")
    fallback = "other" if "other" in names else names[0]
    s_index = {c: i for i, c in enumerate(names)}
    s_train = sectors.map(s_index).to_numpy(np.int64)
    s_test = test["sector"].map(lambda c: s_index.get(c, s_index[fallback])).to_numpy(np.int64)
    ids, clients = merge_regions(train["region"].value_counts().to_dict(), g.min_client_rows)
    smallest = int(np.argmin(np.bincount(train["region"].map(ids), minlength=len(clients))))
    c_train = train["region"].map(ids).to_numpy(np.int64)
    c_test = test["region"].map(lambda r: ids.get(r, smallest)).to_numpy(np.int64)
    return GPPData(
        "osha",
        f_train["x"].numpy(),
        y_train.numpy(),
        s_train,
        c_train,
        f_test["x"].numpy(),
        y_test.numpy(),
        s_test,
        c_test,
        len(label_info(lay)["codes"]),
        len(names),
        clients,
    )


def sector_names(params: Params, root: str | Path = ".") -> list[str]:
    """The sensitive attribute's classes (public: NAICS sector codes)."""
    train, _ = pipeline_split(params, root)
    return sorted(set(group_rare(train["sector"], params.gpp.osha.min_sector_rows)))
