"""A retrain's snapshot in DVC: versioned with ``dvc add`` and, when the clone has a default remote
(``make dvc-remote``: a private local folder), pushed there — so a second clone of the project gets the
same extract back with ``dvc pull``. Two git clones, one local remote, no network."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA
from flows.retrain import push_snapshot, version_snapshot

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("git") is None, reason="no git on PATH")]


def _run(*cmd, cwd: Path) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (cmd, done.stdout[-500:], done.stderr[-500:])
    return done.stdout


def _dvc(*args, cwd: Path) -> str:
    return _run(sys.executable, "-m", "dvc", *args, cwd=cwd)


def _git(*args, cwd: Path) -> str:
    return _run("git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args, cwd=cwd)


def test_snapshot_pushed_to_the_private_remote_and_pulled_by_another_clone(tmp_path):
    a, b, remote = tmp_path / "a", tmp_path / "b", tmp_path / "remote"
    a.mkdir()
    _git("init", "-q", cwd=a)
    rel = version_snapshot(a, DATA)                                  # no remote yet: versioned, not pushed
    assert push_snapshot(a, rel) is None
    _dvc("remote", "add", "--local", "--default", "private", str(remote), cwd=a)
    assert push_snapshot(a, rel) == "private"
    stored = [p for p in remote.rglob("*") if p.is_file()]
    assert len(stored) == 1 and stored[0].read_bytes() == DATA.read_bytes()   # the extract, in the remote
    assert not (a / ".dvc" / "config").read_text().count(str(remote))        # the remote is this clone's only
    _git("add", "-A", cwd=a)
    _git("commit", "-q", "-m", "snapshot", cwd=a)

    _git("clone", "-q", str(a), str(b), cwd=tmp_path)
    assert not (b / rel).exists() and (b / f"{rel}.dvc").is_file()            # git holds the pointer only
    _dvc("remote", "add", "--local", "--default", "private", str(remote), cwd=b)
    _dvc("pull", "-q", cwd=b)
    assert (b / rel).read_bytes() == DATA.read_bytes()
    assert "in sync" in _dvc("status", "--cloud", cwd=b)
