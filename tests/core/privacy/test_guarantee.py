"""The guarantee record (privacy/guarantee.py): validation, JSON round trip, helper constructors, δ text."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import pytest

from dprelease.core.privacy import guarantee
from dprelease.core.privacy.guarantee import NO_DELTA_PPM, NOT_PRIVATE, Guarantee
from dprelease.mechanisms.swag_ppm.kinds import uncertified_text

KINDS = guarantee.kinds()


def _valid(kind: str) -> Guarantee:
    """One valid guarantee of each kind."""
    if kind == "none":
        return Guarantee("non-private", kind, None, None, NOT_PRIVATE)
    if kind == "empirical_probe":
        return guarantee.empirical_probe("GPP", 0.61, statement="a fresh probe's AUC")
    if kind == "ppm_local_asymptotic":
        return Guarantee("SWAG-PPM", kind, 2.0, None, NO_DELTA_PPM, {"local_sensitivity": 1.0})
    if kind == "ppm_uncertified":
        return guarantee.uncertified(7.1, 3.55, certified_directions=19, parameters=126_316)
    return Guarantee("m", kind, 1.5, 1e-5, None, {"noise_multiplier": 1.1})


# ------------------------------------------------------------------------------------------ construction


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_constructs_and_has_a_meaning(kind):
    g = _valid(kind)
    assert g.kind == kind
    assert isinstance(g.meaning, str) and g.meaning.strip()
    # an uncertified record's meaning carries its own numbers (index, r of d); every other kind's is the kind's text
    assert g.meaning == (
        uncertified_text(g.quantities)
        if kind == "ppm_uncertified"
        else KINDS[kind].meaning
        if kind != "ppm_censored"
        else KINDS[kind].describe({})
    )


def test_the_documented_nine_kinds_are_known():
    """The kinds docs/guarantees.md (K) documents; a new mechanism's own kinds join them (its ``kinds`` module)."""
    assert {
        "ppm_local_asymptotic",
        "ppm_censored",
        "ppm_censored_local",
        "dp_accountant",
        "bayesian_dp",
        "none",
        "empirical_lower_bound",
        "empirical_probe",
        "ppm_uncertified",
    } <= set(KINDS)


def test_unknown_kind_is_rejected_and_named():
    with pytest.raises(ValueError, match="unknown guarantee kind 'pure_dp'") as e:
        Guarantee("m", "pure_dp", 1.0, 1e-5)
    assert "\n" not in str(e.value)
    assert all(name in str(e.value) for name in KINDS)  # the known ones, a mechanism's own (ppm_uncertified) too


def test_a_kind_of_a_package_not_imported_yet_is_found_without_its_plug_in():
    """A release.json read by a fresh process (``dprelease verify``): its kind is found in the packages' light
    ``kinds`` modules; neither the maker's plug-in nor torch is imported."""
    code = (
        "import sys\n"
        "from dprelease.core.privacy.guarantee import Guarantee, uncertified\n"
        "assert 'dprelease.mechanisms.swag_ppm.kinds' not in sys.modules\n"
        "g = uncertified(7.1, 3.55, certified_directions=19, parameters=126316)\n"
        "assert Guarantee.from_dict(g.as_dict()).meaning.startswith('index 2')\n"
        "assert 'dprelease.mechanisms.swag_ppm.kinds' in sys.modules\n"
        "bad = [m for m in ('torch', 'dprelease.mechanisms.swag_ppm.plugin', 'dprelease.pipeline.registry') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_kind_declared_twice_is_refused(monkeypatch):
    monkeypatch.setattr(guarantee, "_KNOWN", dict(guarantee._KNOWN))
    twin = dataclasses.replace(guarantee.kind("none"))
    with pytest.raises(RuntimeError, match="'none' declared twice"):
        guarantee.register(twin)


def test_delta_and_reason_both_is_rejected():
    with pytest.raises(ValueError, match="not both or neither"):
        Guarantee("m", "dp_accountant", 1.0, 1e-5, "some reason")


def test_delta_and_reason_neither_is_rejected():
    with pytest.raises(ValueError, match="not both or neither"):
        Guarantee("m", "dp_accountant", 1.0)
    with pytest.raises(ValueError, match="not both or neither"):
        Guarantee("non-private", "none", None)


def test_none_kind_with_an_epsilon_is_rejected():
    with pytest.raises(ValueError, match="'none' guarantee has no ε"):
        Guarantee("non-private", "none", 0.0, None, NOT_PRIVATE)


def test_an_empirical_probe_claims_no_epsilon_and_records_the_auc():
    g = guarantee.empirical_probe("GPP", 0.61, statement="probe", noprivacy_adversary_auc=0.8)
    assert (g.epsilon, g.delta, g.delta_reason) == (None, None, guarantee.NO_DP_CLAIM)
    assert g.quantities == {"adversary_auc": 0.61, "statement": "probe", "noprivacy_adversary_auc": 0.8}
    assert Guarantee.from_dict(json.loads(json.dumps(g.as_dict()))) == g
    with pytest.raises(ValueError, match="'empirical_probe' guarantee has no ε"):
        Guarantee("GPP", "empirical_probe", 1.0, None, guarantee.NO_DP_CLAIM)
    for auc in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match="an AUC lies in"):
            guarantee.empirical_probe("GPP", auc, statement="probe")


