"""`dprelease verify --release DIR --key agency.pub` (dprelease.verify) and `predict --key` / `sanitize --key`:
the manifest proves a folder is whole, the signature proves who made it. Each tampering case is one an attacker
who also rewrites the manifest's sha256 can do: it passes the hash checks, so only the signature can catch it."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pandas as pd
import pytest
from safetensors.torch import load_file, save_file

from dprelease.cli import main as cli
from dprelease.io import read_json, write_json
from dprelease.release_check import MANIFEST, SIGNATURE, file_digests
from dprelease.signing import PUBLIC, ensure_key, sign_folder
from release_helpers import (AGENCY, CODES, agency, published, rehash, run_predict, signed_copy,  # noqa: F401
                             tiny_release, verify_cli, verify_refused, write_narratives)


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
    from dprelease.backends.encoder import encoder_reference
    from dprelease.gpp.model import Encoder
    from dprelease.gpp.sanitizer import guarantee

    keys, signer = agency
    folder = tmp_path / "release-gpp"
    folder.mkdir()
    save_file(Encoder(384, 4, (8,)).state_dict(), str(folder / "model.safetensors"))
    write_json(folder / "model.json", {"mechanism": "gpp", "d_in": 384, "d_z": 4, "hidden": [8]})
    record = guarantee({"adversary_auc": 0.62, "noprivacy_adversary_auc": 0.8})
    write_json(folder / MANIFEST, {"kind": "sanitizer", "mechanism": "gpp", "input": encoder_reference(),
                                   "guarantee": record, "files": file_digests(folder)})
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
    err = verify_refused(capsys, release, agency[0] / PUBLIC, "signed by another key", "Mallory", other.key_id[:16],
                   agency[1].key_id[:16])
    assert "refused" in err


def test_a_file_that_is_not_a_public_key_is_one_line(release, tmp_path, capsys):
    bad = tmp_path / "agency.pub"
    bad.write_text("hello\n", encoding="utf-8")
    verify_refused(capsys, release, bad, "not a PEM public key")


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
    rc, out, _ = verify_cli(capsys, rel, keys / PUBLIC)
    assert rc == 0 and "toy sanitizer release signed by" in out and "ε = 2" in out
    write_json(rel / "model.json", {"d": 4})  # the probe: a changed file, its sha256 patched in
    rehash(rel)
    assert cli(args + ["--output", str(tmp_path / "b.parquet")]) == 2
    assert "signature does not match" in capsys.readouterr().err and not (tmp_path / "b.parquet").exists()
    assert cli(["sanitize", "--release", str(rel), "--input", str(src), "--output", str(tmp_path / "c.parquet")]) == 0
    assert "no --key given" in capsys.readouterr().err  # without a key it runs, and says what was not checked


def test_guarantee_text_of_each_claim_in_one_line():
    from dprelease.privacy import guarantee
    from dprelease.verify import guarantee_text

    u = guarantee.uncertified(9.31, 4.655, certified_directions=19, parameters=126_316).as_dict()
    assert guarantee_text(u) == ("SWAG-PPM: no ε, index 2Δ̂ = 9.31 (not DP; certified in 19 of 126,316 directions), "
                                 "δ none (no differential-privacy claim) (ppm_uncertified)")
    assert guarantee_text(guarantee.ppm(7.145, 3.57).as_dict()).startswith("SWAG-PPM: ε = 7.145, δ asymptotic")
