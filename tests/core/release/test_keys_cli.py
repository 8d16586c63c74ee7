"""`dprelease key` (dprelease.core.release.keys_cli): init once, show, export the public key, and rotation in one command
(retire, new key, re-sign the project's releases after checking them)."""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest
import yaml
from release_helpers import agency, published, rehash, verify_cli, verify_refused  # noqa: F401  (fixtures)

from dprelease.cli import main as cli
from dprelease.core.io import read_json
from dprelease.core.release.check import MANIFEST
from dprelease.core.release.signing import KEY, PUBLIC, RETIRED, load_signer


@pytest.fixture
def in_project(tmp_path):
    """A project folder (empty params.yaml: the default paths) as the working directory."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "params.yaml").write_text(yaml.safe_dump({}), encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(root)
    yield root
    os.chdir(cwd)


def test_init_show_export(in_project, capsys):
    assert cli(["key", "init", "--signer", "OSHA Data Office"]) == 0
    made = capsys.readouterr().out
    keys = in_project / "artifacts/keys"
    signer = load_signer(keys)
    assert made.startswith(f"made agency key {signer.key_id[:16]} (signer OSHA Data Office)")
    assert cli(["key", "init"]) == 0 and capsys.readouterr().out.startswith(f"kept agency key {signer.key_id[:16]}")
    assert cli(["key", "init", "--signer", "Someone Else"]) == 2  # a second key is a rotation, never a silent init
    assert "dprelease key rotate" in capsys.readouterr().err and load_signer(keys).key_id == signer.key_id
    assert cli(["key", "show"]) == 0 and signer.key_id in capsys.readouterr().out
    assert cli(["key", "export", "--output", "agency.pub"]) == 0 and "dprelease verify" in capsys.readouterr().out
    assert (in_project / "agency.pub").read_bytes() == (keys / PUBLIC).read_bytes()
    assert b"PRIVATE" not in (in_project / "agency.pub").read_bytes()


# rotation -------------------------------------------------------------------------------------------------------------
def test_rotation_is_one_command_and_re_signs_the_releases(agency, published, in_project, capsys):
    shutil.copytree(agency[0], in_project / "artifacts" / "keys")
    shutil.copytree(published, in_project / "release")
    old_pub = (in_project / "artifacts/keys" / PUBLIC).read_bytes()
    assert cli(["key", "rotate", "--signer", "Rotated Agency"]) == 0
    out = capsys.readouterr().out
    assert cli(["key", "export", "--output", "new.pub"]) == 0
    capsys.readouterr()
    assert "re-signed: release" in out and "not re-signed" not in out
    retired = in_project / "artifacts/keys" / RETIRED / agency[1].key_id[:16]
    assert (retired / PUBLIC).read_bytes() == old_pub and (retired / KEY).is_file()
    assert stat.S_IMODE(retired.stat().st_mode) == 0o700
    new = load_signer(in_project / "artifacts/keys")
    assert new.key_id != agency[1].key_id and new.name == "Rotated Agency"
    rc, line, _ = verify_cli(capsys, in_project / "release", in_project / "new.pub")
    assert rc == 0 and "signed by Rotated Agency" in line
    verify_refused(capsys, in_project / "release", retired / PUBLIC, "signed by another key")
    # the files themselves did not change, only who signed them
    assert read_json(in_project / "release" / MANIFEST)["files"] == read_json(published / MANIFEST)["files"]


def test_rotation_does_not_re_sign_a_folder_it_cannot_vouch_for(agency, published, in_project, capsys):
    """A release changed since it was signed (its sha256 patched in) keeps its old, now failing, signature."""
    shutil.copytree(agency[0], in_project / "artifacts" / "keys")
    shutil.copytree(published, in_project / "release")
    labels = read_json(in_project / "release/labels.json")
    labels["titles"][0] = "Forged"
    (in_project / "release/labels.json").write_text(json.dumps(labels), encoding="utf-8")
    rehash(in_project / "release")
    assert cli(["key", "rotate"]) == 0
    out = capsys.readouterr().out
    assert "re-signed: no release folder" in out and "not re-signed:" in out and "signature does not match" in out
    assert cli(["key", "export", "--output", "new.pub"]) == 0
    capsys.readouterr()
    verify_refused(capsys, in_project / "release", in_project / "new.pub", "signed by another key")
