"""The ``linear_ppm:`` params section: declared defaults, validation, the frontier stage's name."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dprelease.core.config import load_params, parse_params
from dprelease.mechanisms.linear_ppm import params as lp


def test_section_defaults_and_the_project_params():
    p = parse_params({}).linear_ppm
    assert p.variant == "risk" and p.sampler.chains >= 2 and p.diagnostics.divergences_max == 0
    assert p.sampler.kind == "hmc_split" == load_params("params.yaml").linear_ppm.sampler.kind
    assert lp.FRONTIER == "frontier_linear_ppm" and lp.SECTION[0] == "linear_ppm"
    assert [e for e in load_params("params.yaml").linear_ppm.frontier.censored_epsilons] == [4.0, 8.0, 16.0]


@pytest.mark.parametrize(
    "bad",
    [
        {"variant": "other"},
        {"temperature": 0.0},
        {"sampler": {"chains": 1}},
        {"sampler": {"kind": "nuts"}},
        {"diagnostics": {"rhat_max": 1.0}},
        {"frontier": {"censored_epsilons": [-1.0]}},
        {"unknown": 1},
        {"release": " "},
    ],
)
def test_invalid_values_are_refused(bad):
    with pytest.raises((ValidationError, ValueError)):
        lp.LinearPPMParams(**bad)
