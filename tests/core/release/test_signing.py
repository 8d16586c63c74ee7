"""The agency key and release signatures (dprelease.core.release.signing): made once, private, never in a release; the
signature is Ed25519 over the manifest's exact bytes, checkable with OpenSSL alone. The partner's command
(`dprelease verify`, `--key`): tests/core/release/test_verify.py; rotation: tests/core/release/test_keys_cli.py."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess

import pytest
from release_helpers import AGENCY, agency, published, signed_copy  # noqa: F401  (fixtures)

from dprelease.core.errors import ConfigError, ReleaseError
from dprelease.core.io import read_json
from dprelease.core.release.check import MANIFEST, SIGNATURE
from dprelease.core.release.signing import KEY, PUBLIC, check_signature, ensure_key, load_signer


@pytest.fixture
def release(signed_copy):
    """A private copy of the agency's signed release (tests that tamper work on it)."""
    return signed_copy


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
        ["README.md", "labels.json", "model.json", "model.safetensors", MANIFEST, SIGNATURE]
    )


def test_openssl_verifies_the_signature_without_dprelease(agency, published):
    """The documented partner check with OpenSSL 3 alone (raw Ed25519 signature of release.json)."""
    if not shutil.which("openssl"):
        pytest.skip("no openssl on this machine")
    keys, _ = agency
    cmd = [
        "openssl",
        "pkeyutl",
        "-verify",
        "-pubin",
        "-inkey",
        str(keys / PUBLIC),
        "-rawin",
        "-in",
        str(published / MANIFEST),
        "-sigfile",
        str(published / SIGNATURE),
    ]
    ok = subprocess.run(cmd, capture_output=True, text=True)
    assert ok.returncode == 0 and "Verified Successfully" in ok.stdout, ok.stdout + ok.stderr


def test_signature_is_of_the_exact_manifest_bytes(agency, release):
    keys, _ = agency
    manifest = read_json(release / MANIFEST)
    (release / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")  # same content, other bytes
    with pytest.raises(ReleaseError, match="signature does not match"):
        check_signature(release, keys / PUBLIC)
