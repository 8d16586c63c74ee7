"""Loading, sampling and splitting the OSHA Severe Injury Reports (narrative -> OIICS Nature).

``read_records`` accepts the bundled 18-column CSV (``data/osha_sir_2015_2016.csv.gz``) and the
original OSHA release format (26 or 28 columns, quoted fields, narratives with embedded
newlines).  Encoding: UTF-8 (a BOM is accepted), then cp1252 (older OSHA releases); bytes that are neither
(e.g. cp1252's undefined 0x81, 0x8D, 0x8F, 0x90, 0x9D) are an error naming the byte offset.
Every problem with the input is a one-line :class:`DataError`.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.core.errors import DataError

__all__ = ["DataError", "read_text", "read_csv", "read_records", "stratified_sample", "split", "gini", "load_titles"]

_SHOW = 5  # how many row numbers / column names a message lists


def _listing(items: Iterable[object], limit: int = _SHOW) -> str:
    items = [str(i) for i in items]
    shown = ", ".join(repr(i) if isinstance(i, str) else i for i in items[:limit])
    return shown + (f", ... ({len(items)} in all)" if len(items) > limit else "")


def _rows(mask: pd.Series) -> str:
    """Count and first 1-based data-row numbers (header excluded) where ``mask`` is true."""
    pos = np.flatnonzero(mask.to_numpy()) + 1
    more = ", ..." if len(pos) > _SHOW else ""
    return f"{len(pos)} row(s), data rows {', '.join(map(str, pos[:_SHOW]))}{more}"


_UTF8_MULTIBYTE = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")
ENCODINGS = ("auto", "utf-8", "cp1252")


def read_text(path: str | Path, encoding: str = "auto") -> str:
    """A CSV file's text (``.gz`` transparently). ``encoding``: ``utf-8`` (strict), ``cp1252`` (strict), or
    ``auto``: strict UTF-8, except that a file holding no UTF-8 multi-byte sequence at all is read as
    cp1252 (the OSHA release's own encoding). A UTF-8 file with a stray invalid byte is an error naming
    the byte, its offset and line — never silently re-decoded ("café" must not become "cafÃ©")."""
    path = Path(path)
    if encoding not in ENCODINGS:
        raise DataError(f"unknown encoding {encoding!r} (one of {', '.join(ENCODINGS)})")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, not a CSV file") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read file ({e.strerror or e})") from None
    where = ""
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise DataError(f"{path}: corrupt gzip file ({e})") from None
        where = " of the decompressed text"
    elif path.name.endswith(".gz"):
        raise DataError(f"{path}: named .gz but is not a gzip file")
    if not raw.strip():
        raise DataError(f"{path}: file is empty")
    if b"\x00" in raw[:65536]:
        raise DataError(f"{path}: not a text CSV file (contains NUL bytes; binary data?)")
    if encoding == "auto":
        try:
            return raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            if _UTF8_MULTIBYTE.search(raw):
                raise DataError(
                    f"{path}: invalid UTF-8 {_position(raw, e.start)}{where} in a file that is otherwise "
                    "UTF-8 (fix the byte, or set the encoding explicitly: cp1252)"
                ) from None
        encoding = "cp1252"
    try:
        return raw.decode("utf-8-sig" if encoding == "utf-8" else encoding)
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not {encoding} text: {_position(raw, e.start)}{where}") from None


def _position(raw: bytes, offset: int) -> str:
    line = raw.count(b"\n", 0, offset) + 1
    column = offset - (raw.rfind(b"\n", 0, offset) + 1) + 1
    return f"byte 0x{raw[offset]:02x} at offset {offset} (line {line}, column {column})"


def read_csv(path: str | Path, encoding: str = "auto", **kwargs) -> pd.DataFrame:
    """A CSV file as a frame of strings (``.gz`` transparently, encoding as :func:`read_text`); an empty
    or unparseable file is a one-line :class:`DataError`. ``kwargs`` go to ``pandas.read_csv``."""
    path = Path(path)
    text = read_text(path, encoding)
    try:
        return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, **kwargs)
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: no CSV header or data") from None
    except (pd.errors.ParserError, csv.Error, ValueError) as e:
        raise DataError(f"{path}: not parseable as CSV ({' '.join(str(e).split())})") from None


def _find_column(frame: pd.DataFrame, name: str, path: Path, role: str) -> str:
    if name in frame.columns:
        return name
    stripped = [c for c in frame.columns if str(c).strip() == name.strip()]
    if stripped:
        return stripped[0]
    raise DataError(f"{path}: {role} column {name!r} not found; available columns: {_listing(frame.columns, 12)}")


def read_records(
    path: str | Path,
    text_column: str = "Final Narrative",
    label_column: str = "Nature",
    encoding: str = "auto",
    date_column: str | None = None,
) -> pd.DataFrame:
    """Read a SIR CSV (``.csv`` or ``.csv.gz``) into a frame with columns ``text`` and ``label`` (and ``date``,
    parsed, when ``date_column`` is given: a row without a date is a one-line error).

    Both columns are stripped strings; the index is 0..n-1 in file order.
    """
    path = Path(path)
    frame = read_csv(path, encoding, na_filter=False)
    tcol = _find_column(frame, text_column, path, "text")
    lcol = _find_column(frame, label_column, path, "label")
    if frame.empty:
        raise DataError(f"{path}: CSV has a header but no data rows")

    texts = frame[tcol].astype("str").str.strip()
    labels = frame[lcol].astype("str").str.strip()
    bad = texts.eq("") | frame[tcol].isna()
    if bad.any():
        raise DataError(f"{path}: empty narrative in column {text_column!r}: {_rows(bad)}")
    bad = labels.eq("") | frame[lcol].isna()
    if bad.any():
        raise DataError(f"{path}: empty label in column {label_column!r}: {_rows(bad)}")
    n_classes = labels.nunique()
    if n_classes < 2:
        raise DataError(f"{path}: label column {label_column!r} has {n_classes} distinct class(es); need at least 2")
    out = pd.DataFrame({"text": texts.to_numpy(), "label": labels.to_numpy()}, dtype="str")
    if date_column is not None:
        dcol = _find_column(frame, date_column, path, "date")
        dates = pd.to_datetime(frame[dcol].astype("str").str.strip(), errors="coerce")
        if dates.isna().any():
            raise DataError(f"{path}: no readable date in column {date_column!r}: {_rows(dates.isna())}")
        out["date"] = dates.to_numpy()
    return out


def _check_frame(df: pd.DataFrame, what: str) -> None:
    if "label" not in df.columns:
        raise DataError(f"{what}: frame has no 'label' column; columns: {_listing(df.columns, 12)}")


def stratified_sample(
    df: pd.DataFrame,
    cap: int = 200,
    min_class_size: int = 2,
    seed: int = 0,
    limit_classes: int | None = None,
) -> pd.DataFrame:
    """Per class draw ``min(N_c, cap)`` rows without replacement (D.1), then drop classes with
    fewer than ``min_class_size`` rows (D.2).

    ``limit_classes`` first keeps only that many largest classes (ties by label string).
    Deterministic for a given ``seed``; rows come back in original index order, index kept.
    """
    _check_frame(df, "stratified_sample")
    if cap < 1 or min_class_size < 1:
        raise ValueError(f"cap and min_class_size must be >= 1 (got cap={cap}, min_class_size={min_class_size})")
    if limit_classes is not None and limit_classes < 1:
        raise ValueError(f"limit_classes must be >= 1 or None (got {limit_classes})")
    labels = df["label"].astype("str")
    counts = labels.value_counts()
    classes = sorted(counts.index, key=lambda c: (-int(counts[c]), str(c)))
    if limit_classes is not None:
        classes = classes[:limit_classes]

    rng = np.random.default_rng(seed)
    positions = []
    for c in sorted(classes):  # fixed iteration order -> deterministic draws
        pos = np.flatnonzero((labels == c).to_numpy())
        n = min(len(pos), cap)
        if n < min_class_size:
            continue
        positions.append(np.sort(rng.choice(pos, size=n, replace=False)) if n < len(pos) else pos)
    kept = len(positions)
    if kept < 2:
        raise DataError(
            f"stratified_sample: {kept} class(es) with >= {min_class_size} rows remain "
            f"(of {len(classes)} considered); need at least 2"
        )
    return df.iloc[np.sort(np.concatenate(positions))]


def split(df: pd.DataFrame, test_size: float = 0.5, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stratified train/test split (sklearn ``train_test_split``); both parts get a fresh index."""
    from sklearn.model_selection import train_test_split  # here: `predict` reads CSVs through this module

    _check_frame(df, "split")
    try:
        train, test = train_test_split(df, test_size=test_size, stratify=df["label"], random_state=seed)
    except ValueError as e:
        raise DataError(f"split: cannot stratify ({e})") from None
    return train.reset_index(drop=True), test.reset_index(drop=True)


def gini(class_sizes: Iterable[float] | Mapping[object, float]) -> float:
    """Gini coefficient of class sizes (0 = all equal; (n-1)/n = all mass in one class).

    G = 2 * sum_i i * x_(i) / (n * sum x) - (n + 1) / n over the ascending sizes x_(1..n).
    """
    if isinstance(class_sizes, Mapping):
        class_sizes = class_sizes.values()
    x = np.sort(np.asarray(list(class_sizes), dtype=float))
    if x.size == 0:
        raise ValueError("gini: no class sizes given")
    if (x < 0).any() or not np.isfinite(x).all():
        raise ValueError("gini: class sizes must be finite and non-negative")
    total = x.sum()
    if total == 0:
        return 0.0
    n = x.size
    ranks = np.arange(1, n + 1)
    return float(2.0 * np.dot(ranks, x) / (n * total) - (n + 1) / n)


def load_titles(path: str | Path | None = None) -> dict[str, str]:
    """OIICS 2.01 Nature code -> title (e.g. ``"111" -> "Fractures"``).

    Default: the copy shipped in ``dprelease/core/resources/oiics_201_nature.csv``.
    """
    try:
        if path is None:
            src = resources.files("dprelease.core.resources").joinpath("oiics_201_nature.csv")
            text = src.read_text(encoding="utf-8")
        else:
            text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise DataError(f"{path or 'dprelease/core/resources/oiics_201_nature.csv'}: file not found") from None
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or not {"code", "title"} <= set(reader.fieldnames):
        raise DataError(f"{path or 'oiics_201_nature.csv'}: expected columns 'code,title'")
    return {row["code"].strip(): row["title"].strip() for row in reader}
