"""The two GPP data settings (issue 12): the digits paper check and the OSHA flagship data.

*Digits* (S003 §VI-A's MNIST composite, on scikit-learn's bundled ``load_digits``, 8×8 images): two
digits side by side (8×16 = 128 pixels, scaled to [0, 1]); utility U = their sum (19 classes),
sensitive S = parity of the sum. The flag of docs/algorithms.md, G.4 applies: S is a function of U, so releasing U discloses S.
The images are split in half first; test composites are built only from test images.

*OSHA*: the release pipeline's split (same sample, same seed) with two more columns kept per record —
the establishment's industry sector S (first two digits of ``Primary NAICS``) and the federal OSHA region
of its ``State`` (the client of the distributed run). U = the Nature code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from dprelease.core.data.sectors import SECTOR_COLUMN, sectors
from dprelease.core.errors import DataError


@dataclass(frozen=True)
class GPPData:
    """Arrays of one setting. ``client_*``: the distributed run's partition (ids 0..t-1)."""

    name: str
    x_train: np.ndarray
    u_train: np.ndarray
    s_train: np.ndarray
    client_train: np.ndarray
    x_test: np.ndarray
    u_test: np.ndarray
    s_test: np.ndarray
    client_test: np.ndarray
    n_u: int
    n_s: int
    clients: list[str]

    def summary(self) -> dict:
        """Public aggregates (sizes and class counts; no records)."""
        return {
            "dataset": self.name,
            "train_rows": int(len(self.x_train)),
            "test_rows": int(len(self.x_test)),
            "d_x": int(self.x_train.shape[1]),
            "n_u": self.n_u,
            "n_s": self.n_s,
            "clients": len(self.clients),
            "client_train_rows": np.bincount(self.client_train, minlength=len(self.clients)).tolist(),
        }


def _pairs(images: np.ndarray, digits: np.ndarray, n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    a, b = rng.integers(0, len(images), n), rng.integers(0, len(images), n)
    x = np.concatenate([images[a].reshape(n, 8, 8), images[b].reshape(n, 8, 8)], axis=2).reshape(n, 128)
    total = digits[a] + digits[b]
    return x.astype(np.float32), total.astype(np.int64), (total % 2).astype(np.int64)


def digits_composites(*, n_train: int, n_test: int, clients: int, seed: int) -> GPPData:
    """Composite-digit data; clients are a seeded random partition of the training composites (and of
    the test composites, so every client sanitizes its own share of the test set)."""
    if n_train < 1 or n_test < 1 or clients < 1:
        raise DataError(f"digits composites need n_train, n_test, clients ≥ 1 (got {n_train}, {n_test}, {clients})")
    bunch = load_digits()
    images, digits = bunch.data / 16.0, bunch.target
    tr, te = train_test_split(np.arange(len(digits)), test_size=0.5, stratify=digits, random_state=seed)
    rng = np.random.default_rng(seed)
    x_tr, u_tr, s_tr = _pairs(images[tr], digits[tr], n_train, rng)
    x_te, u_te, s_te = _pairs(images[te], digits[te], n_test, rng)
    c_tr, c_te = rng.integers(0, clients, n_train), rng.integers(0, clients, n_test)
    return GPPData(
        "digits", x_tr, u_tr, s_tr, c_tr, x_te, u_te, s_te, c_te, 19, 2, [f"partition {i}" for i in range(clients)]
    )


# OSHA ------------------------------------------------------------------------------------------------


def load_regions(path: str | Path) -> dict[str, int]:
    """State (upper case, as in the SIR file) → federal OSHA region 1..10 (``data/osha_regions.csv``:
    columns ``state,region,region_office``)."""
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise DataError(f"{path}: OSHA region table not found") from None
    if not {"state", "region"} <= set(table.columns):
        raise DataError(f"{path}: needs columns 'state' and 'region'")
    return {st.strip().upper(): int(r) for st, r in zip(table["state"], table["region"])}


def merge_regions(counts: dict[int, int], min_rows: int) -> tuple[dict[int, int], list[str]]:
    """Clients from regions (``counts``: training rows per region): regions with fewer than ``min_rows``
    rows are merged into one client, and that into the smallest other region if it is still too small.
    Returns region → client id (0..t-1, in region order) and the clients' names."""
    small = sorted(r for r, c in counts.items() if c < min_rows)
    big = sorted(r for r in counts if r not in small)
    groups = {r: [r] for r in big}
    if small:
        if sum(counts[r] for r in small) < min_rows and big:
            target = min(big, key=lambda r: (counts[r], r))
            groups[target] = sorted(groups[target] + small)
        else:
            groups[small[0]] = small
    ordered = sorted(groups.values())
    ids = {r: i for i, members in enumerate(ordered) for r in members}
    names = [("region " if len(m) == 1 else "regions ") + "+".join(map(str, m)) for m in ordered]
    return ids, names


def osha_columns(frame: pd.DataFrame, *, text_column: str, label_column: str, regions: dict[str, int]) -> pd.DataFrame:
    """The SIR columns the OSHA setting needs: text and label (as ``read_records`` strips them), the
    industry sector and the OSHA region (records from a state with no region are an error)."""
    missing = [c for c in (text_column, label_column, SECTOR_COLUMN, "State") if c not in frame.columns]
    if missing:
        raise DataError(f"the GPP OSHA setting needs column(s) {', '.join(map(repr, missing))}")
    state = frame["State"].astype(str).str.strip().str.upper()
    unknown = sorted(set(state) - set(regions))
    if unknown:
        raise DataError(f"state(s) with no OSHA region: {', '.join(unknown[:5])}")
    return pd.DataFrame(
        {
            "text": frame[text_column].astype(str).str.strip(),
            "label": frame[label_column].astype(str).str.strip(),
            "sector": np.array(sectors(frame[SECTOR_COLUMN]), dtype=object),
            "region": state.map(regions).to_numpy(),
        }
    )
