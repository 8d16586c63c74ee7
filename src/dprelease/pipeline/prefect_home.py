"""The Prefect home is operator-only: the folder 0700, its SQLite database files 0600.

Prefect's database keeps a start and an end time for every flow run and task run, including those of
``select`` and ``reweight``, whose durations grow with a data-dependent search that no guarantee covers
(docs/hygiene.md). They cannot be kept out of it: a stage that ran outside a task run would still show as
the gap between its neighbours' times, and in the flow run's own. So the store is treated like
``artifacts/``: the operator's, never published or shared. Prefect makes the database with the umask's mode
(0644), so :func:`make_private` creates it first, empty and 0600 (SQLite gives its ``-wal`` and ``-shm``
files the database file's mode), and narrows whatever is already there. Prefect is not imported here
(the core package never imports it): ``tasks/prefect_home.py`` finds the paths from Prefect's settings,
and the ``serve`` supervisor calls this before it starts a server on the project's ``.prefect/``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from dprelease.core.io import private_dir

DB_SUFFIXES = ("", "-wal", "-shm", "-journal")  # SQLite's database and its side files


def make_private(home: str | Path, database: str | Path | None, *, create: bool = True) -> Path:
    """``home`` 0700 (created if missing); the SQLite ``database`` (None: not SQLite) and its side files 0600,
    the database first created empty and 0600 when missing and ``create`` (an empty file is an empty SQLite
    database: Prefect migrates it). Returns the home."""
    home = private_dir(home)
    if database is None:
        return home
    db = Path(database)
    if create and db.parent.is_dir():
        with contextlib.suppress(FileExistsError):
            os.close(os.open(db, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for suffix in DB_SUFFIXES:
        path = db.with_name(db.name + suffix)
        if path.is_file():
            os.chmod(path, 0o600)
    return home
