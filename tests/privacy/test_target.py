"""The ε comparison arms are matched to (dprelease.privacy.target): the configured target, else the
SWAG-PPM release's ε read from its guarantee record, else a clear error."""

from __future__ import annotations

import pytest

from dprelease.config import parse_params
from dprelease.errors import DataError
from dprelease.io import write_json
from dprelease.layout import Layout
from dprelease.privacy.guarantee import censored, ppm
from dprelease.privacy.target import compared_epsilon


def _layout(tmp_path, **dpsgd):
    params = parse_params({"dpsgd": dpsgd} if dpsgd else {})
    return params, Layout.from_params(params, tmp_path)


def test_the_release_epsilon_is_matched_when_no_target_is_set(tmp_path):
    params, lay = _layout(tmp_path)
    assert params.dpsgd.target_epsilon is None
    write_json(lay.metrics / "release.json", {"guarantee": ppm(2.4, 1.2).as_dict(), "weighted_f1": 0.7})
    assert compared_epsilon(params, lay) == 2.4
    write_json(lay.metrics / "release.json", {"guarantee": censored(1.0, 0.3, weights="w").as_dict()})
    assert compared_epsilon(params, lay) == 1.0  # whatever kind the release claims, its ε


def test_a_configured_target_wins_over_the_release(tmp_path):
    params, lay = _layout(tmp_path, target_epsilon=3.0)
    write_json(lay.metrics / "release.json", {"guarantee": ppm(2.4, 1.2).as_dict()})
    assert compared_epsilon(params, lay) == 3.0
    (lay.metrics / "release.json").unlink()
    assert compared_epsilon(params, lay) == 3.0  # no release needed then


def test_no_target_and_no_release_is_a_clear_error(tmp_path):
    params, lay = _layout(tmp_path)
    with pytest.raises(FileNotFoundError, match="dpsgd.target_epsilon is not set") as info:
        compared_epsilon(params, lay)
    assert "\n" not in str(info.value)



@pytest.mark.parametrize("record", [{"epsilon": 2.0}, None, {"mechanism": "non-private", "kind": "none",
                                                            "epsilon": None, "delta_reason": "none"}])
def test_a_release_record_without_a_usable_epsilon_is_a_one_line_error(tmp_path, record):
    params, lay = _layout(tmp_path)
    write_json(lay.metrics / "release.json", {"guarantee": record} if record is not None else {"weighted_f1": 0.7})
    with pytest.raises(DataError, match="release.json: no usable guarantee record") as info:
        compared_epsilon(params, lay)
    assert "\n" not in str(info.value)
