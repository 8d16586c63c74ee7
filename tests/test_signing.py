"""Signed releases (dprelease.signing, dprelease.verify, `dprelease verify` / `key`, `predict --key`,
`sanitize --key`): the manifest proves a folder is whole, the signature proves who made it. Each tampering
case here is one an attacker who also rewrites the manifest's sha256 can do: it passes the hash checks, so
only the signature can catch it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess

import numpy as np
import pandas as pd
import pytest
from safetensors.torch import load_file, save_file

from dprelease.cli import main as cli
from dprelease.errors import ConfigError, ReleaseError
from dprelease.io import read_json, write_json
from dprelease.release_check import MANIFEST, SIGNATURE, file_digests
from dprelease.signing import KEY, PUBLIC, RETIRED, check_signature, ensure_key, load_signer, sign_folder
from release_helpers import CODES, TITLES, rehash, run_predict, tiny_release, write_narratives

AGENCY = "Test Safety Agency"


@pytest.fixture(scope="module")
def agency(tmp_path_factory):
    keys = tmp_path_factory.mktemp("agency") / "keys"
    signer, made = ensure_key(keys, signer=AGENCY)
    assert made
    return keys, signer


@pytest.fixture(scope="module")
def published(agency, tmp_path_factory):
    return tiny_release(tmp_path_factory.mktemp("published") / "release", signer=agency[1])


@pytest.fixture
def release(published, tmp_path):
    """A private copy of the signed release (tests that tamper work on it)."""
    dst = tmp_path / "release"
    shutil.copytree(published, dst)
    return dst


def _verify(capsys, folder, key):
    rc = cli(["verify", "--release", str(folder), "--key", str(key)])
    out = capsys.readouterr()
    return rc, out.out.strip(), out.err.strip()


def _refused(capsys, folder, key, *needles):
    rc, out, err = _verify(capsys, folder, key)
    assert rc == 2 and out == "" and err.startswith("dprelease: error:") and "\n" not in err, (rc, out, err)
    for n in needles:
        assert n in err, err
    return err


# the key -----------------------------------------------------------------------------------------------------------
def test_key_is_private_and_made_once(agency):
    keys, signer = agency
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700
    for p in keys.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    again, made = ensure_key(keys, signer="someone else")
    assert not made and again.key_id == signer.key_id and again.name == AGENCY  # created once, never replaced


def test_a_private_key_others_can_read_is_refused(tmp_path):
    keys = tmp_path / "keys"
    ensure_key(keys)
    os.chmod(keys / KEY, 0o644)
    with pytest.raises(ConfigError, match="readable by others"):
        load_signer(keys)


def test_the_private_key_never_reaches_the_release(agency, published):
    keys, _ = agency
    secret = (keys / KEY).read_bytes()
    body = b"".join(secret.splitlines()[1:-1])  # the base64 of the PKCS#8 key
    assert len(body) > 40
    for f in published.rglob("*"):
        if f.is_file():
            assert body not in f.read_bytes() and b"PRIVATE KEY" not in f.read_bytes(), f
    assert sorted(p.name for p in published.iterdir()) == sorted(
        ["README.md", "labels.json", "model.json", "model.safetensors", MANIFEST, SIGNATURE])


# dprelease verify -------------------------------------------------------------------------------------------------------
def test_verify_prints_signer_manifest_sha_and_guarantee(agency, published, capsys):
    keys, signer = agency
    rc, out, err = _verify(capsys, published, keys / PUBLIC)
    assert rc == 0 and err == "" and "\n" not in out, (out, err)
    assert f"signed by {AGENCY} (key {signer.key_id[:16]})" in out
    assert hashlib.sha256((published / MANIFEST).read_bytes()).hexdigest() in out
    assert "guarantee: SWAG-PPM: ε = 1.5" in out and "ppm_local_asymptotic" in out


def test_openssl_verifies_the_signature_without_dprelease(agency, published):
    """The documented partner check with OpenSSL 3 alone (raw Ed25519 signature of release.json)."""
    if not shutil.which("openssl"):
        pytest.skip("no openssl on this machine")
    keys, _ = agency
    cmd = ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(keys / PUBLIC), "-rawin",
           "-in", str(published / MANIFEST), "-sigfile", str(published / SIGNATURE)]
    ok = subprocess.run(cmd, capture_output=True, text=True)
    assert ok.returncode == 0 and "Verified Successfully" in ok.stdout, ok.stdout + ok.stderr


def _new_weights(folder):
    state = load_file(str(folder / "model.safetensors"))
    state = {k: v + 0.5 for k, v in state.items()}
    save_file(state, str(folder / "model.safetensors"))


def _new_titles(folder):
    write_json(folder / "labels.json", {"codes": CODES, "titles": ["Anything", "else", "here"]})


def _new_guarantee(folder):
    manifest = read_json(folder / MANIFEST)
    manifest["guarantee"]["epsilon"] = 0.01
    write_json(folder / MANIFEST, manifest)


@pytest.mark.parametrize("tamper", [_new_weights, _new_titles, _new_guarantee],
                         ids=["weights", "label-titles", "guarantee"])
def test_a_rewritten_release_with_patched_hashes_is_refused(agency, release, capsys, tamper):
    """The probe: rewrite the weights (or every title, or ε) and patch the sha256 into release.json — the
    hash checks pass, the signature does not."""
    keys, _ = agency
    tamper(release)
    rehash(release)
    from dprelease.release import verify_release

    verify_release(release)  # whole, as far as the manifest can tell
    _refused(capsys, release, keys / PUBLIC, "signature does not match release.json")


def test_an_unsigned_release_is_refused(agency, release, capsys):
    (release / SIGNATURE).unlink()
    _refused(capsys, release, agency[0] / PUBLIC, "not signed")


def test_a_broken_signature_is_refused(agency, release, capsys):
    sig = bytearray((release / SIGNATURE).read_bytes())
    sig[5] ^= 1
    (release / SIGNATURE).write_bytes(bytes(sig))
    _refused(capsys, release, agency[0] / PUBLIC, "signature does not match")


def test_a_release_signed_by_another_key_names_both(agency, release, tmp_path, capsys):
    other, _ = ensure_key(tmp_path / "other", signer="Mallory")
    shutil.rmtree(release)
    tiny_release(release, signer=other)
    err = _refused(capsys, release, agency[0] / PUBLIC, "signed by another key", "Mallory", other.key_id[:16],
                   agency[1].key_id[:16])
    assert "refused" in err


def test_a_file_that_is_not_a_public_key_is_one_line(release, tmp_path, capsys):
    bad = tmp_path / "agency.pub"
    bad.write_text("hello\n", encoding="utf-8")
    _refused(capsys, release, bad, "not a PEM public key")


def test_signature_is_of_the_exact_manifest_bytes(agency, release):
    keys, _ = agency
    manifest = read_json(release / MANIFEST)
    (release / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")  # same content, other bytes
    with pytest.raises(ReleaseError, match="signature does not match"):
        check_signature(release, keys / PUBLIC)


# predict --key and sanitize --key ------------------------------------------------------------------------------------
def test_predict_with_the_key_codes_and_without_it_says_so(agency, published, tmp_path, capsys):
    src = write_narratives(tmp_path)
    rc, out, err = run_predict(capsys, published, src, tmp_path / "a.csv", "--key", str(agency[0] / PUBLIC))
    assert rc == 0 and err == "", err
    assert set(pd.read_csv(tmp_path / "a.csv", dtype=str)["code"]) == {CODES[0]}
    rc, out, err = run_predict(capsys, published, src, tmp_path / "b.csv")
    assert rc == 0 and len(err.splitlines()) == 1 and "no --key given" in err and "not checked" in err


def test_predict_refuses_a_rewritten_release_when_given_the_key(agency, release, tmp_path, capsys):
    _new_weights(release)
    rehash(release)
    out = tmp_path / "coded.csv"
    rc, _, err = run_predict(capsys, release, write_narratives(tmp_path), out, "--key", str(agency[0] / PUBLIC))
    assert rc == 2 and "signature does not match" in err and "\n" not in err and not out.exists()
    (release / SIGNATURE).unlink()
    rc, _, err = run_predict(capsys, release, write_narratives(tmp_path), out, "--key", str(agency[0] / PUBLIC))
    assert rc == 2 and "not signed" in err and not out.exists()


def _toy_sanitizer(folder, signer):
    folder.mkdir()
    write_json(folder / "model.json", {"d": 3})
    (folder / "README.md").write_text("card\n", encoding="utf-8")
    write_json(folder / MANIFEST, {"kind": "sanitizer", "mechanism": "toy", "guarantee": {"epsilon": 2.0},
                                   "files": file_digests(folder)})
    sign_folder(folder, signer)
    return folder


def _toy(release_dir, texts, *, seed):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"z": list(rng.normal(size=(len(texts), 3)).astype(np.float32))}), {"epsilon": 2.0}


def test_sanitize_key_refuses_a_rewritten_sanitizer_release(agency, tmp_path, monkeypatch, capsys):
    from dprelease import registry

    monkeypatch.setattr(registry, "sanitizer", lambda mechanism: _toy)
    keys, signer = agency
    rel, src = _toy_sanitizer(tmp_path / "san", signer), write_narratives(tmp_path)
    args = ["sanitize", "--release", str(rel), "--input", str(src), "--key", str(keys / PUBLIC)]
    assert cli(args + ["--output", str(tmp_path / "a.parquet")]) == 0
    assert capsys.readouterr().err == ""
    rc, out, _ = _verify(capsys, rel, keys / PUBLIC)
    assert rc == 0 and "toy sanitizer release signed by" in out and "ε = 2" in out
    write_json(rel / "model.json", {"d": 4})  # the probe: a changed file, its sha256 patched in
    rehash(rel)
    assert cli(args + ["--output", str(tmp_path / "b.parquet")]) == 2
    assert "signature does not match" in capsys.readouterr().err and not (tmp_path / "b.parquet").exists()
    assert cli(["sanitize", "--release", str(rel), "--input", str(src), "--output", str(tmp_path / "c.parquet")]) == 0
    assert "no --key given" in capsys.readouterr().err  # without a key it runs, and says what was not checked


# rotation -------------------------------------------------------------------------------------------------------------
def test_rotation_is_one_command_and_re_signs_the_releases(agency, published, tmp_path, capsys):
    import yaml

    root = tmp_path / "project"
    root.mkdir()
    shutil.copytree(agency[0], root / "artifacts" / "keys")
    shutil.copytree(published, root / "release")
    (root / "params.yaml").write_text(yaml.safe_dump({}), encoding="utf-8")
    old_pub = (root / "artifacts/keys" / PUBLIC).read_bytes()
    cwd = os.getcwd()
    os.chdir(root)
    try:
        assert cli(["key", "rotate", "--signer", "Rotated Agency"]) == 0
        out = capsys.readouterr().out
        assert cli(["key", "export", "--output", "new.pub"]) == 0
        capsys.readouterr()
    finally:
        os.chdir(cwd)
    assert "re-signed:" in out and "release" in out
    retired = root / "artifacts/keys" / RETIRED / agency[1].key_id[:16]
    assert (retired / PUBLIC).read_bytes() == old_pub and (retired / KEY).is_file()
    assert stat.S_IMODE(retired.stat().st_mode) == 0o700
    new = load_signer(root / "artifacts/keys")
    assert new.key_id != agency[1].key_id and new.name == "Rotated Agency"
    rc, line, _ = _verify(capsys, root / "release", root / "new.pub")
    assert rc == 0 and "signed by Rotated Agency" in line
    _refused(capsys, root / "release", retired / PUBLIC, "signed by another key")
    # the files themselves did not change, only who signed them
    assert read_json(root / "release" / MANIFEST)["files"] == read_json(published / MANIFEST)["files"]

