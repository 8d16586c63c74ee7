"""The NVDP experiments' datasets (GLUE's "tasks", not Prefect's): GLUE MRPC, RTE, SST-2 (shipped in
``data/glue/``, scored on dev) and the OSHA narratives (Nature code; the release pipeline's stratified
split, so the same train and test records), plus the OSHA record attribute the attacker's probe targets
(industry sector = first two digits of ``Primary NAICS``)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.core.data import records
from dprelease.core.data.sectors import SECTOR_COLUMN, sectors
from dprelease.core.errors import DataError

GLUE = {
    "mrpc": ("MRPC", "#1 String", "#2 String", "Quality"),
    "rte": ("RTE", "sentence1", "sentence2", "label"),
    "sst2": ("SST-2", "sentence", None, "label"),
}
TASKS = ("mrpc", "rte", "sst2", "osha")


@dataclass
class Split:
    """One split: texts (second segment or None), integer labels, optional sensitive attribute."""

    text_a: list[str]
    text_b: list[str] | None
    labels: np.ndarray
    attribute: list[str] | None = None

    def __len__(self) -> int:
        return len(self.text_a)


def _read_tsv(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise DataError(f"{path}: GLUE file not found")
    return pd.read_csv(path, sep="\t", quoting=csv.QUOTE_NONE, dtype=str, keep_default_na=False, encoding="utf-8-sig")


def glue_task(root: Path, task: str, *, max_train: int | None, seed: int) -> tuple[Split, Split, list[str]]:
    folder, a, b, label = GLUE[task]
    out = []
    for name in ("train", "dev"):
        df = _read_tsv(Path(root) / folder / f"{name}.tsv")
        if name == "train" and max_train is not None and len(df) > max_train:
            keep = np.sort(np.random.default_rng(seed).choice(len(df), max_train, replace=False))
            df = df.iloc[keep].reset_index(drop=True)
        out.append(df)
    classes = sorted(set(out[0][label]))
    index = {c: i for i, c in enumerate(classes)}
    splits = [
        Split(df[a].tolist(), df[b].tolist() if b else None, np.array([index[v] for v in df[label]])) for df in out
    ]
    return splits[0], splits[1], classes


def is_pair(task: str) -> bool:
    """Whether a task's records are sentence pairs (MRPC, RTE)."""
    return task in GLUE and GLUE[task][2] is not None


def osha_task(params, root: str | Path, *, max_train: int | None = None) -> tuple[Split, Split, list[str]]:
    """The release pipeline's split (the stratify stage's record-local roles and public label space), read with
    the NAICS column kept alongside."""
    from dprelease.core.data.stages import all_splits, joined

    data = params.data
    path = Path(root) / data.path
    df = records.read_records(path, data.text_column, data.label_column, data.encoding)
    raw = pd.read_csv(path, dtype=str, keep_default_na=False, usecols=[data.text_column, SECTOR_COLUMN])
    if len(raw) != len(df):
        raise DataError(f"{path}: {len(raw)} rows with {SECTOR_COLUMN} vs {len(df)} records")
    df["sector"] = sectors(raw[SECTOR_COLUMN])
    _, _, design, _, splits = all_splits(params, root)
    train, test = joined(splits["train"], df), joined(splits["test"], df)
    seed = params.seed
    if max_train is not None and len(train) > max_train:
        train = train.iloc[np.sort(np.random.default_rng(seed).choice(len(train), max_train, replace=False))]
    codes = design["codes"]
    index = {c: i for i, c in enumerate(codes)}
    mk = lambda d: Split(
        d["text"].tolist(),
        None,
        np.array([index[c] for c in d["label"]]),  # noqa: E731
        d["sector"].tolist(),
    )
    return mk(train), mk(test), codes


def load(task: str, root: Path, params) -> tuple[Split, Split, list[str]]:
    n = params.nvdp
    if task == "osha":
        return osha_task(params, root, max_train=n.osha_max_train)
    if task not in GLUE:
        raise DataError(f"unknown NVDP task {task!r} (one of {', '.join(TASKS)})")
    return glue_task(
        Path(root) / n.glue_dir, task, max_train=n.sst2_max_train if task == "sst2" else None, seed=params.seed
    )
