"""This process's Prefect home and SQLite database, made operator-only (:mod:`dprelease.pipeline.prefect_home`: why)."""

from __future__ import annotations

from pathlib import Path

from dprelease.pipeline import prefect_home


def database_path() -> Path | None:
    """The SQLite file of Prefect's database setting (``sqlite+aiosqlite:///PATH``); None for another database."""
    from prefect.settings import PREFECT_API_DATABASE_CONNECTION_URL

    url = PREFECT_API_DATABASE_CONNECTION_URL.value()
    url = url.get_secret_value() if hasattr(url, "get_secret_value") else str(url or "")
    if not url.startswith("sqlite") or ":///" not in url:
        return None
    path = url.split(":///", 1)[1].split("?", 1)[0]
    return None if not path or path == ":memory:" else Path(path)


def make_private() -> Path:
    """The home 0700 and the database files 0600. The database is created first only where this process's
    own temporary server will use it (no ``PREFECT_API_URL``); a server's client narrows what exists."""
    from prefect.settings import PREFECT_API_URL, PREFECT_HOME

    return prefect_home.make_private(PREFECT_HOME.value(), database_path(), create=not PREFECT_API_URL.value())
