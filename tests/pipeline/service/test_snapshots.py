"""Snapshots: cut by EventDate (growing windows, same rows → same bytes, both file formats), resolved
against the project root, versioned with DVC (copied in by content, ``dvc add``), and pushed to the
clone's default DVC remote — where a second git clone gets the same extract back with ``dvc pull``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from dprelease.core.errors import ConfigError, DataError, OneLineError
from dprelease.core.io import file_hash
from dprelease.pipeline.service.snapshots import (
    SNAPSHOTS,
    cut_windows,
    dvc,
    push_snapshot,
    snapshot_id,
    snapshot_path,
    version_snapshot,
)

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "sir_2015_2017_first28_original_format.csv"
DATA = ROOT / "data" / "osha_sir_2015_2016.csv.gz"


def _bundled(tmp_path) -> Path:
    path = tmp_path / "sir.csv"
    pd.DataFrame(
        {
            "EventDate": ["2015-01-02", "2015-12-31", "2016-03-01", "2016-12-30"],
            "Final Narrative": ["a", "b", "c", "d"],
            "Nature": ["1", "2", "1", "2"],
        }
    ).to_csv(path, index=False)
    return path


def _key(folder):
    """An artifacts folder holding a randomness key (the snapshot id is keyed)."""
    from dprelease.core.privacy import secret

    artifacts = folder / "artifacts"
    secret.init(artifacts)
    return artifacts


def test_windows_grow_and_are_byte_stable(tmp_path):
    files = cut_windows(_bundled(tmp_path), ["2016-06-30", "2015-12-31"], tmp_path / "w")
    assert [f.name for f in files] == ["sir_to_2015-12-31.csv.gz", "sir_to_2016-06-30.csv.gz"]
    assert [len(pd.read_csv(f)) for f in files] == [2, 3]  # end dates inclusive
    ids = [snapshot_id(f, artifacts=_key(tmp_path)) for f in files]
    again = cut_windows(_bundled(tmp_path), ["2015-12-31"], tmp_path / "w2")
    assert snapshot_id(again[0], artifacts=_key(tmp_path)) == ids[0] and ids[0].startswith("sir_to_2015-12-31-")
    # keyed, never a plain content digest (a membership test for anyone holding D∖{x} and x); another key, another id
    assert file_hash(files[0])[:10] not in ids[0]
    assert snapshot_id(files[0], artifacts=_key(tmp_path / "other")) != ids[0]


def test_original_osha_format_dates(tmp_path):
    rows = pd.read_csv(FIXTURE, dtype=str)
    (f,) = cut_windows(FIXTURE, ["2015-01-03"], tmp_path)
    cut = pd.read_csv(f, dtype=str)
    assert list(cut.columns) == list(rows.columns)
    assert 0 < len(cut) <= len(rows)
    assert (pd.to_datetime(cut["EventDate"], format="mixed") <= "2015-01-03").all()


def test_bad_input_is_one_line(tmp_path):
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"EventDate": ["2015-01-01", "soon"], "x": ["a", "b"]}).to_csv(bad, index=False)
    with pytest.raises(DataError, match=r"EventDate 'soon' in data row 2 is not a date"):
        cut_windows(bad, ["2015-12-31"], tmp_path / "w")
    with pytest.raises(DataError, match="no row has EventDate on or before 2014-01-01"):
        cut_windows(_bundled(tmp_path), ["2014-01-01"], tmp_path / "w")
    with pytest.raises(DataError, match="not a date"):
        cut_windows(_bundled(tmp_path), ["someday"], tmp_path / "w")
    nodate = tmp_path / "nodate.csv"
    pd.DataFrame({"x": ["a"]}).to_csv(nodate, index=False)
    with pytest.raises(DataError, match="no EventDate column"):
        cut_windows(nodate, ["2015-12-31"], tmp_path / "w")


def test_snapshot_path_defaults_and_resolves_against_the_root(tmp_path):
    assert snapshot_path(tmp_path, None, default="data/sir.csv") == tmp_path / "data" / "sir.csv"
    assert snapshot_path(tmp_path, "new.csv", default="data/sir.csv") == tmp_path / "new.csv"
    assert snapshot_path(tmp_path, "/abs/x.csv", default="data/sir.csv") == Path("/abs/x.csv")


def test_version_snapshot_copies_by_content_and_tracks_it_with_dvc(tmp_path):
    source = _bundled(tmp_path)
    root = tmp_path / "project"
    root.mkdir()
    rel = version_snapshot(root, source, artifacts=_key(tmp_path))
    assert rel == SNAPSHOTS / f"{snapshot_id(source, artifacts=_key(tmp_path))}.csv"
    assert (root / rel).read_bytes() == source.read_bytes() and (root / f"{rel}.dvc").is_file()
    assert "analytics = false" in (root / ".dvc" / "config").read_text()  # a DVC repo, quiet and offline
    assert version_snapshot(root, source, artifacts=_key(tmp_path)) == rel  # again: same file, no error
    assert not list((root / SNAPSHOTS).glob(".*partial"))
    assert push_snapshot(root, rel) is None  # no default remote: no push
    with pytest.raises(ConfigError, match="snapshot not found: .*absent.csv"):
        version_snapshot(root, tmp_path / "absent.csv", artifacts=_key(tmp_path))
    with pytest.raises(
        OneLineError, match=r"^dvc add nowhere\.csv: ERROR: output 'nowhere\.csv' does not exist"
    ) as err:
        dvc(root, "add", "nowhere.csv")
    assert "\n" not in str(err.value)


def test_a_failed_push_is_one_warning_and_no_stop(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    rel = version_snapshot(root, _bundled(tmp_path), artifacts=_key(tmp_path))
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the remote's folder should be")
    dvc(root, "remote", "add", "--local", "--default", "broken", str(blocker / "remote"))
    warned: list[str] = []
    assert push_snapshot(root, rel, warn=warned.append) is None
    assert len(warned) == 1 and warned[0].startswith(
        f"snapshot {rel.name} not pushed to DVC remote broken: dvc push {rel}.dvc: ERROR: "
    )
    assert "\n" not in warned[0] and "Having any troubles" not in warned[0]


def _run(*cmd, cwd: Path) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)  # generous: a loaded machine
    assert done.returncode == 0, (cmd, done.stdout[-500:], done.stderr[-500:])
    return done.stdout


def _git(*args, cwd: Path) -> str:
    return _run("git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args, cwd=cwd)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="no git on PATH")
def test_snapshot_pushed_to_the_private_remote_and_pulled_by_another_clone(tmp_path):
    a, b, remote = tmp_path / "a", tmp_path / "b", tmp_path / "remote"
    a.mkdir()
    _git("init", "-q", cwd=a)
    rel = version_snapshot(a, DATA, artifacts=_key(tmp_path))  # no remote yet: versioned, not pushed
    assert push_snapshot(a, rel) is None
    dvc(a, "remote", "add", "--local", "--default", "private", str(remote))
    assert push_snapshot(a, rel) == "private"
    stored = [p for p in remote.rglob("*") if p.is_file()]
    assert len(stored) == 1 and stored[0].read_bytes() == DATA.read_bytes()  # the extract, in the remote
    assert not (a / ".dvc" / "config").read_text().count(str(remote))  # the remote is this clone's only
    _git("add", "-A", cwd=a)
    _git("commit", "-q", "-m", "snapshot", cwd=a)

    _git("clone", "-q", str(a), str(b), cwd=tmp_path)
    assert not (b / rel).exists() and (b / f"{rel}.dvc").is_file()  # git holds the pointer only
    dvc(b, "remote", "add", "--local", "--default", "private", str(remote))
    dvc(b, "pull", "-q")
    assert (b / rel).read_bytes() == DATA.read_bytes()
    assert "in sync" in _run(sys.executable, "-m", "dvc", "status", "--cloud", cwd=b)
