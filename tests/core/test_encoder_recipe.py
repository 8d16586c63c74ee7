"""The shipped public encoder's record (core/encoder_recipe.py, docs/encoder.md): what the card says about it and
the period check that keeps the encoder's corpus public."""

from __future__ import annotations

import pytest

from dprelease.core.config import load_params
from dprelease.core.data.records import DataError
from dprelease.core.encoder_recipe import check_period, describe, recipe, reference
from tests.conftest import ROOT


def test_the_card_names_the_public_data_that_shaped_the_encoder():
    r = recipe()
    words = describe()
    assert f"{r['corpus']['reports']} public reports dated up to 2015-12-31" in words and "top 2 layers" in words
    assert reference() == {"weights_sha256": r["weights_sha256"], "layers": [4, 5], "corpus": r["corpus"]["what"]}


def test_a_private_period_holding_the_corpus_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"proxy.until 2015-06-30 is before 2015-12-31") as e:
        check_period("2015-06-30")
    assert "\n" not in str(e.value)
    check_period("2015-12-31")
    check_period("2016-03-31")
    from dprelease.core.data.stages import featurize

    params = load_params(ROOT / "params.yaml", {"proxy.until": "2015-06-30"})
    with pytest.raises(DataError, match="features.encoder: pretrained"):
        featurize(params, tmp_path)
