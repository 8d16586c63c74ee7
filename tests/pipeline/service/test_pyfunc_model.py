"""The pyfunc wrapper's input handling and its signature check when it loads (loading a registered model and
predicting: tests/flows/test_retrain_flow.py); `make serve-model`'s check before serving (serve_check)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from release_helpers import CODES

from dprelease.core.errors import ReleaseError
from dprelease.pipeline.service.pyfunc_model import narratives


def test_inputs_it_accepts():
    assert narratives(pd.DataFrame({"narrative": [" a ", "b"]})) == ["a", "b"]
    assert narratives(pd.DataFrame({"id": [1], "Final Narrative": ["x"]})) == ["x"]
    assert narratives(pd.DataFrame({"whatever": ["y"]})) == ["y"]  # a single column
    assert narratives(["p", "q"]) == ["p", "q"] and narratives(pd.Series(["r"])) == ["r"]


def test_bad_inputs_are_one_line():
    with pytest.raises(ReleaseError, match="no narrative column"):
        narratives(pd.DataFrame({"a": ["x"], "b": ["y"]}))
    with pytest.raises(ReleaseError, match=r"empty narrative in row\(s\) 2"):
        narratives(["ok", "  "])


def test_with_the_agency_key_set_only_a_release_it_signed_loads(tmp_path, monkeypatch):
    """``DPRELEASE_AGENCY_KEY`` (the MLflow model's way to take ``--key``): the agency's release loads and
    codes; the same release re-signed by another key does not load."""
    from types import SimpleNamespace

    from release_helpers import CODES, tiny_release

    from dprelease.core.release.signing import PUBLIC, ensure_key
    from dprelease.pipeline.service.pyfunc_model import KEY_ENV, AutocoderModel

    agency, _ = ensure_key(tmp_path / "agency")
    other, _ = ensure_key(tmp_path / "other", signer="Mallory")
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "agency" / PUBLIC))
    model = AutocoderModel()
    model.load_context(SimpleNamespace(artifacts={"release": str(tiny_release(tmp_path / "good", signer=agency))}))
    assert model.predict(None, pd.DataFrame({"narrative": ["fell from a ladder"]}))["code"].tolist() == [CODES[0]]
    forged = tiny_release(tmp_path / "forged", signer=other)
    with pytest.raises(ReleaseError, match="signed by another key"):
        model.load_context(SimpleNamespace(artifacts={"release": str(forged)}))


# the signature is checked by default when the model loads (issue 38) ------------------------------------------------
@pytest.fixture
def signed(tmp_path, monkeypatch):
    """(agency key folder, a release it signed); no key or opt-out in the environment to start with."""
    from release_helpers import tiny_release

    from dprelease.core.release.signing import KEY_ENV, NO_CHECK_ENV, ensure_key

    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(NO_CHECK_ENV, raising=False)
    agency, _ = ensure_key(tmp_path / "agency")
    return tmp_path / "agency", tiny_release(tmp_path / "release", signer=agency)


def _load(artifacts: dict):
    from types import SimpleNamespace

    from dprelease.pipeline.service.pyfunc_model import AutocoderModel

    model = AutocoderModel()
    model.load_context(SimpleNamespace(artifacts=artifacts))
    return model


def _one_line_without_crypto_frames(err) -> None:
    import traceback

    assert "\n" not in str(err) and err.__cause__ is None and (err.__context__ is None or err.__suppress_context__)
    assert not [f for f in traceback.extract_tb(err.__traceback__) if "cryptography" in f.filename]


def _rsa_key(path):
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    key = rsa.generate_private_key(public_exponent=65537, key_size=1024).public_key()
    path.write_bytes(key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    return path


@pytest.mark.parametrize("wrong", ["another-agency", "rsa", "garbage", "missing"])
def test_a_wrong_agency_key_is_a_clear_one_line_exception(signed, tmp_path, monkeypatch, wrong):
    from dprelease.core.release.signing import KEY_ENV, PUBLIC, ensure_key
    from dprelease.pipeline.service.pyfunc_model import ModelSignatureError

    keys, release = signed
    if wrong == "another-agency":
        ensure_key(tmp_path / "other", signer="Mallory")
    key = {
        "another-agency": tmp_path / "other" / PUBLIC,
        "rsa": _rsa_key(tmp_path / "rsa.pub"),
        "garbage": tmp_path / "garbage.pub",
        "missing": tmp_path / "nope.pub",
    }[wrong]
    if wrong == "garbage":
        key.write_bytes(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    monkeypatch.setenv(KEY_ENV, str(key))
    with pytest.raises(ModelSignatureError, match="the MLflow model's release does not load") as err:
        _load({"release": str(release), "agency_key": str(keys / PUBLIC)})  # the pinned key wins over the model's
    _one_line_without_crypto_frames(err.value)
    assert str(key) in str(err.value) and KEY_ENV in str(err.value)


def test_without_any_key_the_model_does_not_load(signed):
    from dprelease.pipeline.service.pyfunc_model import ModelSignatureError

    _, release = signed
    with pytest.raises(ModelSignatureError, match="no agency public key") as err:
        _load({"release": str(release)})
    _one_line_without_crypto_frames(err.value)
    assert "DPRELEASE_AGENCY_KEY" in str(err.value) and "DPRELEASE_NO_SIGNATURE_CHECK=1" in str(err.value)


def test_the_model_s_own_key_checks_integrity_and_says_it_is_not_authenticity(signed, tmp_path):
    import shutil

    from release_helpers import edit_json, rehash

    from dprelease.core.release.signing import PUBLIC
    from dprelease.pipeline.service.pyfunc_model import ModelSignatureError

    keys, release = signed
    model = _load({"release": str(release), "agency_key": str(keys / PUBLIC)})  # what log_model ships
    assert model.predict(None, pd.DataFrame({"narrative": ["fell"]}))["code"].tolist() == [CODES[0]]
    shutil.copytree(release, tmp_path / "tampered")
    edit_json(tmp_path / "tampered", "labels.json", titles=["x", "y", "z"])
    rehash(tmp_path / "tampered")
    with pytest.raises(ModelSignatureError, match="signature does not match") as err:
        _load({"release": str(tmp_path / "tampered"), "agency_key": str(keys / PUBLIC)})
    assert "integrity, not authenticity" in str(err.value)
    _one_line_without_crypto_frames(err.value)


def test_the_opt_out_loads_and_warns_at_every_load(signed, tmp_path, monkeypatch, capsys):
    from dprelease.core.release.check import SIGNATURE
    from dprelease.core.release.signing import NO_CHECK_ENV

    _, release = signed
    (release / SIGNATURE).unlink()  # unsigned: only the opt-out loads it
    monkeypatch.setenv(NO_CHECK_ENV, "1")
    for _ in range(2):
        model = _load({"release": str(release)})
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and NO_CHECK_ENV in err and "WITHOUT checking" in err, err
    assert model.predict(None, pd.DataFrame({"narrative": ["fell"]}))["code"].tolist() == [CODES[0]]


def test_mlflow_s_loader_raises_the_clear_exception(signed, tmp_path, monkeypatch):
    """Through ``mlflow.pyfunc.load_model`` itself, on a model saved as the registry logs it (release + key)."""
    import mlflow

    from dprelease.core.release.signing import KEY_ENV, PUBLIC
    from dprelease.pipeline.service.model_registry import MODEL_NAME  # noqa: F401 - the registry's module loads
    from dprelease.pipeline.service.pyfunc_model import ARTIFACT, KEY_ARTIFACT, SIGNATURE, ModelSignatureError

    keys, release = signed
    code = Path(__file__).resolve().parents[3] / "src" / "dprelease" / "pipeline" / "service" / "model_code.py"
    mlflow.pyfunc.save_model(
        str(tmp_path / "model"),
        python_model=str(code),
        signature=SIGNATURE,
        artifacts={ARTIFACT: str(release), KEY_ARTIFACT: str(keys / PUBLIC)},
    )
    model = mlflow.pyfunc.load_model(str(tmp_path / "model"))  # no key set: the model's own, integrity only
    assert model.predict(pd.DataFrame({"narrative": ["fell"]}))["code"].tolist() == [CODES[0]]
    monkeypatch.setenv(KEY_ENV, str(_rsa_key(tmp_path / "rsa.pub")))
    with pytest.raises(ModelSignatureError, match="not an Ed25519 public key") as err:
        mlflow.pyfunc.load_model(str(tmp_path / "model"))
    _one_line_without_crypto_frames(err.value)


# `make serve-model`'s check --------------------------------------------------------------------------------------------
@pytest.fixture
def store(tmp_path, monkeypatch):
    """(mlflow, client) on a fresh SQLite store (the tracking URI restored after)."""
    from conftest import fresh_registry, mlflow_globals

    with mlflow_globals(), fresh_registry(tmp_path / "store") as (mlflow, client, _):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow.get_tracking_uri())
        yield mlflow, client


def test_serving_before_any_model_is_registered_is_one_line(store, tmp_path, monkeypatch):
    import subprocess
    import sys

    from dprelease.core.errors import OneLineError
    from dprelease.pipeline.service.pyfunc_model import serve_check

    with pytest.raises(OneLineError, match="no registered model 'oiics-autocoder'") as err:
        serve_check("models:/oiics-autocoder@production")
    assert "\n" not in str(err.value) and "make retrain" in str(err.value) and "make serve" in str(err.value)
    out = subprocess.run(
        [sys.executable, "-m", "dprelease.pipeline.service.pyfunc_model", "models:/oiics-autocoder@production"],
        capture_output=True,
        text=True,
        timeout=900,
        env=os.environ | {"OMP_NUM_THREADS": "1"},
    )
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("dprelease: error: no registered model"), out.stderr
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'none.db'}")  # restored by the fixture
    with pytest.raises(OneLineError, match="no MLflow store at"):
        serve_check("models:/oiics-autocoder@production")
    assert not (tmp_path / "none.db").exists()  # the check creates no store


def test_serve_check_of_a_registered_model(store, signed, tmp_path, monkeypatch):
    """A model logged as a retrain logs it (release + the agency's key): no 'production' yet is one line; once
    promoted, the check passes with the model's own key, and refuses, in one line, with a wrong pinned key."""
    from dprelease.core.errors import OneLineError
    from dprelease.core.release.signing import KEY_ENV, PUBLIC, ensure_key
    from dprelease.pipeline.service import model_registry as mr
    from dprelease.pipeline.service.pyfunc_model import ModelSignatureError, serve_check

    mlflow, client = store
    keys, release = signed
    with mlflow.start_run():
        uri = mr.log_model(mlflow, release, key=keys / PUBLIC)  # scores the input example: the model loads
    version = mr.register(mlflow, "served", uri, {"release.digest": "x"})
    with pytest.raises(OneLineError, match=r"has no version 'production' \(registered: 1"):
        serve_check("models:/served@production")
    client.set_registered_model_alias("served", mr.PRODUCTION, version)
    line = serve_check("models:/served@production")
    assert "release signed by" in line and "integrity, not authenticity" in line and "\n" not in line
    ensure_key(tmp_path / "other", signer="Mallory")
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "other" / PUBLIC))
    with pytest.raises(ModelSignatureError, match="signed by another key") as err:
        serve_check("models:/served@production")
    assert "\n" not in str(err.value)
    monkeypatch.setenv(KEY_ENV, str(keys / PUBLIC))
    assert f"checked with {keys / PUBLIC}" in serve_check(f"models:/served/{version}")
