"""`dprelease verify --release DIR --key agency.pub` (dprelease.core.release.verify) and `predict --key` / `sanitize --key`:
the manifest proves a folder is whole, the signature proves who made it. Each tampering case is one an attacker
who also rewrites the manifest's sha256 can do: it passes the hash checks, so only the signature can catch it.
The signature is checked by default: no key (no --key, no DPRELEASE_AGENCY_KEY) is a one-line refusal, and
``--no-signature-check`` is the loud opt-out."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pandas as pd
import pytest
from release_helpers import (  # noqa: F401
    AGENCY,
    CODES,
    agency,
    published,
    rehash,
    run_predict,
    signed_copy,
    tiny_release,
    verify_cli,
    verify_refused,
    write_narratives,
)
from safetensors.torch import load_file, save_file

from dprelease.cli import main as cli
from dprelease.core.io import read_json, write_json
from dprelease.core.release.check import MANIFEST, SIGNATURE, file_digests
from dprelease.core.release.signing import KEY_ENV, PUBLIC, ensure_key, sign_folder


@pytest.fixture(autouse=True)
def no_ambient_key(monkeypatch):
    """The key comes from each test's own flags (an agency key set in the environment would stand in for them)."""
    monkeypatch.delenv(KEY_ENV, raising=False)


@pytest.fixture
def release(signed_copy):
    """A private copy of the agency's signed release (tests that tamper work on it)."""
    return signed_copy


# dprelease verify -------------------------------------------------------------------------------------------------------
def test_verify_prints_signer_manifest_sha_and_guarantee(agency, published, capsys):
    keys, signer = agency
    rc, out, err = verify_cli(capsys, published, keys / PUBLIC)
    assert rc == 0 and err == "" and "\n" not in out, (out, err)
    assert f"signed by {AGENCY} (key {signer.key_id[:16]})" in out
    assert hashlib.sha256((published / MANIFEST).read_bytes()).hexdigest() in out
    assert "guarantee: SWAG-PPM: ε = 1.5" in out and "ppm_local_asymptotic" in out


def test_verify_of_a_gpp_sanitizer_names_its_empirical_guarantee(agency, tmp_path, capsys):
    """GPP claims no ε: the one line says so and gives the attribute probe's AUC its guarantee rests on."""
    from dprelease.core.backends.encoder import encoder_reference
    from dprelease.mechanisms.gpp.model import Encoder
    from dprelease.mechanisms.gpp.sanitizer import guarantee

    keys, signer = agency
    folder = tmp_path / "release-gpp"
    folder.mkdir()
    save_file(Encoder(384, 4, (8,)).state_dict(), str(folder / "model.safetensors"))
    write_json(folder / "model.json", {"mechanism": "gpp", "d_in": 384, "d_z": 4, "hidden": [8]})
    record = guarantee({"adversary_auc": 0.62, "noprivacy_adversary_auc": 0.8})
    write_json(
        folder / MANIFEST,
        {
            "kind": "sanitizer",
            "mechanism": "gpp",
            "input": encoder_reference(),
            "guarantee": record,
            "files": file_digests(folder),
        },
    )
    sign_folder(folder, signer)
    rc, out, err = verify_cli(capsys, folder, keys / PUBLIC)
    assert rc == 0 and err == "" and "gpp sanitizer release" in out, (out, err)
    assert "guarantee: GPP: no ε" in out and "(empirical_probe); attribute-probe AUC 0.620" in out


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


@pytest.mark.parametrize(
    "tamper", [_new_weights, _new_titles, _new_guarantee], ids=["weights", "label-titles", "guarantee"]
)
def test_a_rewritten_release_with_patched_hashes_is_refused(agency, release, capsys, tamper):
    """The probe: rewrite the weights (or every title, or ε) and patch the sha256 into release.json — the
    hash checks pass, the signature does not."""
    keys, _ = agency
    tamper(release)
    rehash(release)
    from dprelease.core.release.folder import verify_release

    verify_release(release)  # whole, as far as the manifest can tell
    verify_refused(capsys, release, keys / PUBLIC, "signature does not match release.json")


def test_an_unsigned_release_is_refused(agency, release, capsys):
    (release / SIGNATURE).unlink()
    verify_refused(capsys, release, agency[0] / PUBLIC, "not signed")


def test_a_broken_signature_is_refused(agency, release, capsys):
    sig = bytearray((release / SIGNATURE).read_bytes())
    sig[5] ^= 1
    (release / SIGNATURE).write_bytes(bytes(sig))
    verify_refused(capsys, release, agency[0] / PUBLIC, "signature does not match")


