"""The pyfunc wrapper's input handling (loading and predicting: tests/flows/test_retrain_flow.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from dprelease.errors import ReleaseError
from dprelease.service.pyfunc_model import narratives


def test_inputs_it_accepts():
    assert narratives(pd.DataFrame({"narrative": [" a ", "b"]})) == ["a", "b"]
    assert narratives(pd.DataFrame({"id": [1], "Final Narrative": ["x"]})) == ["x"]
    assert narratives(pd.DataFrame({"whatever": ["y"]})) == ["y"]                # a single column
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

    from dprelease.service.pyfunc_model import KEY_ENV, AutocoderModel
    from dprelease.signing import PUBLIC, ensure_key
    from release_helpers import CODES, tiny_release

    agency, _ = ensure_key(tmp_path / "agency")
    other, _ = ensure_key(tmp_path / "other", signer="Mallory")
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "agency" / PUBLIC))
    model = AutocoderModel()
    model.load_context(SimpleNamespace(artifacts={"release": str(tiny_release(tmp_path / "good", signer=agency))}))
    assert model.predict(None, pd.DataFrame({"narrative": ["fell from a ladder"]}))["code"].tolist() == [CODES[0]]
    forged = tiny_release(tmp_path / "forged", signer=other)
    with pytest.raises(ReleaseError, match="signed by another key"):
        model.load_context(SimpleNamespace(artifacts={"release": str(forged)}))
