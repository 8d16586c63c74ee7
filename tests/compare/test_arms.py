"""compare.arms: an arm the comparison or the audit cannot run with these params is refused in one line."""

from __future__ import annotations

import pytest

from dprelease.compare.arms import check_arms


def test_an_arm_that_needs_a_setting_is_refused_with_the_reason():
    from dprelease.core.config import parse_params
    from dprelease.core.errors import ConfigError

    params = parse_params({"ppm": {"reweight": False}, "compare": {"arms": ["nonprivate", "swag_ppm_reweighted"]}})
    with pytest.raises(ConfigError, match=r"^compare\.arms: swag_ppm_reweighted needs ppm\.reweight: true$"):
        check_arms(params, ("compare",))
    check_arms(parse_params({"ppm": {"reweight": True}}), ("compare", "privacy_audit"))  # no error