def test_a_release_signed_by_another_key_names_both(agency, release, tmp_path, capsys):
    other, _ = ensure_key(tmp_path / "other", signer="Mallory")
    shutil.rmtree(release)
    tiny_release(release, signer=other)
    err = verify_refused(
        capsys,
        release,
        agency[0] / PUBLIC,
        "signed by another key",
        "Mallory",
        other.key_id[:16],
        agency[1].key_id[:16],
    )
    assert "refused" in err


def test_a_file_that_is_not_a_public_key_is_one_line(release, tmp_path, capsys):
    bad = tmp_path / "agency.pub"
    bad.write_text("hello\n", encoding="utf-8")
    verify_refused(capsys, release, bad, "not a PEM public key")


# predict --key and sanitize --key ------------------------------------------------------------------------------------
def test_predict_with_the_key_codes_and_without_one_refuses(agency, published, tmp_path, capsys, monkeypatch):
    src = write_narratives(tmp_path)
    rc, out, err = run_predict(capsys, published, src, tmp_path / "a.csv", "--key", str(agency[0] / PUBLIC))
    assert rc == 0 and err == "", err
    assert set(pd.read_csv(tmp_path / "a.csv", dtype=str)["code"]) == {CODES[0]}
    rc, out, err = run_predict(capsys, published, src, tmp_path / "b.csv")
    assert rc == 2 and out == "" and "\n" not in err and not (tmp_path / "b.csv").exists(), err
    assert err.startswith("dprelease: error:") and "no agency public key" in err and "--key" in err
    monkeypatch.setenv(KEY_ENV, str(agency[0] / PUBLIC))  # the key from the environment instead of --key
    rc, out, err = run_predict(capsys, published, src, tmp_path / "c.csv")
    assert rc == 0 and err == "" and (tmp_path / "c.csv").exists(), err


def test_a_tampered_release_without_flags_is_one_line_and_writes_nothing(release, tmp_path, capsys):
    """The measured failure: a rewritten release with patched hashes, and no --key — it used to be coded
    (exit 0, nonsense codes). Now nothing is loaded without a key to check who signed it."""
    _new_weights(release)
    _new_titles(release)
    rehash(release)
    out = tmp_path / "coded.csv"
    rc, stdout, err = run_predict(capsys, release, write_narratives(tmp_path), out)
    assert rc == 2 and stdout == "" and err.startswith("dprelease: error:") and "\n" not in err, err
    assert "refused" in err and "no agency public key" in err and "--no-signature-check" in err
    assert not out.exists() and not list(tmp_path.glob(".coded.csv.*"))


def _another_agency(tmp_path):
    other, _ = ensure_key(tmp_path / "other", signer="Mallory")
    return tmp_path / "other" / PUBLIC


