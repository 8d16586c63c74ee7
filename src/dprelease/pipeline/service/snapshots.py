"""Data snapshots: cut an extract into growing ``EventDate`` windows (the simulated cadence of new
extracts), name a snapshot by its content, and version it with DVC.

A snapshot is any CSV the pipeline reads (the bundled format or OSHA's original one). Its id is
``<stem>-<first 10 hex of HMAC(key, its bytes)>`` (keyed: a plain digest of a private file is a membership test): the same bytes always get the same run folder, so a retrain of
an unchanged snapshot finds every stage in the cache. A retrain copies it into ``data/snapshots/`` (named
by that id) and tracks it with DVC (``dvc add``, run as ``python -m dvc``: DVC is never imported here);
it is pushed to DVC's default remote when the clone has one (``make dvc-remote``).
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from dprelease.core.data.records import read_csv
from dprelease.core.errors import ConfigError, DataError, OneLineError
from dprelease.core.io import atomic_path, file_hash
from dprelease.core.privacy import secret

DATE_COLUMN = "EventDate"
SNAPSHOTS = Path("data") / "snapshots"  # where a retrain keeps its snapshots, relative to the project root


def snapshot_id(path: str | Path, digest: str | None = None, *, artifacts: str | Path) -> str:
    """``<stem>-<10 hex of HMAC(key, the file's bytes)>`` with the randomness key in ``artifacts`` (``digest``: that
    keyed digest when already known). Never a plain content digest: the id names Prefect runs, log lines and files,
    and a plain sha256 of a private extract is a membership test for anyone holding D∖{x} and x."""
    path = Path(path)
    return f"{path.name.split('.')[0]}-{(digest or secret.keyed_file_digest(artifacts, path))[:10]}"


def event_dates(frame: pd.DataFrame, path: Path) -> pd.Series:
    """The ``EventDate`` column as dates (ISO ``2015-01-01`` or OSHA's ``1/1/2015``); a one-line error
    when it is missing or a value does not parse."""
    if DATE_COLUMN not in frame.columns:
        raise DataError(f"{path}: no {DATE_COLUMN} column to cut windows by")
    dates = pd.to_datetime(frame[DATE_COLUMN], errors="coerce", format="mixed")
    bad = dates.isna()
    if bad.any():
        first = int(bad.to_numpy().nonzero()[0][0])
        raise DataError(
            f"{path}: {DATE_COLUMN} {frame[DATE_COLUMN].iloc[first]!r} in data row {first + 1} is not a date"
        )
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


def snapshot_path(top: Path, snapshot: str | Path | None, *, default: str | Path) -> Path:
    """The snapshot a retrain reads: ``snapshot``, else ``default`` (``service.snapshot`` or ``data.path``);
    a relative path is relative to the project root ``top``."""
    path = Path(snapshot or default)
    return path if path.is_absolute() else top / path


def dvc(root: Path, *args: str) -> None:
    """``python -m dvc ARGS`` in ``root`` (its output captured: pass no ``-q``, which would hide DVC's own
    ERROR line); a failure is a one-line error naming the command and DVC's reason."""
    done = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=root, capture_output=True, text=True)
    if done.returncode:
        lines = [ln for ln in (done.stderr or done.stdout).splitlines() if not ln.startswith("Having any troubles?")]
        why = " ".join(" ".join(lines).split())[:300] or f"failed with exit status {done.returncode}"
        raise OneLineError(f"dvc {' '.join(args)}: {why}")


def snapshot_rel(source: Path, digest: str | None = None, *, artifacts: str | Path) -> Path:
    """Where :func:`version_snapshot` keeps ``source``, relative to the project root (nothing is copied):
    ``data/snapshots/<snapshot id><suffixes>`` (``digest``: its keyed digest when already known)."""
    return (
        SNAPSHOTS / f"{snapshot_id(source, digest, artifacts=artifacts)}{''.join(Path(source).suffixes[-2:]) or '.csv'}"
    )


def version_snapshot(root: Path, source: Path, *, artifacts: str | Path) -> Path:
    """Copy ``source`` into ``data/snapshots/`` (named by content) and track it with DVC; returns the path
    relative to the root. The project becomes a DVC repository if it is not one yet."""
    if not source.is_file():
        raise ConfigError(f"snapshot not found: {source}")
    digest = file_hash(source)
    rel = snapshot_rel(source, artifacts=artifacts)
    target = root / rel
    if not target.is_file() or file_hash(target) != digest:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.partial")
        shutil.copyfile(source, tmp)
        tmp.replace(target)
    if not (root / ".dvc").is_dir():
        dvc(root, "init", *([] if (root / ".git").exists() else ["--no-scm"]))
        dvc(root, "config", "core.analytics", "false")
        dvc(root, "config", "core.check_update", "false")
    dvc(root, "add", str(rel))
    return rel


def default_remote(root: Path) -> str | None:
    """The name of DVC's default remote in ``root`` (``make dvc-remote``), or None when there is none."""
    remote = subprocess.run(
        [sys.executable, "-m", "dvc", "remote", "default"], cwd=root, capture_output=True, text=True
    )
    return None if remote.returncode or not remote.stdout.strip() else remote.stdout.strip()


def push_snapshot(root: Path, rel: Path, *, warn: Callable[[str], object] | None = None) -> str | None:
    """Push the snapshot to DVC's default remote when this clone has one (``make dvc-remote``): the name of
    the remote, or None when there is none. A failed push leaves the snapshot in the local DVC cache and
    is reported in one line to ``warn`` (the retrain goes on: a backup that failed is not a reason to stop)."""
    remote = default_remote(root)
    if remote is None:
        return None
    try:
        dvc(root, "push", f"{rel}.dvc")
    except OneLineError as err:
        if warn is not None:
            warn(f"snapshot {rel.name} not pushed to DVC remote {remote}: {err}")
        return None
    return remote
