"""SWAG-PPM's own guarantee kinds (swag_ppm/kinds.py): declared by the mechanism, found by name."""

from __future__ import annotations

import pytest

from dprelease.contracts import plugins
from dprelease.core.privacy import guarantee
from dprelease.mechanisms.swag_ppm import kinds


def test_swag_ppm_declares_the_kinds_only_it_makes():
    assert [k.name for k in kinds.KINDS] == ["ppm_censored_local", "ppm_uncertified"]
    assert all(guarantee.kind(k.name) is k for k in kinds.KINDS)
    assert [k for k in plugins.guarantee_kinds() if k.name in ("ppm_censored_local", "ppm_uncertified")] == list(
        kinds.KINDS
    )


def test_an_uncertified_record_is_checked_by_its_kind():
    with pytest.raises(ValueError, match="needs certified_directions r < parameters d"):
        guarantee.uncertified(7.1, 3.55, certified_directions=5, parameters=5)
    with pytest.raises(ValueError, match="needs its index 2Δ̂"):
        guarantee.Guarantee(
            "SWAG-PPM",
            "ppm_uncertified",
            None,
            None,
            guarantee.NO_DP_CLAIM,
            {"certified_directions": 1, "parameters": 5},
        )
    g = guarantee.uncertified(7.1452, 3.5726, certified_directions=19, parameters=126_316)
    assert g.meaning == kinds.uncertified_text(g.quantities)
    assert g.claim_text == "index 2Δ̂ = 7.145 (not DP; certified in 19 of 126,316 directions)"
