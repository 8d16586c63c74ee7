"""mia/stages: the privacy audit's stage declarations — every audited arm's model folder is a dep of
``privacy_audit`` and is written by that arm's own training stage; arms that need a setting are refused
before any stage runs."""

from __future__ import annotations

import pytest

from dprelease.compare.mia.attack import arm_folder
from dprelease.compare.mia.stages import check, declare
from dprelease.contracts import plugins
from dprelease.core.config import parse_params
from dprelease.core.errors import ConfigError
from dprelease.pipeline import registry


def _produced_by(stages: dict, folder: str) -> list[str]:
    return [s.name for s in stages.values() if any(folder == o or folder.startswith(o + "/") for o in s.produced)]


def test_each_audited_arm_folder_is_a_dep_and_its_stage_writes_it():
    params = parse_params({"ppm": {"reweight": True}})
    stages = {s.name: s for s in registry.stages(params)}
    audit = {s.name: s for s in declare(params)}["privacy_audit"]
    for name in params.privacy_audit.arms:
        folder = arm_folder(params, name)
        assert folder in audit.deps, name
        assert _produced_by(stages, folder) == [plugins.arms()[name].stage], name


def test_an_arm_the_params_cannot_run_is_refused_by_section():
    with pytest.raises(ConfigError, match=r"^privacy_audit\.arms: swag_ppm_reweighted needs ppm\.reweight"):
        check(parse_params({"ppm": {"reweight": False}, "compare": {"arms": ["nonprivate"]}}))
    check(
        parse_params(
            {
                "ppm": {"reweight": False},
                "privacy_audit": {"arms": ["nonprivate", "dpsgd"]},
                "compare": {"arms": ["nonprivate", "dpsgd"]},
            }
        )
    )  # nothing refused
