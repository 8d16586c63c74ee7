"""A second operator's path (issue 38): the private keys exported and imported under a passphrase
(dprelease.core.release.key_transfer), and the refusal to make a release with keys other than the recorded ones
(dprelease.core.privacy.key_guard) — in the flow, the `secret` stage and `dprelease key init`. The DVC push/pull between two
clones is tests/tasks/test_dvc_record.py."""

from __future__ import annotations

import json
import shutil
import stat

import pytest
import yaml
from conftest import make_root, slice_raw

from dprelease.cli import main as dprelease
from dprelease.core.config import parse_params
from dprelease.core.errors import ConfigError
from dprelease.core.privacy import key_guard, secret
from dprelease.core.release import key_transfer, signing

PW = "correct horse battery staple"


@pytest.fixture
def params():
    return parse_params(slice_raw())


def _project(path, params, *, test_key=True):
    root = make_root(path, test_key=test_key)
    (root / "params.yaml").write_text(yaml.safe_dump(params.model_dump(mode="json"), sort_keys=False))
    secret.init(root / params.artifacts)
    signing.ensure_key(signing.key_folder(params, root))
    return root


def _lock(root, params, *, secret_md5=None, agency_md5=None):
    """A dvc.lock that records the keys' public files as `dvc repro` / the flow would."""
    sid = root / params.artifacts / "secret" / "key_id.json"
    pub = signing.key_folder(params, root) / "agency.pub"
    md5 = lambda p: __import__("hashlib").md5(p.read_bytes()).hexdigest()  # noqa: E731
    lock = {
        "schema": "2.0",
        "stages": {
            "secret": {
                "cmd": "dprelease stage secret",
                "outs": [
                    {"path": f"{params.artifacts}/secret/key_id.json", "hash": "md5", "md5": secret_md5 or md5(sid)}
                ],
            },
            "publish": {
                "cmd": "dprelease stage publish",
                "deps": [{"path": signing.public_key_dep(params), "hash": "md5", "md5": agency_md5 or md5(pub)}],
            },
        },
    }
    (root / "dvc.lock").write_text(yaml.safe_dump(lock))


def _ids(root, params):
    return secret.key_id(root / params.artifacts), signing.load_signer(signing.key_folder(params, root)).key_id


def test_export_then_import_gives_the_same_keys(tmp_path, params, monkeypatch, capsys):
    a, b = _project(tmp_path / "a", params), make_root(tmp_path / "b", test_key=False)
    (b / "params.yaml").write_text((a / "params.yaml").read_text())
    monkeypatch.setenv(key_transfer.PASSPHRASE_ENV, PW)
    monkeypatch.chdir(a)
    assert dprelease(["key", "export-private", "--to", str(tmp_path / "xfer")]) == 0
    xfer = tmp_path / "xfer"
    assert stat.S_IMODE(xfer.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in xfer.iterdir())
    key_hex = (a / params.artifacts / "secret" / "key").read_text().strip()
    agency_pem = (signing.key_folder(params, a) / "agency.key").read_bytes()
    blob = b"".join(f.read_bytes() for f in xfer.iterdir())
    assert key_hex.encode() not in blob and bytes.fromhex(key_hex) not in blob  # encrypted, never in the clear
    assert agency_pem not in blob and b"ENCRYPTED PRIVATE KEY" in (xfer / key_transfer.AGENCY_FILE).read_bytes()
    monkeypatch.chdir(b)
    monkeypatch.setenv(key_transfer.PASSPHRASE_ENV, "not the passphrase at all")
    assert dprelease(["key", "import-private", "--from", str(xfer)]) == 2
    assert "wrong passphrase" in capsys.readouterr().err and not (b / params.artifacts / "secret" / "key").exists()
    monkeypatch.setenv(key_transfer.PASSPHRASE_ENV, PW)
    assert dprelease(["key", "import-private", "--from", str(xfer)]) == 0
    assert _ids(b, params) == _ids(a, params)
    for folder in (b / params.artifacts / "secret", signing.key_folder(params, b)):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in folder.iterdir() if f.is_file())
    assert dprelease(["key", "import-private", "--from", str(xfer)]) == 0  # again: kept, nothing replaced
    assert "kept the randomness key" in capsys.readouterr().out


