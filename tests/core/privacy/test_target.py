"""The declared levels (dprelease.core.privacy.target): DP-SGD's target ε and the censored arm's ε are numbers in
params.yaml, fixed before any run. Neither ever falls back to the release's measured ε, and a null level is a
one-line error for a mechanism that needs it."""

from __future__ import annotations

import inspect

import pytest
from conftest import ROOT

from dprelease.contracts.layout import Layout
from dprelease.core.config import ConfigError, load_params, parse_params
from dprelease.core.io import write_json
from dprelease.core.privacy import target
from dprelease.core.privacy.guarantee import ppm
from dprelease.mechanisms.dpsgd.stages import dpsgd_target
from dprelease.mechanisms.swag_ppm.arms import censor_epsilon

NO_DPSGD_ARMS = {"compare": {"arms": ["nonprivate", "swag_ppm"]}, "privacy_audit": {"arms": ["nonprivate"]}}


def test_the_defaults_are_declared_numbers():
    for params in (parse_params({}), load_params(ROOT / "params.yaml")):
        assert params.dpsgd.target_epsilon == 8.0 and dpsgd_target(params) == 8.0
        assert params.ppm.censor_epsilon == 8.0 and censor_epsilon(params) == 8.0


def test_the_release_is_never_read(tmp_path):
    """The probe: target.py returned the release's ε(D) when no target was set. A release on disk with another
    ε changes nothing, and nothing in the module names the release's record."""
    params = parse_params({"dpsgd": {"target_epsilon": 3.0}, "ppm": {"censor_epsilon": 5.0}})
    lay = Layout.from_params(params, tmp_path)
    write_json(lay.metrics / "swag_ppm_draw.json", {"guarantee": ppm(2.4, 1.2).as_dict()})
    assert dpsgd_target(params) == 3.0 and censor_epsilon(params) == 5.0
    assert "swag_ppm_draw.json" not in inspect.getsource(target).split('"""', 2)[2]  # below the docstring
    assert not hasattr(target, "compared_epsilon")


@pytest.mark.parametrize("fn, key", [(dpsgd_target, "dpsgd.target_epsilon"), (censor_epsilon, "ppm.censor_epsilon")])
def test_a_null_level_is_a_one_line_error_when_read(fn, key):
    section, leaf = key.split(".")
    params = parse_params({**NO_DPSGD_ARMS, section: {leaf: None}})  # no arm that needs it: parses
    with pytest.raises(ConfigError, match=key) as info:
        fn(params)
    assert "\n" not in str(info.value) and "declared" in str(info.value)


@pytest.mark.parametrize(
    "raw, key",
    [
        ({"dpsgd": {"target_epsilon": None}}, "dpsgd.target_epsilon"),  # the dpsgd arm is compared by default
        ({"dpsgd": {"target_epsilon": None}, "compare": {"arms": ["nonprivate"]}}, "dpsgd.target_epsilon"),  # audited
        ({"ppm": {"censor_epsilon": None}}, "ppm.censor_epsilon"),  # the censored arm is compared by default
        ({"ppm": {"censor_epsilon": None, "mechanism": "censored"}}, "ppm.censor_epsilon"),  # the censored release
    ],
)
def test_a_null_level_is_a_one_line_config_error_for_a_mechanism_that_needs_it(raw, key):
    with pytest.raises(ConfigError, match=key) as info:
        parse_params(raw)
    assert "\n" not in str(info.value)


def test_an_undeclared_level_names_the_params_file_read(monkeypatch):
    import pytest

    from dprelease.core.errors import ConfigError
    from dprelease.core.privacy.target import declared

    monkeypatch.setenv("DPRELEASE_PARAMS", "slice.yaml")
    with pytest.raises(ConfigError, match=r"^slice\.yaml: dpsgd\.target_epsilon: DP-SGD needs a declared ε"):
        declared(None, key="dpsgd.target_epsilon", who="DP-SGD")
    monkeypatch.delenv("DPRELEASE_PARAMS")
    with pytest.raises(ConfigError, match=r"^params\.yaml: "):
        declared(None, key="dpsgd.target_epsilon", who="DP-SGD")
    assert declared(8, key="dpsgd.target_epsilon", who="DP-SGD") == 8.0
