"""The Prefect home is operator-only (docs/hygiene.md): its database keeps every task run's start and end, so
the durations of ``select`` and ``reweight`` too. The home is 0700 and the SQLite files 0600, created so before
Prefect's server makes the database with the umask's 0644, and narrowed where they already exist."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dprelease.pipeline.prefect_home import make_private


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_home_gets_an_empty_private_database_first(tmp_path):
    home = make_private(tmp_path / "home", tmp_path / "home" / "prefect.db")
    db = home / "prefect.db"
    assert _mode(home) == 0o700 and db.is_file() and db.stat().st_size == 0 and _mode(db) == 0o600


def test_an_existing_home_and_database_are_narrowed(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    files = [home / f"prefect.db{s}" for s in ("", "-wal", "-shm")]
    for f in files:
        f.write_bytes(b"x")
        os.chmod(f, 0o644)
    (home / "other").write_text("not the database")
    os.chmod(home / "other", 0o644)
    make_private(home, home / "prefect.db")
    assert _mode(home) == 0o700 and [_mode(f) for f in files] == [0o600] * 3
    assert all(f.read_bytes() == b"x" for f in files)  # narrowed, not replaced


def test_a_client_of_a_server_creates_no_database_and_another_database_is_left_alone(tmp_path):
    home = make_private(tmp_path / "client", tmp_path / "client" / "prefect.db", create=False)
    assert _mode(home) == 0o700 and not (home / "prefect.db").exists()
    assert list(make_private(tmp_path / "pg", None).iterdir()) == []


def test_the_database_path_comes_from_prefects_setting(tmp_path):
    from prefect.settings import PREFECT_API_DATABASE_CONNECTION_URL, temporary_settings

    from tasks.prefect_home import database_path

    with temporary_settings(updates={PREFECT_API_DATABASE_CONNECTION_URL: f"sqlite+aiosqlite:///{tmp_path}/x.db"}):
        assert database_path() == tmp_path / "x.db"
    with temporary_settings(updates={PREFECT_API_DATABASE_CONNECTION_URL: "postgresql+asyncpg://u:p@h/db"}):
        assert database_path() is None
    assert database_path() is not None  # the tests' own: SQLite in their throw-away home


@pytest.mark.slow
def test_after_a_flow_the_store_holds_task_run_times_and_is_operator_only():
    """A Prefect flow with a task, in this session's home: the task run's start and end are in the database
    (why it must be private), and the home and every database file are owner-only."""
    import sqlite3

    from prefect import flow, task
    from prefect.settings import PREFECT_HOME

    import tasks.stages  # noqa: F401  (what every flow imports: it makes the home private first)

    @task(name="reweight", persist_result=False)
    def untimed() -> int:
        return 1

    @flow(persist_result=False)
    def tiny() -> int:
        return untimed()

    assert tiny() == 1
    home = Path(PREFECT_HOME.value())
    with sqlite3.connect(home / "prefect.db") as db:
        rows = db.execute("SELECT start_time, end_time FROM task_run WHERE name LIKE 'reweight%'").fetchall()
    assert rows and all(start and end for start, end in rows)
    assert _mode(home) == 0o700
    files = sorted(home.glob("prefect.db*"))
    assert files and {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}
