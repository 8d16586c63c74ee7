"""Data snapshots: cut an extract into growing ``EventDate`` windows (the simulated cadence of new
extracts) and name a snapshot by its content.

A snapshot is any CSV the pipeline reads (the bundled format or OSHA's original one). Its id is
``<stem>-<first 10 hex of its sha256>``: the same bytes always get the same run folder, so a retrain of
an unchanged snapshot finds every stage in the cache.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd

from ..data.records import read_csv
from ..errors import DataError
from ..io import atomic_path, file_hash

DATE_COLUMN = "EventDate"


def snapshot_id(path: str | Path, digest: str | None = None) -> str:
    """``<stem>-<sha256[:10]>`` (``digest``: the file's sha256 when already known)."""
    path = Path(path)
    return f"{path.name.split('.')[0]}-{(digest or file_hash(path))[:10]}"


def event_dates(frame: pd.DataFrame, path: Path) -> pd.Series:
    """The ``EventDate`` column as dates (ISO ``2015-01-01`` or OSHA's ``1/1/2015``); a one-line error
    when it is missing or a value does not parse."""
    if DATE_COLUMN not in frame.columns:
        raise DataError(f"{path}: no {DATE_COLUMN} column to cut windows by")
    dates = pd.to_datetime(frame[DATE_COLUMN], errors="coerce", format="mixed")
    bad = dates.isna()
    if bad.any():
        first = int(bad.to_numpy().nonzero()[0][0])
        raise DataError(f"{path}: {DATE_COLUMN} {frame[DATE_COLUMN].iloc[first]!r} in data row {first + 1} "
                        "is not a date")
    return dates


def cut_windows(source: str | Path, ends: list[str], out_dir: str | Path) -> list[Path]:
    """One gzipped CSV per window end: every row of ``source`` with ``EventDate`` ≤ end, the columns and
    their text unchanged. Files are written atomically; an existing identical window is left as it is."""
    source, out_dir = Path(source), Path(out_dir)
    frame = read_csv(source, na_filter=False)
    dates = event_dates(frame, source)
    stem = source.name.split(".")[0]
    out = []
    for end in sorted(ends):
        try:
            limit = pd.Timestamp(end)
        except ValueError:
            raise DataError(f"service.windows: {end!r} is not a date") from None
        rows = frame[dates <= limit]
        if rows.empty:
            raise DataError(f"{source}: no row has {DATE_COLUMN} on or before {end}")
        target = out_dir / f"{stem}_to_{limit:%Y-%m-%d}.csv.gz"
        with atomic_path(target) as tmp:  # no name, no time in the gzip header: same rows, same bytes
            tmp.write_bytes(gzip.compress(rows.to_csv(index=False).encode("utf-8"), mtime=0))
        out.append(target)
    return out
