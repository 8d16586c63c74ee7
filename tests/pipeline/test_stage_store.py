"""dprelease.pipeline.stage_store: save a stage's outputs under a key, restore them into another root."""

from __future__ import annotations

from pathlib import Path

from dprelease.pipeline.stage_store import object_path, restore, save, stored_file, verify


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _source(root: Path) -> Path:
    (root / "artifacts" / "features" / "deep").mkdir(parents=True)
    (root / "artifacts" / "features" / "x.bin").write_bytes(bytes(range(256)))
    (root / "artifacts" / "features" / "deep" / "y.txt").write_text("why", encoding="utf-8")
    (root / "metrics").mkdir()
    (root / "metrics" / "featurize.json").write_text('{"n": 3}\n', encoding="utf-8")
    (root / "unrelated.txt").write_text("not saved", encoding="utf-8")
    return root


PATHS = ["artifacts/features", "metrics/featurize.json"]
SUMMARY = {"n": 3, "nested": {"a": [1, 2]}}


def test_save_then_restore_into_another_root(tmp_path):
    src, dst, store = _source(tmp_path / "src"), tmp_path / "dst", tmp_path / "store"
    save(store, "k1", PATHS, src, SUMMARY)
    assert sorted(p.name for p in store.iterdir()) == ["cache", "k1"]  # no temporary left in the store
    assert [p.name for p in (store / "k1").iterdir()] == ["entry.json"]  # the entry is an index only
    assert restore(store, "k1", dst) == SUMMARY
    expected = {k: v for k, v in _files(src).items() if k != "unrelated.txt"}
    assert _files(dst) == expected
    # the stored entry is untouched by a restore and can be restored again
    assert restore(store, "k1", tmp_path / "dst2") == SUMMARY
    assert _files(tmp_path / "dst2") == expected


def test_unknown_key_gives_none(tmp_path):
    store = tmp_path / "store"
    assert restore(store, "missing", tmp_path / "dst") is None
    save(store, "k1", PATHS, _source(tmp_path / "src"), SUMMARY)
    assert restore(store, "k2", tmp_path / "dst") is None
    assert not (tmp_path / "dst").exists()


def test_save_is_first_writer_wins(tmp_path):
    src, store = _source(tmp_path / "src"), tmp_path / "store"
    save(store, "k", PATHS, src, {"first": 1})
    # a second save under the same key (other content, other summary) is ignored (files are replaced, as
    # stages write them atomically)
    (src / "metrics" / "featurize.json").unlink()
    (src / "metrics" / "featurize.json").write_text('{"n": 99}\n', encoding="utf-8")
    (src / "artifacts" / "features" / "x.bin").unlink()
    (src / "artifacts" / "features" / "x.bin").write_bytes(b"changed")
    save(store, "k", PATHS, src, {"second": 2})
    dst = tmp_path / "dst"
    assert restore(store, "k", dst) == {"first": 1}
    assert (dst / "metrics" / "featurize.json").read_text(encoding="utf-8") == '{"n": 3}\n'
    assert (dst / "artifacts" / "features" / "x.bin").read_bytes() == bytes(range(256))


def test_editing_a_source_file_in_place_after_save_leaves_the_entry_intact(tmp_path):
    src, store = _source(tmp_path / "src"), tmp_path / "store"
    save(store, "k", PATHS, src, SUMMARY)
    with open(src / "metrics" / "featurize.json", "w", encoding="utf-8") as fh:  # same inode, new bytes
        fh.write("edited")
    dst = tmp_path / "dst"
    assert restore(store, "k", dst) == SUMMARY
    assert (dst / "metrics" / "featurize.json").read_text(encoding="utf-8") == '{"n": 3}\n'


def test_restore_replaces_existing_folder_whole_and_overwrites_file(tmp_path):
    src, store, dst = _source(tmp_path / "src"), tmp_path / "store", tmp_path / "dst"
    save(store, "k", PATHS, src, SUMMARY)
    (dst / "artifacts" / "features").mkdir(parents=True)
    (dst / "artifacts" / "features" / "stale.bin").write_bytes(b"stale")
    (dst / "artifacts" / "features" / "x.bin").write_bytes(b"old")
    (dst / "metrics").mkdir()
    (dst / "metrics" / "featurize.json").write_text("old", encoding="utf-8")
    (dst / "metrics" / "other.json").write_text("kept", encoding="utf-8")  # not a stored path: untouched
    restore(store, "k", dst)
    assert not (dst / "artifacts" / "features" / "stale.bin").exists()
    assert _files(dst / "artifacts" / "features") == _files(src / "artifacts" / "features")
    assert (dst / "metrics" / "featurize.json").read_text(encoding="utf-8") == '{"n": 3}\n'
    assert (dst / "metrics" / "other.json").read_text(encoding="utf-8") == "kept"
    # no ".<name>.restore" temporaries left next to the restored paths
    assert sorted(p.name for p in (dst / "artifacts").iterdir()) == ["features"]
    assert sorted(p.name for p in (dst / "metrics").iterdir()) == ["featurize.json", "other.json"]


