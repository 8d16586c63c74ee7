"""Fault injection, the kill cases: SIGTERM / SIGKILL while Prefect's server starts and mid-stage, each resumed to the
SAME release as the undisturbed run (``clean``, test_faults.py). They need a real process to kill."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from test_faults import WAIT_S, _outcome, _project, _wait_until, clean  # noqa: F401  (clean: the reference run)

pytestmark = pytest.mark.slow


# 4. kills: SIGTERM / SIGKILL while the server starts and mid-stage ----------------------------------------------------------
def _guards(parent: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(parent), "-f", "tasks.server_guard"], capture_output=True, text=True)
    return [int(x) for x in out.stdout.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def prefect_db(clean, tmp_path_factory) -> Path:
    """A consistent copy (SQLite's backup) of a Prefect database that is already migrated: this session's,
    which ``clean`` ran on. A project has one from its first run on."""
    import sqlite3

    from prefect.settings import PREFECT_HOME

    src, dst = Path(PREFECT_HOME.value()) / "prefect.db", tmp_path_factory.mktemp("prefect") / "prefect.db"
    assert src.is_file(), src
    with contextlib.closing(sqlite3.connect(src)) as a, contextlib.closing(sqlite3.connect(dst)) as b:
        a.backup(b)
    return dst


@pytest.mark.parametrize(
    ("sig", "during", "first_run"),
    [
        (signal.SIGKILL, "server", True),
        (signal.SIGKILL, "featurize", False),
        (signal.SIGTERM, "server", False),
        (signal.SIGTERM, "featurize", False),
    ],
    ids=["kill-early", "kill-mid", "term-early", "term-mid"],
)
def test_killed_run_leaves_no_server_and_resumes_to_the_same_release(
    clean, prefect_db, tmp_path, sig, during, first_run
):
    """Killed while Prefect's server starts (``server``: as soon as its guard process exists) or while the
    ``featurize`` stage runs (just after ``stratify``'s stamp is written; checked afterwards: some stages
    done, ``featurize`` not). ``first_run``: a Prefect home with no database yet, so the kill lands while the
    server creates and migrates it (the resume finishes that); the other cases run where the database
    exists, as every run after a project's first does. Each has a stage store of its own (empty: the
    resume does real work)."""
    root = _project(tmp_path / "root", key_from=clean.root)  # the same key: the same release expected
    home = tmp_path / "home"
    if not first_run:
        home.mkdir()
        shutil.copyfile(prefect_db, home / "prefect.db")
    env = os.environ | {"PREFECT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "flows.release", "--root", str(root), "--no-track"]
    stamps = root / "artifacts" / ".stamps"
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        guards = _wait_until(
            lambda: _guards(proc.pid), "the flow started its (guarded) Prefect server", proc=proc, every=0.2
        )
        if during == "featurize":
            _wait_until((stamps / "stratify.json").is_file, "stratify's stamp was written", proc=proc)
            time.sleep(0.2)  # into featurize (not a margin: the check below says where the kill landed)
        proc.send_signal(sig)
        proc.wait(timeout=WAIT_S)
    finally:
        if proc.poll() is None:  # a failed wait: never leave the run behind
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    if during == "featurize":  # the kill landed mid-pipeline: the split was done, the features were not
        assert (stamps / "stratify.json").is_file() and not (stamps / "featurize.json").is_file()
    _wait_until(lambda: not any(_alive(g) for g in guards), "Prefect's server ended with its run", every=0.2)
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=WAIT_S)
    assert again.returncode == 0, again.stderr[-2000:]
    assert _outcome(root) == clean.outcome