@pytest.mark.parametrize("eps", [-0.1, -1e-12, math.nan, math.inf, -math.inf, None])
@pytest.mark.parametrize("kind", ["dp_accountant", "ppm_local_asymptotic", "bayesian_dp", "empirical_lower_bound"])
def test_bad_epsilon_is_rejected(kind, eps):
    with pytest.raises(ValueError, match="ε must be a finite non-negative number"):
        Guarantee("m", kind, eps, 1e-5)


@pytest.mark.parametrize("eps", [0, 0.0, 1e-9, 8.0, 1e6])
def test_finite_non_negative_epsilon_is_accepted(eps):
    assert Guarantee("m", "dp_accountant", eps, 1e-5).epsilon == eps


@pytest.mark.parametrize("delta", [-1e-9, -1.0, 1.0, 1.5, math.nan, math.inf])
def test_delta_outside_unit_interval_is_rejected(delta):
    with pytest.raises(ValueError, match=r"δ must lie in \[0, 1\)"):
        Guarantee("m", "dp_accountant", 1.0, delta)


@pytest.mark.parametrize("delta", [0.0, 1e-12, 0.5, 0.999999])
def test_delta_in_unit_interval_is_accepted(delta):
    assert Guarantee("m", "dp_accountant", 1.0, delta).delta == delta


def test_quantity_named_delta_is_rejected():
    with pytest.raises(ValueError, match="'delta' is reserved"):
        Guarantee("SWAG-PPM", "ppm_local_asymptotic", 2.0, None, NO_DELTA_PPM, {"delta": 1.0})
    with pytest.raises(ValueError, match="'delta' is reserved"):
        guarantee.ppm(2.0, 1.0, delta=1.0)
    with pytest.raises(TypeError):  # accountant's own δ argument: a quantity cannot take that name either
        guarantee.accountant("DP-SGD", 1.0, 1e-5, delta=1e-5)
    with pytest.raises(ValueError, match="'delta' is reserved"):
        guarantee.none(delta=0.0)


def test_error_message_names_the_mechanism():
    with pytest.raises(ValueError, match="^DP-SGD: ε"):
        Guarantee("DP-SGD", "dp_accountant", -1.0, 1e-5)
    with pytest.raises(ValueError, match="^DP-SGD: δ"):
        Guarantee("DP-SGD", "dp_accountant", 1.0, 2.0)


def test_record_is_frozen():
    g = _valid("dp_accountant")
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.epsilon = 0.0  # type: ignore[misc]


# -------------------------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_as_dict_from_dict_round_trip_through_json(kind):
    g = _valid(kind)
    d = g.as_dict()
    assert set(d) == {"mechanism", "kind", "epsilon", "delta", "delta_reason", "quantities"}
    back = Guarantee.from_dict(json.loads(json.dumps(d)))
    assert back == g
    assert back.delta_text == g.delta_text and back.meaning == g.meaning