def test_path_absent_in_source_is_skipped(tmp_path):
    src, store, dst = _source(tmp_path / "src"), tmp_path / "store", tmp_path / "dst"
    paths = PATHS + ["plots/missing.png", "artifacts/nothing_here"]
    save(store, "k", paths, src, SUMMARY)
    assert restore(store, "k", dst) == SUMMARY
    assert not (dst / "plots").exists()
    assert not (dst / "artifacts" / "nothing_here").exists()
    assert set(_files(dst)) == {"artifacts/features/x.bin", "artifacts/features/deep/y.txt", "metrics/featurize.json"}


def test_restore_leaves_existing_destination_when_stored_path_is_absent(tmp_path):
    src, store, dst = _source(tmp_path / "src"), tmp_path / "store", tmp_path / "dst"
    save(store, "k", PATHS + ["plots/p.png"], src, SUMMARY)
    (dst / "plots").mkdir(parents=True)
    (dst / "plots" / "p.png").write_bytes(b"png")
    restore(store, "k", dst)
    assert (dst / "plots" / "p.png").read_bytes() == b"png"  # nothing stored for it, so nothing replaced


def test_clean_partial_removes_only_old_half_written_entries(tmp_path):
    """A save killed mid-copy leaves ``.<key>.*.tmp``; the next run removes it once it is old enough
    (the store is shared between roots, so a fresh one may belong to a run still writing)."""
    import os
    import time

    from dprelease.pipeline import stage_store

    store = tmp_path / "store"
    old, fresh = store / ".k1.abc.tmp", store / ".k2.def.tmp"
    for p in (old, fresh):
        (p / "files").mkdir(parents=True)
        (p / "files" / "moments.safetensors").write_bytes(b"private")
    past = time.time() - 7200
    os.utime(old, (past, past))
    assert stage_store.clean_partial(store) == [old]
    assert not old.exists() and fresh.exists()


def test_bytes_are_dvc_cache_objects_shared_between_entries(tmp_path):
    """An entry indexes objects of a DVC cache (``files/md5/ab/cdef…``, read-only, owner-only cache folder):
    the same bytes under two keys are one object, and a given cache (a DVC project's) is used as is."""
    import hashlib
    import stat

    src, store, dvc_cache = _source(tmp_path / "src"), tmp_path / "store", tmp_path / "project" / ".dvc" / "cache"
    save(store, "k1", PATHS, src, SUMMARY, dvc_cache)
    save(store, "k2", ["artifacts/features"], src, {}, dvc_cache)
    x = src / "artifacts" / "features" / "x.bin"
    obj = object_path(dvc_cache, hashlib.md5(x.read_bytes()).hexdigest())
    assert (
        stored_file(store, "k1", "artifacts/features/x.bin")
        == obj
        == stored_file(store, "k2", "artifacts/features/x.bin")
    )
    assert obj.read_bytes() == x.read_bytes() and stat.S_IMODE(obj.stat().st_mode) == 0o444
    assert stat.S_IMODE(dvc_cache.stat().st_mode) == 0o700
    assert len([p for p in (dvc_cache / "files" / "md5").rglob("*") if p.is_file()]) == 3  # 3 distinct files
    assert not (store / "cache").exists()
    assert restore(store, "k2", tmp_path / "dst") == {}


def test_corrupt_object_discards_the_entry_and_the_object(tmp_path):
    import os

    src, store = _source(tmp_path / "src"), tmp_path / "store"
    save(store, "k", PATHS, src, SUMMARY)
    obj = stored_file(store, "k", "artifacts/features/x.bin")
    os.chmod(obj, 0o600)
    obj.write_bytes(b"tampered")
    assert verify(store, "k") is None
    assert restore(store, "k", tmp_path / "dst") is None
    assert not (store / "k").exists() and not obj.exists()  # neither is reused
    assert not (tmp_path / "dst" / "artifacts" / "features").exists()  # the root is untouched
    assert save(store, "k", PATHS, src, SUMMARY) and restore(store, "k", tmp_path / "dst2") == SUMMARY