def _rsa_key(tmp_path):
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    path = tmp_path / "rsa.pub"
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024).public_key()
    path.write_bytes(key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    return path


def _private_key(tmp_path):
    from dprelease.core.release.signing import KEY

    ensure_key(tmp_path / "mine")
    return tmp_path / "mine" / KEY  # the private half, given where the public one goes


def _garbage(tmp_path):
    (tmp_path / "agency.pub").write_bytes(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    return tmp_path / "agency.pub"


WRONG_KEYS = {
    "another-agency": (_another_agency, "signed by another key"),
    "rsa": (_rsa_key, "not an Ed25519 public key"),
    "private-key": (_private_key, "not a PEM public key"),
    "garbage": (_garbage, "not a PEM public key"),
    "missing": (lambda tmp_path: tmp_path / "nope.pub", "no such key file"),
    "a-folder": (lambda tmp_path: tmp_path, "not a regular file"),
}


@pytest.mark.parametrize("wrong", list(WRONG_KEYS))
def test_a_wrong_key_is_one_line_for_predict_sanitize_and_verify(
    agency, published, tmp_path, monkeypatch, capsys, wrong
):
    from dprelease.pipeline import registry

    make, why = WRONG_KEYS[wrong]
    key = make(tmp_path)
    src = write_narratives(tmp_path)
    rc, stdout, err = run_predict(capsys, published, src, tmp_path / "a.csv", "--key", str(key))
    assert rc == 2 and stdout == "" and err.startswith("dprelease: error:") and "\n" not in err, err
    assert why in err and "Traceback" not in err and not (tmp_path / "a.csv").exists()
    monkeypatch.setattr(registry, "sanitizer", lambda mechanism: _toy)
    rel = _toy_sanitizer(tmp_path / "san", agency[1])
    assert (
        cli(
            [
                "sanitize",
                "--release",
                str(rel),
                "--input",
                str(src),
                "--output",
                str(tmp_path / "a.parquet"),
                "--key",
                str(key),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("dprelease: error:") and "\n" not in err and why in err, err
    assert not (tmp_path / "a.parquet").exists()
    verify_refused(capsys, published, key, why)


def test_verify_takes_the_key_from_the_environment_and_refuses_without_one(agency, published, monkeypatch, capsys):
    assert cli(["verify", "--release", str(published)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dprelease: error:") and "\n" not in err and "no agency public key" in err, err
    assert "--no-signature-check" not in err  # verify has no opt-out: checking is all it does
    monkeypatch.setenv(KEY_ENV, str(agency[0] / PUBLIC))
    assert cli(["verify", "--release", str(published)]) == 0
    assert f"signed by {AGENCY}" in capsys.readouterr().out


def test_no_signature_check_is_the_loud_opt_out(agency, release, tmp_path, capsys, monkeypatch):
    """The opt-out loads a release whose files match its manifest without asking who signed it, and says so
    on stderr, in one line, every time; with --key beside it it is a contradiction, refused."""
    _new_titles(release)
    rehash(release)
    src = write_narratives(tmp_path)
    for i in range(2):
        out = tmp_path / f"coded{i}.csv"
        rc, stdout, err = run_predict(capsys, release, src, out, "--no-signature-check")
        assert rc == 0 and f"coded {len(src.read_text().splitlines()) - 1} narratives" in stdout, err
        assert len(err.splitlines()) == 1 and err.startswith("dprelease: warning: --no-signature-check"), err
        assert "NOT checked" in err and str(release) in err
    assert set(pd.read_csv(out, dtype=str)["title"]) == {"Anything"}  # what the rewritten folder says
    monkeypatch.setenv(KEY_ENV, str(agency[0] / PUBLIC))  # the flag wins over the environment's key
    rc, _, err = run_predict(capsys, release, src, tmp_path / "env.csv", "--no-signature-check")
    assert rc == 0 and err.startswith("dprelease: warning: --no-signature-check"), err
    rc, _, err = run_predict(
        capsys, release, src, tmp_path / "both.csv", "--no-signature-check", "--key", str(agency[0] / PUBLIC)
    )
    assert rc == 2 and "\n" not in err and "contradict" in err and not (tmp_path / "both.csv").exists(), err


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
    write_json(
        folder / MANIFEST,
        {"kind": "sanitizer", "mechanism": "toy", "guarantee": {"epsilon": 2.0}, "files": file_digests(folder)},
    )
    sign_folder(folder, signer)
    return folder


def _toy(release_dir, texts, *, seed):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"z": list(rng.normal(size=(len(texts), 3)).astype(np.float32))}), {"epsilon": 2.0}


def test_sanitize_key_refuses_a_rewritten_sanitizer_release(agency, tmp_path, monkeypatch, capsys):
    from dprelease.pipeline import registry

    monkeypatch.setattr(registry, "sanitizer", lambda mechanism: _toy)
    keys, signer = agency
    rel, src = _toy_sanitizer(tmp_path / "san", signer), write_narratives(tmp_path)
    args = ["sanitize", "--release", str(rel), "--input", str(src), "--key", str(keys / PUBLIC)]
    assert cli(args + ["--output", str(tmp_path / "a.parquet")]) == 0
    assert capsys.readouterr().err == ""
    rc, out, _ = verify_cli(capsys, rel, keys / PUBLIC)
    assert rc == 0 and "toy sanitizer release signed by" in out and "ε = 2" in out
    write_json(rel / "model.json", {"d": 4})  # the probe: a changed file, its sha256 patched in
    rehash(rel)
    assert cli(args + ["--output", str(tmp_path / "b.parquet")]) == 2
    assert "signature does not match" in capsys.readouterr().err and not (tmp_path / "b.parquet").exists()
    base = ["sanitize", "--release", str(rel), "--input", str(src)]
    assert cli(base + ["--output", str(tmp_path / "c.parquet")]) == 2  # no key: refused, one line
    err = capsys.readouterr().err.strip()
    assert "no agency public key" in err and "\n" not in err and not (tmp_path / "c.parquet").exists()
    assert cli(base + ["--output", str(tmp_path / "d.parquet"), "--no-signature-check"]) == 0  # the opt-out
    err = capsys.readouterr().err.strip()
    assert err.startswith("dprelease: warning: --no-signature-check") and "\n" not in err, err


def test_guarantee_text_of_each_claim_in_one_line():
    from dprelease.core.privacy import guarantee
    from dprelease.core.release.verify import guarantee_text

    u = guarantee.uncertified(9.31, 4.655, certified_directions=19, parameters=126_316).as_dict()
    assert guarantee_text(u) == (
        "SWAG-PPM: no ε, index 2Δ̂ = 9.31 (not DP; certified in 19 of 126,316 directions), "
        "δ none (no differential-privacy claim) (ppm_uncertified)"
    )
    assert guarantee_text(guarantee.ppm(7.145, 3.57).as_dict()).startswith("SWAG-PPM: ε = 7.145, δ asymptotic")