def test_round_trip_of_helper_records_keeps_every_quantity():
    for g in (
        guarantee.ppm(1.234, 0.617, draws=1000, rounds=3),
        guarantee.accountant("DP-SGD", 3.0, 1.9e-4, noise_multiplier=0.9, sample_rate=0.01, steps=500),
        guarantee.none(epochs=2),
    ):
        back = Guarantee.from_dict(json.loads(json.dumps(g.as_dict())))
        assert back == g and back.quantities == g.quantities


def test_as_dict_is_a_copy():
    g = guarantee.ppm(2.0, 1.0, draws=10)
    d = g.as_dict()
    d["quantities"]["local_sensitivity"] = 99.0
    assert g.quantities["local_sensitivity"] == 1.0


def test_from_dict_validates():
    d = _valid("dp_accountant").as_dict()
    d["delta"] = 1.0
    with pytest.raises(ValueError, match="δ must lie"):
        Guarantee.from_dict(d)
    d = _valid("dp_accountant").as_dict()
    d["kind"] = "made_up"
    with pytest.raises(ValueError, match="unknown guarantee kind"):
        Guarantee.from_dict(d)


def test_from_dict_rejects_unknown_fields():
    d = _valid("none").as_dict()
    d["sigma"] = 1.0
    with pytest.raises(TypeError):
        Guarantee.from_dict(d)


# ------------------------------------------------------------------------------------------------ helpers


def test_ppm_helper():
    g = guarantee.ppm(3, 1.5, draws=200)
    assert g.mechanism == "SWAG-PPM" and g.kind == "ppm_local_asymptotic"
    assert g.epsilon == 3.0 and isinstance(g.epsilon, float)
    assert g.delta is None and g.delta_reason == NO_DELTA_PPM
    assert g.delta_text == "asymptotic, not quantified"
    assert g.quantities == {"local_sensitivity": 1.5, "draws": 200}
    assert isinstance(g.quantities["local_sensitivity"], float)
    assert guarantee.ppm(1.0, 0.5, mechanism="SWAG-PPM (selected)").mechanism == "SWAG-PPM (selected)"


def test_accountant_helper():
    g = guarantee.accountant("DP-SGD", 8, 0.00019, noise_multiplier=0.7, steps=100)
    assert g.kind == "dp_accountant" and g.mechanism == "DP-SGD"
    assert g.epsilon == 8.0 and isinstance(g.epsilon, float)
    assert g.delta == 0.00019 and isinstance(g.delta, float) and g.delta_reason is None
    assert g.delta_text == "0.00019"
    assert g.quantities == {"noise_multiplier": 0.7, "steps": 100}


def test_none_helper():
    g = guarantee.none()
    assert g.kind == "none" and g.mechanism == "non-private"
    assert g.epsilon is None and g.delta is None and g.delta_reason == NOT_PRIVATE
    assert g.delta_text == "none (not private)"
    assert g.quantities == {}
    assert guarantee.none("baseline", epochs=3).quantities == {"epochs": 3}


@pytest.mark.parametrize(
    "delta, text", [(0.00019, "0.00019"), (1e-5, "1e-05"), (0.0, "0"), (0.123456, "0.12"), (2.5e-7, "2.5e-07")]
)
def test_numeric_delta_text(delta, text):
    assert guarantee.accountant("DP-SGD", 1.0, delta).delta_text == text


def test_helpers_do_not_share_quantities_between_records():
    a, b = guarantee.none(), guarantee.none()
    assert a.quantities is not b.quantities


def test_none_guarantee_cannot_carry_a_delta():
    with pytest.raises(ValueError, match="no ε and no δ"):
        Guarantee("x", "none", None, 1e-5)


# ------------------------------------------------------------------------------ ppm_uncertified (no ε claim)


