"""`predict` (and `sanitize`) never harm the user's files (dprelease.core.release.outputs): the output path is refused when
it is the input, a link, a device or a FIFO; an input column is never overwritten; an input with no rows is
an error; and the weights coded with are the ones verified, even if the folder changes meanwhile."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat

import pandas as pd
import pytest
from release_helpers import CODES, NARRATIVES, run_predict, tiny_release, write_narratives

from dprelease.cli import main as cli
from dprelease.core.release import folder as release_mod
from dprelease.core.release.signing import PUBLIC, ensure_key


@pytest.fixture(scope="module")
def agency(tmp_path_factory):
    keys = tmp_path_factory.mktemp("agency") / "keys"
    return keys, ensure_key(keys)[0]


@pytest.fixture(scope="module")
def release(agency, tmp_path_factory):
    return tiny_release(tmp_path_factory.mktemp("rel") / "release", signer=agency[1])


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused(capsys, release, src, out, *needles, key=None):
    rc, stdout, err = run_predict(capsys, release, src, out, *(["--key", str(key)] if key is not None else []))
    assert rc == 2 and stdout == "" and err.startswith("dprelease: error:") and "\n" not in err, (rc, err)
    for n in needles:
        assert n in err, err
    return err


# the output path ------------------------------------------------------------------------------------------------------
def test_output_that_is_the_input_is_refused(release, tmp_path, capsys):
    src = write_narratives(tmp_path)
    before = _sha(src)
    _refused(capsys, release, src, src, "is the input file itself")
    assert _sha(src) == before


def test_output_that_is_a_hard_link_to_the_input_is_refused(release, tmp_path, capsys):
    src = write_narratives(tmp_path)
    before = _sha(src)
    os.link(src, tmp_path / "same.csv")
    _refused(capsys, release, src, tmp_path / "same.csv", "is the input file itself")
    assert _sha(src) == before


def test_output_that_is_a_symlink_is_refused_and_kept(release, tmp_path, capsys):
    src, target = write_narratives(tmp_path), tmp_path / "precious.txt"
    target.write_text("keep me\n", encoding="utf-8")
    link = tmp_path / "out.csv"
    link.symlink_to(target)
    _refused(capsys, release, src, link, "symbolic link", "refusing to replace it")
    assert link.is_symlink() and os.readlink(link) == str(target) and target.read_text() == "keep me\n"


def test_output_that_is_a_fifo_is_refused(release, tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    _refused(capsys, release, write_narratives(tmp_path), fifo, "a FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_output_that_is_a_character_device_is_refused(release, tmp_path, capsys):
    """The probe: as root, `--output /dev/null` would replace the system's node. Here a null device node
    made in a temporary folder (needs root) stands in for it."""
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    _refused(capsys, release, write_narratives(tmp_path), node, "a character device")
    assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_output_inside_the_release_folder_is_refused(agency, tmp_path, capsys):
    rel = tiny_release(tmp_path / "rel", signer=agency[1])
    before = {p.name: _sha(p) for p in rel.iterdir()}
    _refused(capsys, rel, write_narratives(tmp_path), rel / "README.md", "inside the release folder")
    assert {p.name: _sha(p) for p in rel.iterdir()} == before


def test_sanitize_output_that_is_the_input_is_refused(release, tmp_path, capsys):
    src = tmp_path / "in.parquet"
    src.write_bytes(b"not really parquet")
    rc = cli(["sanitize", "--release", str(release), "--input", str(src), "--output", str(src)])
    err = capsys.readouterr().err
    assert rc == 2 and "is the input file itself" in err and src.read_bytes() == b"not really parquet"


# input columns and rows --------------------------------------------------------------------------------------------------
def _coded_before(tmp_path):
    path = tmp_path / "coded_before.csv"
    pd.DataFrame(
        {"Final Narrative": NARRATIVES, "code": ["X1"] * 4, "title": ["mine"] * 4, "probability": ["0.5"] * 4}
    ).to_csv(path, index=False)
    return path


def test_an_input_column_is_never_overwritten(agency, release, tmp_path, capsys):
    src, out, key = _coded_before(tmp_path), tmp_path / "out.csv", agency[0] / PUBLIC
    _refused(capsys, release, src, out, "already has column(s) code, title, probability", "--column-prefix", key=key)
    assert not out.exists()
    rc, _, _ = run_predict(capsys, release, src, out, "--column-prefix", "predicted_", "--key", str(key))
    assert rc == 0
    coded = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert list(coded.columns) == [
        "Final Narrative",
        "code",
        "title",
        "probability",
        "predicted_code",
        "predicted_title",
        "predicted_probability",
    ]
    assert coded["code"].tolist() == ["X1"] * 4 and coded["title"].tolist() == ["mine"] * 4
    assert set(coded["predicted_code"]) == {CODES[0]}


def test_a_header_only_input_is_an_error_and_writes_nothing(agency, release, tmp_path, capsys):
    src, out = tmp_path / "empty.csv", tmp_path / "out.csv"
    src.write_text("id,Final Narrative\n", encoding="utf-8")
    _refused(capsys, release, src, out, "no narratives", "nothing written", key=agency[0] / PUBLIC)
    assert not out.exists()


# the files loaded are the files checked --------------------------------------------------------------------------------
def test_a_release_replaced_during_predict_does_not_mix_files(agency, tmp_path, capsys, monkeypatch):
    """The probe: the folder is republished (another valid, signed release) after it was verified and before
    the weights load. The codes must come from the verified files, read once."""
    rel = tiny_release(tmp_path / "rel", signer=agency[1], favour=0)
    other = tiny_release(tmp_path / "other", signer=agency[1], favour=2)
    real = release_mod.read_narratives

    def republish_then_read(*args, **kwargs):
        shutil.rmtree(rel)
        shutil.copytree(other, rel)
        return real(*args, **kwargs)

    monkeypatch.setattr(release_mod, "read_narratives", republish_then_read)
    out = tmp_path / "coded.csv"
    rc, _, err = run_predict(capsys, rel, write_narratives(tmp_path), out, "--key", str(agency[0] / PUBLIC))
    assert rc == 0, err
    assert set(pd.read_csv(out, dtype=str)["code"]) == {CODES[0]}  # the verified release's class, not CODES[2]
