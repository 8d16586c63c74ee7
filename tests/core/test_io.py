"""dprelease.core.io: atomic writes (replace only on success, no temporary left behind), JSON helpers and
content hashes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from dprelease.core.io import atomic_dir, atomic_path, file_hash, read_json, skip_marker, write_json


def _siblings(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


class Boom(RuntimeError):
    pass


# atomic_path ---------------------------------------------------------------------------------------
def test_atomic_path_replaces_on_success(tmp_path):
    target = tmp_path / "sub" / "out.txt"  # parent folder is created
    with atomic_path(target) as tmp:
        assert tmp != target and tmp.parent == target.parent
        assert not target.exists()  # nothing visible before the block ends
        tmp.write_text("new", encoding="utf-8")
    assert target.read_text(encoding="utf-8") == "new"
    assert _siblings(target.parent) == ["out.txt"]


def test_atomic_path_failure_keeps_previous_content_and_no_temp(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(Boom):
        with atomic_path(target) as tmp:
            tmp.write_text("half-written", encoding="utf-8")
            raise Boom()
    assert target.read_text(encoding="utf-8") == "old"
    assert _siblings(tmp_path) == ["out.txt"]


def test_atomic_path_failure_without_previous_file_leaves_nothing(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(Boom):
        with atomic_path(target) as tmp:
            tmp.write_text("x", encoding="utf-8")
            raise Boom()
    assert _siblings(tmp_path) == []


# atomic_dir ----------------------------------------------------------------------------------------
def test_atomic_dir_replaces_whole_folder(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "stale.txt").write_text("stale", encoding="utf-8")
    (folder / "keep.txt").write_text("old", encoding="utf-8")
    with atomic_dir(folder) as tmp:
        assert tmp != folder and tmp.is_dir() and tmp.parent == folder.parent
        (tmp / "keep.txt").write_text("new", encoding="utf-8")
        (tmp / "nested").mkdir()
        (tmp / "nested" / "a.txt").write_text("a", encoding="utf-8")
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) == ["keep.txt", "nested", "nested/a.txt"]
    assert not (folder / "stale.txt").exists()  # a file of the old folder is gone
    assert (folder / "keep.txt").read_text(encoding="utf-8") == "new"
    assert _siblings(tmp_path) == ["out"]  # neither the temporary nor the ".out.old" folder remains


def test_atomic_dir_creates_new_folder(tmp_path):
    folder = tmp_path / "a" / "b"
    with atomic_dir(folder) as tmp:
        (tmp / "f.txt").write_text("1", encoding="utf-8")
    assert (folder / "f.txt").read_text(encoding="utf-8") == "1"
    assert _siblings(folder.parent) == ["b"]


def test_atomic_dir_failure_keeps_previous_folder_and_no_temp(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "old.txt").write_text("old", encoding="utf-8")
    with pytest.raises(Boom):
        with atomic_dir(folder) as tmp:
            (tmp / "new.txt").write_text("new", encoding="utf-8")
            raise Boom()
    assert _siblings(folder) == ["old.txt"]
    assert (folder / "old.txt").read_text(encoding="utf-8") == "old"
    assert _siblings(tmp_path) == ["out"]


def test_atomic_dir_failure_without_previous_folder_leaves_nothing(tmp_path):
    with pytest.raises(Boom):
        with atomic_dir(tmp_path / "out") as tmp:
            (tmp / "x").write_text("x", encoding="utf-8")
            raise Boom()
    assert _siblings(tmp_path) == []


# JSON ----------------------------------------------------------------------------------------------
def test_write_read_json_round_trip_with_numpy_and_path(tmp_path):
    obj = {
        "int": np.int64(3),
        "float": np.float32(0.5),
        "bool": np.bool_(True),
        "array": np.arange(4).reshape(2, 2),
        "farray": np.array([0.25, 1.5]),
        "path": Path("a") / "b.txt",
        "plain": {"nested": [1, "two", None]},
    }
    target = tmp_path / "deep" / "x.json"
    write_json(target, obj)
    back = read_json(target)
    assert back == {
        "int": 3,
        "float": 0.5,
        "bool": True,
        "array": [[0, 1], [2, 3]],
        "farray": [0.25, 1.5],
        "path": str(Path("a") / "b.txt"),
        "plain": {"nested": [1, "two", None]},
    }
    assert type(back["int"]) is int and type(back["float"]) is float and type(back["bool"]) is bool
    text = target.read_text(encoding="utf-8")
    assert text.endswith("\n")
    assert text.index('"array"') < text.index('"bool"') < text.index('"float"')  # keys sorted
    assert _siblings(target.parent) == ["x.json"]


def test_write_json_non_serialisable_raises_and_keeps_previous(tmp_path):
    target = tmp_path / "x.json"
    write_json(target, {"ok": 1})
    with pytest.raises(TypeError, match="not JSON serialisable: object"):
        write_json(target, {"bad": object()})
    with pytest.raises(TypeError, match="set"):
        write_json(target, {"bad": {1, 2}})
    assert read_json(target) == {"ok": 1}
    assert _siblings(tmp_path) == ["x.json"]


# hashes --------------------------------------------------------------------------------------------
def test_file_hash_of_file_is_sha256_of_bytes(tmp_path):
    data = bytes(np.random.default_rng(0).integers(0, 256, size=5000, dtype=np.uint8))
    f = tmp_path / "blob.bin"
    f.write_bytes(data)
    assert file_hash(f) == hashlib.sha256(data).hexdigest()
    assert file_hash(f, chunk=7) == hashlib.sha256(data).hexdigest()  # chunking does not matter
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert file_hash(empty) == hashlib.sha256(b"").hexdigest()


def _tree(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha", encoding="utf-8")
    (root / "sub" / "b.txt").write_text("beta", encoding="utf-8")
    return root


def test_file_hash_of_directory(tmp_path):
    d = _tree(tmp_path / "d")
    h0 = file_hash(d)
    assert file_hash(d) == h0  # nothing changed
    assert file_hash(_tree(tmp_path / "copy")) == h0  # depends on relative names and contents only
    assert h0 != file_hash(d / "a.txt")

    (d / "a.txt").rename(d / "c.txt")
    h_renamed = file_hash(d)
    assert h_renamed != h0
    (d / "c.txt").rename(d / "a.txt")
    assert file_hash(d) == h0  # renamed back: same hash

    (d / "sub" / "b.txt").write_text("beta!", encoding="utf-8")
    assert file_hash(d) not in (h0, h_renamed)

    (d / "sub" / "b.txt").write_text("beta", encoding="utf-8")
    (d / "sub" / "new.txt").write_text("", encoding="utf-8")  # an added (even empty) file counts
    assert file_hash(d) != h0


def test_file_hash_of_directory_is_not_ambiguous(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / "a.txt").write_bytes(b"bX")
    (two / "a.txtb").write_bytes(b"X")
    assert file_hash(one) != file_hash(two)


# skip_marker --------------------------------------------------------------------------------------
def test_skip_marker_writes_only_skipped_json(tmp_path):
    folder = tmp_path / "artifacts" / "round3"
    folder.mkdir(parents=True)
    (folder / "stale.bin").write_bytes(b"old")  # the folder is replaced whole
    summary = skip_marker(folder, "no re-weighting")
    assert summary == {"skipped": "no re-weighting"}
    assert sorted(p.name for p in folder.iterdir()) == ["skipped.json"]
    assert read_json(folder / "skipped.json") == {"skipped": "no re-weighting"}
    assert not (tmp_path / "metrics").exists()
    assert sorted(p.name for p in folder.parent.iterdir()) == ["round3"]  # no temporary sibling


def test_skip_marker_with_metrics(tmp_path):
    folder, metrics = tmp_path / "out", tmp_path / "metrics" / "select.json"
    summary = skip_marker(folder, "no validation split", metrics)
    assert summary == {"skipped": "no validation split"}
    assert sorted(p.name for p in folder.iterdir()) == ["skipped.json"]
    assert read_json(metrics) == {"skipped": "no validation split"}
    assert sorted(p.name for p in metrics.parent.iterdir()) == ["select.json"]


# Stage --------------------------------------------------------------------------------------------
