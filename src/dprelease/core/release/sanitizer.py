"""Sanitizer releases and `dprelease sanitize`: a partner privatizes its own narratives from a release folder alone,
with noise from the OS's entropy (a known seed would let the noise be subtracted).

See docs/sanitizers.md, "Notes from the code", `core/release/sanitizer.py`."""

from __future__ import annotations

import hashlib
import json
import secrets
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from dprelease.core.errors import ReleaseError
from dprelease.core.io import atomic_path, file_hash
from dprelease.core.release.check import MANIFEST, shown_as, snapshot, verify_release_folder
from dprelease.core.release.check import SANITIZER as KIND
from dprelease.core.release.outputs import check_output, require_rows
from dprelease.core.release.signing import require_signature

if TYPE_CHECKING:
    import pandas as pd

METADATA_KEY = b"dprelease"
SANITIZE_BATCH = 4096  # narratives per mechanism call: memory bounded, the bar moves; each call reloads the release

Sanitize = Callable[..., "tuple[pd.DataFrame, dict]"]


def verify_sanitizer(folder: str | Path) -> dict:
    """The manifest of a sanitizer release folder of any mechanism, after the checks every release shares
    (:func:`dprelease.core.release.check.verify_release_folder`); the mechanism's loader checks its architecture."""
    return verify_release_folder(folder, kind=KIND)[0]


def sanitize_file(
    release: str | Path,
    input_csv: str | Path,
    output: str | Path,
    *,
    lookup: Callable[[str], Sanitize],
    text_column: str | None = None,
    encoding: str = "auto",
    seed: int | None = None,
    key: str | Path | None = None,
    signature_check: bool = True,
) -> tuple[int, dict]:
    """Privatize every narrative of ``input_csv`` with the release's mechanism (found by ``lookup``); write
    ``output`` (parquet) atomically. Returns the row count and the public guarantee metadata. The release's
    files are read once into a private copy, which is checked (the agency's signature with ``key`` first: no
    key is refused unless ``signature_check`` is False, the caller's explicit opt-out) and is what the
    mechanism loads."""
    output = check_output(output, input_file=input_csv, release=release)
    if output.suffix != ".parquet":
        raise ReleaseError(f"{output}: the output is written as parquet; name it *.parquet")
    with tempfile.TemporaryDirectory(prefix="dprelease-release-") as tmp, shown_as(Path(tmp), Path(release)):
        return _sanitize(
            Path(release),
            Path(tmp),
            Path(input_csv),
            output,
            lookup=lookup,
            text_column=text_column,
            encoding=encoding,
            seed=seed,
            key=key,
            signature_check=signature_check,
        )


def _sanitize(
    release: Path,
    copy: Path,
    input_csv: Path,
    output: Path,
    *,
    lookup,
    text_column,
    encoding,
    seed,
    key,
    signature_check,
) -> tuple[int, dict]:
    import pandas as pd  # here, not at the top: `dprelease verify` imports this module for verify_sanitizer

    from dprelease.core.release.folder import read_narratives

    snapshot(release, copy)
    require_signature(copy, key, shown=release, check=signature_check)
    manifest = verify_sanitizer(copy)
    sanitize = lookup(manifest["mechanism"])
    _, texts = read_narratives(input_csv, text_column, encoding)
    require_rows(len(texts), input_csv)
    draws, guarantee = _draw_batches(
        sanitize,
        copy,
        texts,
        secrets.randbits(63) if seed is None else seed,
        release=release,
        mechanism=manifest["mechanism"],
    )
    table = pd.concat([pd.DataFrame({"row": range(1, len(texts) + 1)}), draws.reset_index(drop=True)], axis=1)
    meta = {
        **{("mechanism_label" if k == "mechanism" else k): v for k, v in guarantee.items()},
        "mechanism": manifest["mechanism"],
        "release_manifest_sha256": file_hash(copy / MANIFEST),
        "rows": len(texts),
    }
    check_output(output, input_file=input_csv, release=release)  # again: the path may have changed since
    _write_parquet(table, output, meta)
    return len(texts), meta


def batch_seed(seed: int, index: int) -> int:
    """The seed of batch ``index``: ``seed`` itself for the first (an input of one batch draws as one call would),
    then independent 63-bit seeds derived from (seed, index)."""
    if index == 0:
        return seed
    return int.from_bytes(hashlib.sha256(f"{seed}:{index}".encode()).digest()[:8], "big") >> 1


def _draw_batches(
    sanitize: Sanitize, copy: Path, texts: list[str], seed: int, *, release: Path, mechanism: str
) -> tuple[pd.DataFrame, dict]:
    """The mechanism's draws, :data:`SANITIZE_BATCH` narratives per call (each batch its own seed,
    :func:`batch_seed`), with a progress bar on stderr for a large input on a terminal (as `predict`'s)."""
    import pandas as pd
    from tqdm.auto import tqdm

    from dprelease.core.release.folder import PROGRESS_MIN_ROWS

    frames, guarantee = [], None
    disable = True if len(texts) < PROGRESS_MIN_ROWS else None  # None: tqdm shows the bar only on a TTY
    with tqdm(total=len(texts), desc="sanitize", unit="narrative", file=sys.stderr, disable=disable) as bar:
        for index, start in enumerate(range(0, len(texts), SANITIZE_BATCH)):
            chunk = texts[start : start + SANITIZE_BATCH]
            draws, meta = sanitize(copy, chunk, seed=batch_seed(seed, index))
            if len(draws) != len(chunk):
                raise ReleaseError(
                    f"{release}: the {mechanism} sanitizer returned {len(draws)} rows for {len(chunk)} narratives"
                )
            if guarantee is not None and _same(meta) != _same(guarantee):
                raise ReleaseError(f"{release}: the {mechanism} sanitizer changed its guarantee between batches")
            frames.append(draws.reset_index(drop=True))
            guarantee = meta
            bar.update(len(chunk))
    return pd.concat(frames, ignore_index=True), guarantee


def _same(meta: dict) -> str:
    return json.dumps(meta, sort_keys=True, default=str)  # NaN equals NaN here, unlike in ==


def read_metadata(path: str | Path) -> dict:
    """The public metadata a sanitized parquet file carries (mechanism, release, guarantee)."""
    import pyarrow.parquet as pq

    raw = pq.read_schema(path).metadata or {}
    if METADATA_KEY not in raw:
        raise ReleaseError(f"{path}: not written by `dprelease sanitize` (no {METADATA_KEY.decode()} metadata)")
    return json.loads(raw[METADATA_KEY])


def _write_parquet(table: pd.DataFrame, output: Path, meta: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrow = pa.Table.from_pandas(table, preserve_index=False)
    arrow = arrow.replace_schema_metadata(
        {**(arrow.schema.metadata or {}), METADATA_KEY: json.dumps(meta, sort_keys=True).encode()}
    )
    try:
        with atomic_path(output) as tmp:
            pq.write_table(arrow, tmp)
    except OSError as e:
        raise ReleaseError(f"{output}: cannot write the output ({e.strerror or e})") from None