def test_uncertified_record_has_no_epsilon_and_says_so_in_one_line():
    g = guarantee.uncertified(7.1452, 3.5726, certified_directions=19, parameters=126_316, round=2)
    assert (g.kind, g.epsilon, g.delta, g.delta_reason) == ("ppm_uncertified", None, None, guarantee.NO_DP_CLAIM)
    assert g.quantities["uncertified_index"] == 7.1452 and g.quantities["round"] == 2
    assert g.meaning == (
        "index 2Δ̂ = 7.145, not a differential-privacy guarantee: the sampler is certified in 19 of 126,316 directions"
    )
    assert g.claim_text == "index 2Δ̂ = 7.145 (not DP; certified in 19 of 126,316 directions)"
    assert "ε =" not in g.claim_text and "ε =" not in g.meaning
    assert Guarantee.from_dict(json.loads(json.dumps(g.as_dict()))) == g


def test_claim_text_of_the_other_kinds():
    assert guarantee.ppm(7.14519, 3.5).claim_text == "ε = 7.145"
    assert guarantee.accountant("DP-SGD", 1.5, 1e-5).claim_text == "ε = 1.5, δ = 1e-05"
    assert guarantee.none().claim_text == "no ε (none)"


def test_uncertified_record_with_an_epsilon_is_rejected():
    q = {"uncertified_index": 7.1, "certified_directions": 19, "parameters": 100}
    with pytest.raises(ValueError, match="'ppm_uncertified' guarantee has no ε"):
        Guarantee("SWAG-PPM", "ppm_uncertified", 7.1, None, guarantee.NO_DP_CLAIM, q)


@pytest.mark.parametrize("index", [None, -0.1, math.nan, math.inf, "7.1"])
def test_uncertified_record_needs_a_finite_index(index):
    q = {"certified_directions": 19, "parameters": 100} | ({} if index is None else {"uncertified_index": index})
    with pytest.raises(ValueError, match="needs its index 2Δ̂"):
        Guarantee("SWAG-PPM", "ppm_uncertified", None, None, guarantee.NO_DP_CLAIM, q)


@pytest.mark.parametrize("r, d", [(100, 100), (101, 100), (None, 100), (19, None), (19.0, 100), (-1, 100), (True, 5)])
def test_uncertified_record_needs_fewer_certified_directions_than_parameters(r, d):
    q = (
        {"uncertified_index": 7.1}
        | ({} if r is None else {"certified_directions": r})
        | ({} if d is None else {"parameters": d})
    )
    with pytest.raises(ValueError, match="certified_directions r < parameters d"):
        Guarantee("SWAG-PPM", "ppm_uncertified", None, None, guarantee.NO_DP_CLAIM, q)


@pytest.mark.parametrize("kind", ["ppm_local_asymptotic", "ppm_censored", "dp_accountant"])
def test_an_epsilon_of_a_sampler_certified_in_fewer_than_all_directions_is_rejected(kind):
    delta = (None, NO_DELTA_PPM) if kind.startswith("ppm") else (1e-5, None)
    with pytest.raises(ValueError, match="certified in every direction.*19 of 126316.*'ppm_uncertified'"):
        Guarantee("SWAG-PPM", kind, 7.1, *delta, {"certified_directions": 19, "parameters": 126_316})
    with pytest.raises(ValueError, match="certified in every direction"):  # half a record is no record
        Guarantee("SWAG-PPM", kind, 7.1, *delta, {"certified_directions": 19})
    ok = Guarantee("SWAG-PPM", kind, 7.1, *delta, {"certified_directions": 126_316, "parameters": 126_316})
    assert ok.epsilon == 7.1


def test_coverage_sentence_is_one_sentence_and_names_both_sides():
    part = guarantee.coverage_sentence({"certified_directions": 19, "parameters": 126_316})
    full = guarantee.coverage_sentence({"certified_directions": 50, "parameters": 50, "temperature_min_all": 8e-11})
    for text in (part, full):
        assert text.count(". ") == 0 and text.endswith(".")
        assert "Certified:" in text and "not certified:" in text
    assert "19 of its 126,316" in part and "no ε is claimed" in part
    assert "all 50 parameter directions" in full and "T_min ≥ 8e-11" in full