def test_import_refuses_a_different_key_and_export_a_used_folder(tmp_path, params, monkeypatch):
    a, c = _project(tmp_path / "a", params), _project(tmp_path / "c", params)
    secret.rotate(c / params.artifacts)  # c: another randomness key
    pw = PW.encode()
    key_transfer.export_private(params, a, tmp_path / "xfer", pw)
    with pytest.raises(ConfigError, match="a different randomness key is here"):
        key_transfer.import_private(params, c, tmp_path / "xfer", pw)
    with pytest.raises(ConfigError, match="not an empty folder"):
        key_transfer.export_private(params, a, tmp_path / "xfer", pw)
    (tmp_path / "xfer" / key_transfer.INFO).chmod(0o644)
    with pytest.raises(ConfigError, match="readable by others"):
        key_transfer.import_private(params, make_root(tmp_path / "d", test_key=False), tmp_path / "xfer", pw)
    monkeypatch.delenv(key_transfer.PASSPHRASE_ENV, raising=False)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    with pytest.raises(ConfigError, match="DPRELEASE_KEY_PASSPHRASE"):
        key_transfer.passphrase(confirm=True)


def test_keys_other_than_dvc_lock_records_are_refused(tmp_path, params):
    root = _project(tmp_path / "a", params)
    _lock(root, params)
    assert key_guard.check(params, root) == []  # the recorded keys: nothing to say
    secret.rotate(root / params.artifacts)  # a rotation here: the recorded key is retired, known
    signing.rotate(signing.key_folder(params, root))
    assert key_guard.check(params, root) == []
    # a clone with keys of its own (made by `dprelease key init` / the first stage): refused, one line each
    other = _project(tmp_path / "b", params, test_key=False)
    (other / "dvc.lock").write_text((root / "dvc.lock").read_text())
    with pytest.raises(key_guard.KeyMismatchError, match="randomness key .* is not the key") as err:
        key_guard.check(params, other)
    assert "\n" not in str(err.value) and "--new-key" in str(err.value)
    with pytest.raises(key_guard.KeyMismatchError, match="agency key .* is not the key"):
        key_guard.check(params, other, keys=("agency",))
    # --new-key: accepted, and the replaced keys recorded in each key folder's history
    lines = key_guard.check(params, other, new_key=True)
    assert len(lines) == 2 and all(line.startswith("--new-key") for line in lines)
    assert key_guard.check(params, other) == []
    hist = json.loads((other / params.artifacts / "secret" / "history.json").read_text())
    assert hist["replaced"][0]["key"] == "randomness" and hist["key_ids"]
    assert json.loads((signing.key_folder(params, other) / "history.json").read_text())["replaced"]


def test_a_missing_key_where_dvc_lock_records_one_says_import_or_rotate(tmp_path, params, monkeypatch, capsys):
    root = _project(tmp_path / "a", params)
    _lock(root, params)
    clone = make_root(tmp_path / "clone", test_key=False)
    for name in ("params.yaml", "dvc.lock"):
        (clone / name).write_text((root / name).read_text())
    with pytest.raises(key_guard.KeyMismatchError, match="no randomness key .* import-private"):
        key_guard.check(params, clone)
    monkeypatch.chdir(clone)
    # `dvc repro`'s first stage and `make repro`'s `dprelease key init` refuse too, making nothing
    assert dprelease(["stage", "secret"]) == 2
    assert "no randomness key" in capsys.readouterr().err
    assert not (clone / params.artifacts / "secret" / "key").exists()
    assert dprelease(["key", "init"]) == 2
    assert "no agency signing key" in capsys.readouterr().err
    assert not (signing.key_folder(params, clone) / "agency.key").exists()
    monkeypatch.setenv(key_guard.NEW_KEY_ENV, "1")  # `make repro NEW_KEY=1`: a new key, recorded
    assert dprelease(["stage", "secret"]) == 0
    assert (clone / params.artifacts / "secret" / "key").is_file()


def test_the_release_flow_refuses_another_key_before_anything_runs(tmp_path, params, monkeypatch, capsys):
    import flows.release as fr

    root = _project(tmp_path / "a", params)
    _lock(root, params)
    shutil.rmtree(root / params.artifacts / "secret")  # a key made afresh here (`dprelease secret init`)
    secret.init(root / params.artifacts)
    ran = []
    monkeypatch.setattr(fr, "release_flow", lambda *a, **k: ran.append(1), raising=False)
    assert fr.main(["--root", str(root), "--no-track"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "randomness key" in err[0] and "--new-key" in err[0] and not ran
