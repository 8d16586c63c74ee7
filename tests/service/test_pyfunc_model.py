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
